//! Kernel profilers of a recipe (`collect: [ncu]`, `[torch_profiler]`): the command or workload
//! executable runs under Nsight Compute (a bounded number of kernels, one metric: device time),
//! or its Python imports torch.profiler through a sitecustomize hook (aorta's libtorch
//! workloads read the same `AORTA_TORCH_PROFILE_OUT` and start libtorch's profiler themselves:
//! workloads/torch/src/profile.rs). Each trial's record gets one
//! [`KernelProfile`] per profiler; a profiler that cannot run leaves a note, never a failed
//! trial (it observes; the sanitizers of sanitize.rs judge). docs/diagnostics.md.

use aorta_exec::ProcessSpec;
use aorta_trial::{KernelProfile, KernelStat};
use std::path::Path;

/// Kernels ncu profiles per process unless the recipe says `collect: {ncu: {launch_count: N}}`.
pub const NCU_LAUNCH_COUNT: u32 = 200;
const NCU_CSV: &str = "ncu.csv";
const TORCH_JSON: &str = "torch_profile.json";
const HOOK: &str = include_str!("hooks/sitecustomize.py");

#[derive(Debug, Clone, PartialEq)]
pub enum Profiler {
    Ncu { launch_count: u32 },
    TorchProfiler,
}

impl Profiler {
    /// The recipe's collectors (validated when it was parsed).
    pub fn from_recipe(collect: &aorta_recipe::Collect) -> Vec<Profiler> {
        collect
            .collectors
            .iter()
            .filter_map(|(name, opts)| match name.as_str() {
                "ncu" => Some(Profiler::Ncu {
                    launch_count: opts
                        .get("launch_count")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(NCU_LAUNCH_COUNT),
                }),
                "torch_profiler" => Some(Profiler::TorchProfiler),
                _ => None,
            })
            .collect()
    }

    fn tool(&self) -> &'static str {
        match self {
            Profiler::Ncu { .. } => "ncu",
            Profiler::TorchProfiler => "torch_profiler",
        }
    }
}

fn empty(tool: &str, note: Option<String>) -> KernelProfile {
    KernelProfile {
        tool: tool.into(),
        kernels: Vec::new(),
        note,
    }
}

/// Sets the trial's process up for each profiler; returns the records' placeholders (a note
/// where the profiler cannot run).
pub fn prepare(
    profilers: &[Profiler],
    p: &mut ProcessSpec,
    dir: &Path,
    sanitized: bool,
) -> Vec<KernelProfile> {
    let mut out = Vec::new();
    for prof in profilers {
        let note = match prof {
            Profiler::Ncu { .. } if sanitized => {
                Some("not run: the cell runs under a sanitizer".to_string())
            }
            Profiler::Ncu { launch_count } => {
                match aorta_exec::find_cuda_tool("ncu", "AORTA_NCU") {
                    Ok(ncu) => {
                        let mut argv = vec![
                            ncu.display().to_string(),
                            "--csv".into(),
                            "--page".into(),
                            "raw".into(),
                            "--metrics".into(),
                            "gpu__time_duration.sum".into(),
                            "--launch-count".into(),
                            launch_count.to_string(),
                            "--target-processes".into(),
                            "all".into(),
                            "--log-file".into(),
                            dir.join(NCU_CSV).display().to_string(),
                        ];
                        argv.append(&mut p.argv);
                        p.argv = argv;
                        None
                    }
                    Err(e) => Some(format!("not run: {e}")),
                }
            }
            Profiler::TorchProfiler => match install_hook(p, dir) {
                Ok(()) => None,
                Err(e) => Some(format!("cannot write the profiler hook: {e}")),
            },
        };
        out.push(empty(prof.tool(), note));
    }
    out
}

fn install_hook(p: &mut ProcessSpec, dir: &Path) -> std::io::Result<()> {
    let hooks = dir.join(".aorta-hooks");
    std::fs::create_dir_all(&hooks)?;
    std::fs::write(hooks.join("sitecustomize.py"), HOOK)?;
    let rest = p
        .env
        .get("PYTHONPATH")
        .cloned()
        .or_else(|| std::env::var("PYTHONPATH").ok())
        .filter(|s| !s.is_empty());
    let path = match rest {
        Some(r) => format!("{}:{r}", hooks.display()),
        None => hooks.display().to_string(),
    };
    p.env.insert("PYTHONPATH".into(), path);
    p.env.insert(
        "AORTA_TORCH_PROFILE_OUT".into(),
        dir.join(TORCH_JSON).display().to_string(),
    );
    Ok(())
}

