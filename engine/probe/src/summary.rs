//! The brief (`aorta env probe --summary`): one fixed-label line per fact, the same labels on
//! every machine so two briefs line up, `-` for what is unknown, partial reasons at the end.

use crate::key::{EnvKey, KeyRules};
use crate::schema::{Library, Snapshot};
use std::collections::BTreeMap;

const LABELS: [&str; 18] = [
    "runtime",
    "host",
    "cpu",
    "memory",
    "gpu",
    "driver",
    "topology",
    "cuda",
    "cuda libs",
    "rocm",
    "rocm libs",
    "python",
    "torch",
    "torch build",
    "sdpa",
    "numerics",
    "env",
    "key",
];

fn o<T: ToString>(v: &Option<T>) -> String {
    v.as_ref()
        .map(|x| x.to_string())
        .unwrap_or_else(|| "-".into())
}

fn onoff(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "on",
        Some(false) => "off",
        None => "-",
    }
}

fn libs(m: &BTreeMap<String, Library>, order: &[&str]) -> String {
    let parts: Vec<String> = order
        .iter()
        .filter_map(|n| m.get(*n).map(|l| (n, l)))
        .filter(|(_, l)| l.version.is_some() || l.path.is_some())
        .map(|(n, l)| format!("{n} {}", o(&l.version)))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        let origin = order.iter().find_map(|n| m.get(*n)?.origin.clone());
        format!(
            "{}{}",
            parts.join(", "),
            origin.map(|o| format!(" ({o})")).unwrap_or_default()
        )
    }
}

impl Snapshot {
    /// The multi-line brief, ending with `[OK]` or `[PARTIAL, n reason(s)]` and the reasons;
    /// its `key` line is the key under the default rules.
    pub fn summary(&self) -> String {
        self.summary_with_key(&self.key(&KeyRules::default()))
    }

