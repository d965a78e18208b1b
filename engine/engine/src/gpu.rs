//! GPU metrics around a probe-flow trial: VRAM in use and a throttle counter before spawn and
//! after exit (Tier 3's `vram_growth` and `thermal_throttle`, the record's `peak_vram_mib`), and
//! utilisation for the hang monitor's "GPU idle" vote.
//!
//! NVIDIA through NVML, loaded at run time (`nvml-wrapper` dlopens `libnvidia-ml.so.1`, so the
//! `aorta` binary links nothing of CUDA and starts anywhere); AMD through `amd-smi monitor`, as
//! AORTA 0.2.1 does (spec §5, Tier 3). With neither, every value is `None` and those detectors
//! stay silent. `AORTA_PROBE_AMDSMI_FAKE="vram=<MiB>,throttle=<n>[,util=<%>]"` replaces
//! amd-smi, as AORTA's test shim does; `AORTA_PROBE_AMDSMI_FAKE=@FILE` reads that text from FILE
//! at every reading, so a test's trial can change what the post-exit snapshot sees.

use aorta_classify::GpuSnapshot;
use nvml_wrapper::enum_wrappers::device::PerformancePolicy;
use nvml_wrapper::Nvml;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

const FAKE_VAR: &str = "AORTA_PROBE_AMDSMI_FAKE";

enum Source {
    Nvml(Box<Nvml>),
    AmdSmi,
    Fake(String),
    Absent,
}

fn source() -> &'static Source {
    static SOURCE: OnceLock<Source> = OnceLock::new();
    SOURCE.get_or_init(|| {
        if let Ok(spec) = std::env::var(FAKE_VAR) {
            return Source::Fake(spec);
        }
        if let Ok(n) = Nvml::init() {
            return Source::Nvml(Box::new(n));
        }
        let on_path = std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("amd-smi").is_file()));
        if on_path {
            Source::AmdSmi
        } else {
            Source::Absent
        }
    })
}

/// Whether any GPU metrics source is present (NVML, amd-smi or the fake).
pub fn available() -> bool {
    !matches!(source(), Source::Absent)
}

/// The NVML devices a trial may touch: its leased ids when they are indices, else all.
fn nvml_devices<'a>(n: &'a Nvml, leased: &[String]) -> Vec<nvml_wrapper::Device<'a>> {
    let indices: Vec<u32> = if leased.is_empty() {
        (0..n.device_count().unwrap_or(0)).collect()
    } else {
        leased.iter().filter_map(|d| d.parse().ok()).collect()
    };
    indices
        .into_iter()
        .filter_map(|i| n.device_by_index(i).ok())
        .collect()
}

/// VRAM used (MiB, summed) and a throttle counter over the devices the trial may touch.
pub fn snapshot(leased: &[String]) -> Option<GpuSnapshot> {
    match source() {
        Source::Nvml(n) => {
            let devs = nvml_devices(n, leased);
            if devs.is_empty() {
                return None;
            }
            let vram: Option<u64> = devs
                .iter()
                .map(|d| d.memory_info().ok().map(|m| m.used))
                .sum();
            // Time spent held back by the thermal policy, in ms: a counter, so growth = throttled.
            let throttle: Option<u64> = devs
                .iter()
                .map(|d| {
                    d.violation_status(PerformancePolicy::Thermal)
                        .ok()
                        .map(|v| v.violation_time)
                })
                .sum();
            Some(GpuSnapshot {
                vram_used_mib: vram.map(|b| (b >> 20) as i64),
                throttle: throttle.map(|ns| (ns / 1_000_000) as i64),
            })
        }
        Source::Fake(spec) => fake(spec).map(|(s, _)| s),
        Source::AmdSmi => amd_smi().map(|(s, _)| s),
        Source::Absent => None,
    }
}

/// How often [`PeakSampler`] reads: NVML calls cost microseconds, amd-smi is a process.
fn sample_every() -> Duration {
    match source() {
        Source::AmdSmi => Duration::from_secs(1),
        _ => Duration::from_millis(100),
    }
}

/// Reads VRAM in use on a thread while a trial runs, keeping the highest reading: the readings
/// before spawn and after exit miss everything a trial frees before it ends.
pub struct PeakSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<Option<i64>>>,
}