/// Reads each profiler's output into the record's placeholders.
pub fn collect(profiles: &mut [KernelProfile], dir: &Path) {
    for prof in profiles.iter_mut().filter(|p| p.note.is_none()) {
        let read = match prof.tool.as_str() {
            "ncu" => std::fs::read_to_string(dir.join(NCU_CSV))
                .map_err(|e| format!("no ncu output ({NCU_CSV}: {e})"))
                .and_then(|t| parse_ncu_csv(&t)),
            _ => std::fs::read_to_string(dir.join(TORCH_JSON))
                .map_err(|_| "no torch_profiler output: the trial ran neither Python that imports torch (and exits through its atexit handlers) nor aorta's training, inference or llm_determinism workload".to_string())
                .and_then(|t| {
                    serde_json::from_str::<KernelProfile>(&t)
                        .map(|p| (p.kernels, p.note))
                        .map_err(|e| format!("unreadable {TORCH_JSON}: {e}"))
                })
                .map(|(k, note)| {
                    prof.note = note;
                    k
                }),
        };
        match read {
            Ok(k) => prof.kernels = KernelStat::sum_by_name(k),
            Err(e) => prof.note = Some(e),
        }
    }
}

/// Nsight Compute's `--csv --page raw` output: a header row, a units row, one row per
/// profiled kernel launch (other lines — `==PROF==`, the program's output — are skipped).
pub fn parse_ncu_csv(text: &str) -> Result<Vec<KernelStat>, String> {
    let csv_text: String = text
        .lines()
        .filter(|l| l.starts_with('"'))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut rd = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(csv_text.as_bytes());
    let mut rows = rd.records();
    let header = match rows.next() {
        Some(Ok(h)) => h,
        _ => return Ok(Vec::new()),
    };
    let col = |name: &str| header.iter().position(|h| h == name);
    let (Some(id), Some(kernel), Some(time)) =
        (col("ID"), col("Kernel Name"), col("gpu__time_duration.sum"))
    else {
        return Err("ncu.csv has no Kernel Name / gpu__time_duration.sum columns".into());
    };
    let mut scale = 1e-3; // nanoseconds unless the units row says otherwise
    let mut out = Vec::new();
    for row in rows.flatten() {
        let field = |i: usize| row.get(i).unwrap_or("");
        if field(id).is_empty() {
            scale = match field(time) {
                "us" | "usecond" => 1.0,
                "ms" | "msecond" => 1e3,
                "s" | "second" => 1e6,
                _ => 1e-3,
            };
            continue;
        }
        let value: f64 = field(time).replace(',', "").parse().unwrap_or(0.0);
        out.push(KernelStat {
            name: field(kernel).to_string(),
            calls: 1,
            total_us: value * scale,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_h100_recording_reads_as_two_kernels_with_their_launches() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/gpu/h100-cuda13/ncu-clean-raw.csv"
        ))
        .unwrap();
        let k = KernelStat::sum_by_name(parse_ncu_csv(&text).unwrap());
        let names: Vec<(&str, u64)> = k.iter().map(|k| (k.name.as_str(), k.calls)).collect();
        assert_eq!(
            names,
            [
                ("saxpy(float, const float *, float *, int)", 10),
                ("fill(float *, float, int)", 2)
            ]
        );
        // 10 launches of 6.0-6.3 us (the units row says ns).
        assert!((k[0].total_us - 61.504).abs() < 1e-6, "{k:?}");
    }

    #[test]
    fn output_without_kernels_is_empty_and_a_foreign_csv_is_an_error() {
        assert!(parse_ncu_csv("==PROF== No kernels were profiled.\n")
            .unwrap()
            .is_empty());
        assert!(parse_ncu_csv("\"a\",\"b\"\n\"1\",\"2\"\n").is_err());
    }
}