    /// [`Snapshot::summary`] with `key` on its `key` line: the key a build keyed its trials by
    /// (under the recipe's rules), known already, so not derived again from every field.
    pub fn summary_with_key(&self, key: &EnvKey) -> String {
        let h = &self.host;
        let g = &self.gpu;
        let t = &self.pytorch;
        let rt = &h.runtime;
        let mut lines: Vec<String> = Vec::new();
        lines.push(format!(
            "{}, python env {}{}",
            o(&rt.container),
            o(&rt.python_env),
            rt.venv_path
                .as_ref()
                .or(rt.conda_env.as_ref())
                .map(|p| format!(" ({p})"))
                .unwrap_or_default()
        ));
        lines.push(format!(
            "{}, kernel {}, glibc {}, {}",
            h.distro
                .pretty_name
                .clone()
                .or(h.distro.id.clone())
                .unwrap_or_else(|| "-".into()),
            o(&h.kernel_release),
            o(&h.glibc_version),
            o(&h.machine)
        ));
        let simd = if h.cpu.simd.is_empty() {
            String::new()
        } else {
            format!(", {}", h.cpu.simd.join(" "))
        };
        lines.push(format!(
            "{}, {} logical, {} socket(s){simd}",
            o(&h.cpu.model),
            o(&h.cpu.logical_count),
            o(&h.cpu.sockets)
        ));
        lines.push(format!(
            "{} GiB, {} NUMA node(s)",
            o(&h.memory_total_gib),
            o(&h.numa_nodes)
        ));
        lines.push(match (&g.vendor, g.devices.first()) {
            (None, _) => "none".into(),
            (Some(v), None) => format!("{v}: no devices listed, driver {}", o(&g.driver_version)),
            (Some(_), Some(d)) => {
                let same = g.devices.iter().all(|x| x.name == d.name);
                let name = if same { o(&d.name) } else { "mixed".into() };
                let power = d
                    .power_limit_w
                    .map(|p| format!(", {p:.0} W"))
                    .unwrap_or_default();
                format!(
                    "{} × {name} ({}, {} MiB), driver {}, ECC {}, MIG {}{power}",
                    o(&g.count),
                    o(&d.arch),
                    o(&d.memory_total_mib),
                    o(&g.driver_version),
                    o(&d.ecc_mode),
                    o(&d.mig_mode)
                )
            }
        });
        let id = &g.driver_identity;
        lines.push(match &id.module {
            None => "-".into(),
            Some(m) => {
                let userspace: String = id
                    .userspace
                    .iter()
                    .map(|(n, l)| format!(", {n} {}", o(&l.version)))
                    .collect();
                format!("kernel module {m} {}{userspace}", o(&id.module_version))
            }
        });
        lines.push(if g.topology.links.is_empty() {
            if g.topology.affinity.is_empty() {
                "-".into()
            } else {
                format!(
                    "single GPU, NUMA {}",
                    o(&g.topology.affinity[0].numa_affinity)
                )
            }
        } else {
            let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
            for l in &g.topology.links {
                *kinds.entry(l.link.as_str()).or_default() += 1;
            }
            format!(
                "{} GPU pair(s): {}",
                g.topology.links.len(),
                kinds
                    .iter()
                    .map(|(k, n)| format!("{k} ×{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
        let c = &self.cuda;
        lines.push(
            if c.driver_api_version.is_none()
                && c.runtime_version.is_none()
                && c.nvcc.version.is_none()
            {
                "-".into()
            } else {
                format!(
                    "driver API {}, runtime {}, toolkit {}, nvcc {}",
                    o(&c.driver_api_version),
                    o(&c.runtime_version),
                    o(&c.toolkit.version),
                    o(&c.nvcc.version)
                )
            },
        );
        lines.push(libs(
            &c.libraries,
            &["cudart", "cublas", "cublasLt", "cudnn", "nccl", "nvrtc"],
        ));
        let r = &self.rocm;
        lines.push(match &r.root {
            None => "-".into(),
            Some(root) => {
                let arch = if r.gpu_arch.gfx_targets.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", {}",
                        r.gpu_arch
                            .agent_arch_counts
                            .iter()
                            .map(|(k, n)| format!("{k} ×{n}"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    )
                };
                format!(
                    "{} at {root} ({}), kmd {}{arch}",
                    o(&r.version),
                    o(&r.root_source),
                    o(&r.kmd_version)
                )
            }
        });
        lines.push(libs(
            &r.libraries,
            &[
                "hip",
                "hipblaslt",
                "rocblas",
                "miopen",
                "rccl",
                "composable_kernel",
            ],
        ));
        let py = &self.python;
        lines.push(format!("{} {}", o(&py.version), o(&py.executable)));
        lines.push(match &t.version {
            None => "-".into(),
            Some(v) => {
                let git = t
                    .git_commit
                    .as_deref()
                    .map(|g| format!(" git {}", &g[..7.min(g.len())]))
                    .unwrap_or_default();
                let gpu = match (&t.cuda_version, &t.hip_version) {
                    (Some(cv), _) => format!("CUDA {cv}"),
                    (None, Some(h)) => format!("HIP {h}"),
                    _ => "CPU-only".into(),
                };
                format!(
                    "{v}{git}, {gpu}, cuDNN {}, NCCL {}, triton {}",
                    o(&t.cudnn_version),
                    o(&t.nccl_version),
                    o(&t.triton_version)
                )
            }
        });
        let not_collected =
            t.version.is_some() && t.collected.as_deref() != Some(crate::python::COLLECTED_IMPORT);
        const DEEP_ONLY: &str = "- (import-only: aorta env probe --deep)";
        lines.push(if t.version.is_none() {
            "-".into()
        } else if not_collected {
            DEEP_ONLY.into()
        } else {
            let b = &t.build;
            let arch = if b.arch_list.is_empty() {
                "-".into()
            } else {
                b.arch_list.join(" ")
            };
            format!(
                "{}, archs {arch}, CPU {}",
                b.flags
                    .get("BUILD_TYPE")
                    .and_then(|v| v.as_str())
                    .unwrap_or("-"),
                o(&b.cpu_capability)
            )
        });
        lines.push(if not_collected {
            DEEP_ONLY.into()
        } else {
            format!(
                "flash={} mem_eff={} math={} cudnn={}",
                onoff(t.sdpa.flash),
                onoff(t.sdpa.mem_efficient),
                onoff(t.sdpa.math),
                onoff(t.sdpa.cudnn)
            )
        });
        let n = &t.numerics;
        lines.push(if not_collected {
            DEEP_ONLY.into()
        } else {
            format!(
            "tf32 matmul={} cudnn={}, fp32 precision {}, deterministic={}, cudnn.benchmark={}, allocator {}",
            onoff(n.matmul_allow_tf32),
            onoff(n.cudnn_allow_tf32),
            o(&n.float32_matmul_precision),
            onoff(n.deterministic_algorithms),
            onoff(n.cudnn_benchmark),
            o(&t.allocator.backend)
            )
        });
        let set: Vec<String> = self
            .env_vars
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
            .collect();
        lines.push(format!(
            "{} of {} tracked set{}{}",
            set.len(),
            self.env_vars.len(),
            if set.is_empty() { "" } else { ": " },
            set.join(" ")
        ));
        lines.push(format!("{} ({} fields)", key.short(), key.fields.len()));
        let mut out: String = LABELS
            .iter()
            .zip(&lines)
            .map(|(l, v)| format!("{l:<12}{v}\n"))
            .collect();
        if let Some(m) = &id.mismatch {
            out.push_str(&format!("\nwarning: driver mismatch: {m}\n"));
        }
        if self.partial {
            out.push_str(&format!(
                "\n[PARTIAL, {} reason(s)]\n",
                self.partial_reasons.len()
            ));
            for r in &self.partial_reasons {
                out.push_str(&format!("  - {}: {}\n", r.field, r.reason));
            }
        } else {
            out.push_str("\n[OK]\n");
        }
        out
    }
}