impl PeakSampler {
    /// Starts sampling `leased` (all devices when empty); `None` without a metrics source.
    pub fn start(leased: &[String]) -> Option<PeakSampler> {
        if !available() {
            return None;
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, devs, every) = (stop.clone(), leased.to_vec(), sample_every());
        let handle = std::thread::Builder::new()
            .name("aorta-vram".into())
            .spawn(move || {
                let mut peak: Option<i64> = None;
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::park_timeout(every);
                    if let Some(v) = snapshot(&devs).and_then(|s| s.vram_used_mib) {
                        peak = Some(peak.map_or(v, |p| p.max(v)));
                    }
                }
                peak
            })
            .ok()?;
        Some(PeakSampler {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops sampling; the highest reading taken, if any.
    pub fn finish(mut self) -> Option<i64> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let h = self.handle.take()?;
        h.thread().unpark();
        h.join().ok().flatten()
    }
}

/// Utilisation of the busiest device the trial may touch, in percent.
pub fn utilisation(leased: &[String]) -> Option<u32> {
    match source() {
        Source::Nvml(n) => nvml_devices(n, leased)
            .iter()
            .filter_map(|d| d.utilization_rates().ok().map(|u| u.gpu))
            .max(),
        Source::Fake(spec) => fake(spec).and_then(|(_, u)| u),
        Source::AmdSmi => amd_smi().and_then(|(_, u)| u),
        Source::Absent => None,
    }
}

fn fake(spec: &str) -> Option<(GpuSnapshot, Option<u32>)> {
    match spec.strip_prefix('@') {
        Some(file) => parse_fake(std::fs::read_to_string(file).ok()?.trim()),
        None => parse_fake(spec),
    }
}

fn parse_fake(spec: &str) -> Option<(GpuSnapshot, Option<u32>)> {
    let mut s = GpuSnapshot::default();
    let mut util = None;
    for part in spec.split(',') {
        let (k, v) = part.split_once('=')?;
        match k.trim() {
            "vram" => s.vram_used_mib = Some(v.trim().parse().ok()?),
            "throttle" => s.throttle = Some(v.trim().parse().ok()?),
            "util" => util = Some(v.trim().parse().ok()?),
            _ => return None,
        }
    }
    Some((s, util))
}

/// `amd-smi monitor --csv --gfx --vram-usage` (10 s timeout), parsed as AORTA does: VRAM summed
/// over rows from the `VRAM_USED` column (`14 MB`, `1.5 GB`; `N/A` skipped), GFX the largest
/// number in the `GFX%` / `GFX_ACTIVITY` / `GFX` column.
fn amd_smi() -> Option<(GpuSnapshot, Option<u32>)> {
    let mut child = Command::new("amd-smi")
        .args(["monitor", "--csv", "--gfx", "--vram-usage"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut text).ok()?;
    parse_amd_smi_csv(&text)
}

fn parse_amd_smi_csv(text: &str) -> Option<(GpuSnapshot, Option<u32>)> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()?
        .split(',')
        .map(|h| h.trim().to_uppercase())
        .collect();
    let vram_col = header.iter().position(|h| h == "VRAM_USED");
    let gfx_col = header
        .iter()
        .position(|h| h == "GFX%" || h == "GFX_ACTIVITY" || h == "GFX");
    if vram_col.is_none() && gfx_col.is_none() {
        return None;
    }
    let number = |cell: &str| {
        cell.split_whitespace()
            .next()
            .and_then(|n| n.trim_end_matches('%').parse::<f64>().ok())
    };
    let (mut vram, mut gfx): (Option<f64>, Option<f64>) = (None, None);
    for row in lines {
        let cells: Vec<&str> = row.split(',').map(str::trim).collect();
        if let Some(cell) = vram_col.and_then(|c| cells.get(c)) {
            if let Some(v) = number(cell) {
                let unit = cell.to_uppercase();
                let mib = if unit.contains("GB") || unit.contains("GIB") {
                    v * 1024.0
                } else {
                    v
                };
                vram = Some(vram.unwrap_or(0.0) + mib);
            }
        }
        if let Some(g) = gfx_col.and_then(|c| cells.get(c)).and_then(|c| number(c)) {
            gfx = Some(gfx.map_or(g, |x: f64| x.max(g)));
        }
    }
    Some((
        GpuSnapshot {
            vram_used_mib: vram.map(|v| v.round() as i64),
            throttle: None,
        },
        gfx.map(|g| g.round() as u32),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amd_smi_csv_as_aorta_reads_it() {
        let csv = "GPU, GFX%, VRAM_USED, VRAM_TOTAL\n0, 12 %, 1024 MB, 196592 MB\n1, 97 %, 1.5 GB, 196592 MB\n2, N/A, N/A, 196592 MB\n";
        let (s, gfx) = parse_amd_smi_csv(csv).unwrap();
        assert_eq!(s.vram_used_mib, Some(1024 + 1536));
        assert_eq!(gfx, Some(97));
        assert!(
            parse_amd_smi_csv("GPU, POWER\n0, 300 W\n").is_none(),
            "no usable column"
        );
    }

    #[test]
    fn fake_spec() {
        let (s, u) = parse_fake("vram=300,throttle=2,util=40").unwrap();
        assert_eq!(
            (s.vram_used_mib, s.throttle, u),
            (Some(300), Some(2), Some(40))
        );
        assert!(parse_fake("vram=x").is_none());
        assert!(parse_fake("bogus=1").is_none());
    }
}
