//! `python` and `pytorch`: the interpreter's report ([`crate::report`], through the probe
//! cache) says where packages are, and [`crate::installed`] reads the rest from files (torch's
//! `version.py`, dist-info metadata, `RECORD`). A `--deep` report adds the fields only a live
//! torch can report (build config, SDPA and numerics flags, allocator backend, mapped
//! libraries); those never feed the default key, so whether they were collected cannot change
//! it. Everything parseable is parsed here, in Rust, where it is unit-tested.

use crate::cache::{self, ProbeCache};
use crate::cmd::Tools;
use crate::installed;
use crate::report::{DeepReport, PyReport};
use crate::schema::{Allocator, Numerics, Python, Pytorch, Runtime, TorchBuild};
use crate::util::{nccl_version_from_code, Reasons, Steps};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `pytorch.collected` without `--deep`.
pub const COLLECTED_FILES: &str = "files";
/// `pytorch.collected` when `--deep` imported torch.
pub const COLLECTED_IMPORT: &str = "files+import";

/// `--python`, else the active venv's or conda env's `python3`, else `python3`/`python` on PATH.
pub(crate) fn choose_interpreter(
    explicit: Option<&Path>,
    env: &BTreeMap<String, String>,
    tools: &Tools,
) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(p) = env
            .get(var)
            .map(|v| Path::new(v).join("bin/python3"))
            .filter(|p| crate::cmd::is_executable(p))
        {
            return Some(p);
        }
    }
    tools
        .which("python3", &[])
        .or_else(|| tools.which("python", &[]))
}

/// The `python` and `pytorch` sections, and what the CUDA and ROCm sections need of them.
#[derive(Debug, Default)]
pub(crate) struct PySection {
    pub python: Python,
    pub pytorch: Pytorch,
    /// `probe.python_cache`: `hit`, `miss` or `off` (`none` without an interpreter).
    pub cache_state: Option<String>,
    /// Only `python_env`, `venv_path` and `conda_env` are set: the rest is the host's.
    pub runtime: Runtime,
    /// Where packages are: the report's directories, else a guess from the interpreter's layout.
    pub site_dirs: Vec<PathBuf>,
    /// The distributions scanned in `site_dirs`; `None` without a report.
    pub dists: Option<Vec<installed::Dist>>,
    pub deep: Option<DeepReport>,
}

/// How to ask the interpreter: through the cache, with a deadline, deep or not.
pub(crate) struct Ask<'a> {
    pub cache: Option<&'a ProbeCache>,
    pub tools: &'a Tools,
    pub env: &'a BTreeMap<String, String>,
    pub timeout: Duration,
    pub deep: bool,
}

/// The whole section, on its own thread: the report (cached, step `python`), then the files it
/// points at (step `torch-files`), read here alongside `nvidia-smi` and hashing.
pub(crate) fn section(interp: &Path, ask: &Ask, reasons: &Reasons, steps: &Steps) -> PySection {
    let (r, state) = {
        let _clock = steps.clock("python");
        cache::python_report(interp, ask.cache, ask.tools, ask.env, ask.timeout, ask.deep)
    };
    let files = {
        let _clock = steps.clock("torch-files");
        match &r {
            Ok(rep) => read_files(interp, rep, reasons),
            Err(_) => Files::default(),
        }
    };
    let report = reasons.ok("python", r);
    let mut s = described(interp, report.as_ref(), files, ask.env, reasons);
    s.cache_state = Some(state.into());
    s
}

/// The section from what the interpreter answered; `None` when it did not.
pub(crate) fn described(
    interp: &Path,
    report: Option<&PyReport>,
    files: Files,
    env: &BTreeMap<String, String>,
    reasons: &Reasons,
) -> PySection {
    let mut s = PySection::default();
    python_env(&mut s.runtime, interp, report, env);
    match report {
        Some(rep) => {
            (s.python, s.pytorch) = sections(interp, rep, &files, env, reasons);
            s.site_dirs = rep.search_dirs();
            s.dists = Some(files.dists);
            s.deep = rep.deep.clone();
        }
        None => {
            s.python.executable = Some(interp.display().to_string());
            s.site_dirs = guess_site_packages(interp);
        }
    }
    s
}

/// What the Rust side read from the interpreter's files (see [`crate::installed`]).
#[derive(Debug, Default)]
pub(crate) struct Files {
    /// Every tracked distribution on `sys.path`, in order.
    pub dists: Vec<installed::Dist>,
    pub torch: Option<installed::Torch>,
}

/// Reads distributions and torch from the directories the report names. `reasons` gets why
/// torch could not be described.
pub(crate) fn read_files(interp: &Path, rep: &PyReport, reasons: &Reasons) -> Files {
    let dists = installed::scan(&rep.search_dirs(), &installed::tracked);
    for (k, v) in &rep.errors {
        reasons.add(&format!("python.{k}"), v.clone());
    }
    let torch = match rep.torch_dir() {
        Some(dir) => match installed::torch(&dir, &dists) {
            Ok(t) => Some(t),
            Err(e) => {
                reasons.add("pytorch.version", e);
                None
            }
        },
        None => {
            if !rep.errors.contains_key("torch_spec") {
                reasons.add(
                    "pytorch",
                    format!(
                        "torch is not installed for {} (importlib.util.find_spec('torch') found nothing on its sys.path)",
                        interp.display()
                    ),
                );
            }
            None
        }
    };
    Files { dists, torch }
}

/// Fills `python` and `pytorch` from the report and the files. Import-only fields are filled
/// from the deep part when there is one; `cudnn_version` and `nccl_version` come later, from
/// the resolved libraries ([`library_versions`]).
pub(crate) fn sections(
    interp: &Path,
    rep: &PyReport,
    files: &Files,
    env: &BTreeMap<String, String>,
    reasons: &Reasons,
) -> (Python, Pytorch) {
    let distributions = installed::distributions(&files.dists);
    let python = Python {
        executable: Some(interp.display().to_string()),
        executable_resolved: std::fs::canonicalize(interp)
            .ok()
            .map(|p| p.display().to_string()),
        version: rep.python.version.clone(),
        implementation: rep.python.implementation.clone(),
        prefix: rep.python.prefix.clone(),
        base_prefix: rep.python.base_prefix.clone(),
        site_packages: rep.site_packages.clone(),
        distributions: distributions.clone(),
    };
    let mut pytorch = Pytorch {
        allocator: allocator(None, env),
        ..Pytorch::default()
    };
    let Some(t) = &files.torch else {
        return (python, pytorch);
    };
    pytorch.version = t.version.version.clone();
    pytorch.git_commit = t.version.git_version.clone();
    pytorch.cuda_version = t.version.cuda.clone();
    pytorch.hip_version = t.version.hip.clone();
    pytorch.debug = t.version.debug;
    pytorch.torch_dir = Some(t.dir.display().to_string());
    pytorch.record_blake3 = t.record_blake3.clone();
    pytorch.triton_version = ["triton", "pytorch-triton", "pytorch-triton-rocm"]
        .iter()
        .find_map(|n| distributions.get(*n).cloned());
    pytorch.collected = Some(COLLECTED_FILES.into());
    if let Some(d) = &rep.deep {
        deep_fields(&mut pytorch, d, env, reasons);
    }
    (python, pytorch)
}

/// The import-only fields from a deep report, and checks that the imported torch is the one
/// the files describe.
fn deep_fields(
    pytorch: &mut Pytorch,
    d: &DeepReport,
    env: &BTreeMap<String, String>,
    reasons: &Reasons,
) {
    let Some(t) = &d.torch else {
        let why = d
            .torch_import_error
            .clone()
            .or_else(|| d.errors.get("torch").cloned())
            .or_else(|| d.errors.get("deep").cloned())
            .unwrap_or_else(|| "no report".into());
        reasons.add(
            "pytorch.collected",
            format!("--deep: import torch failed ({why}); the import-only fields are null"),
        );
        return;
    };
    for (k, v) in &d.errors {
        reasons.add(&format!("pytorch.{k}"), v.clone());
    }
    if t.version != pytorch.version {
        reasons.add(
            "pytorch.version",
            format!(
                "import torch loaded {} from {}, but {}/version.py says {}",
                t.version.as_deref().unwrap_or("?"),
                t.file.as_deref().unwrap_or("?"),
                pytorch.torch_dir.as_deref().unwrap_or("?"),
                pytorch.version.as_deref().unwrap_or("?")
            ),
        );
    }
    let (settings, cpu_capability) = d
        .config_show
        .as_deref()
        .map(parse_config_show)
        .unwrap_or_default();
    let cxx_defines = settings
        .get("CXX_FLAGS")
        .map(|f| cxx_defines(f))
        .unwrap_or_default();
    let flags = build_flags(&settings, &cxx_defines);
    let num = d.numerics.clone().unwrap_or_default();
    let nb = |k: &str| num.get(k).and_then(Value::as_bool);
    let ns = |k: &str| {
        num.get(k)
            .and_then(Value::as_str)
            .map(|s| s.trim_start_matches("_BlasBackend.").to_string())
    };
    let cudnn = d.cudnn.clone().unwrap_or_default();
    pytorch.build = TorchBuild {
        arch_list: d
            .arch_flags
            .as_deref()
            .map(|a| {
                a.split([' ', ';', ','])
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        settings,
        cxx_defines,
        flags,
        cpu_capability,
    };
    pytorch.cudnn_compiled_version = cudnn.compiled.as_ref().and_then(cudnn_version);
    pytorch.sdpa = d.sdpa.clone().unwrap_or_default();
    pytorch.numerics = Numerics {
        matmul_allow_tf32: nb("matmul_allow_tf32"),
        cudnn_allow_tf32: cudnn.allow_tf32,
        float32_matmul_precision: ns("float32_matmul_precision"),
        matmul_fp16_reduced_precision: nb("matmul_fp16_reduced_precision"),
        matmul_bf16_reduced_precision: nb("matmul_bf16_reduced_precision"),
        preferred_blas_library: ns("preferred_blas_library"),
        deterministic_algorithms: nb("deterministic_algorithms"),
        deterministic_warn_only: nb("deterministic_warn_only"),
        cudnn_deterministic: cudnn.deterministic,
        cudnn_benchmark: cudnn.benchmark,
        cudnn_enabled: cudnn.enabled,
    };
    pytorch.allocator = allocator(d.allocator_backend.clone(), env);
    pytorch.loaded_libraries = d
        .loaded_libraries
        .iter()
        .filter(|l| is_gpu_lib(l))
        .cloned()
        .collect();
    pytorch.import_seconds = d.torch_import_seconds;
    pytorch.cuda_initialized = d.cuda_initialized;
    pytorch.collected = Some(COLLECTED_IMPORT.into());
    if pytorch.cuda_initialized == Some(true) {
        reasons.add(
            "pytorch.cuda_initialized",
            "the probe's torch process initialised CUDA (a getter touched the runtime)",
        );
    }
}

/// `pytorch.cudnn_version` / `nccl_version` from the libraries the probe resolved (first three
/// version components: `9.19.0.56` → `9.19.0`, the form `cudnnGetVersion` gives), and, after a
/// deep probe, a reason wherever the imported torch reports or maps something else.
pub(crate) fn library_versions(
    pytorch: &mut Pytorch,
    cuda: &BTreeMap<String, crate::schema::Library>,
    rocm: &BTreeMap<String, crate::schema::Library>,
    deep: Option<&DeepReport>,
    reasons: &Reasons,
) {
    let short = |l: Option<&crate::schema::Library>| {
        l.and_then(|l| l.version.as_deref())
            .map(|v| v.split('.').take(3).collect::<Vec<_>>().join("."))
    };
    if pytorch.cuda_version.is_some() {
        pytorch.cudnn_version = short(cuda.get("cudnn"));
        pytorch.nccl_version = short(cuda.get("nccl"));
    } else if pytorch.hip_version.is_some() {
        pytorch.nccl_version = short(rocm.get("rccl"));
    }
    let Some(d) = deep.filter(|d| d.torch.is_some()) else {
        return;
    };
    let runtime_cudnn = d
        .cudnn
        .as_ref()
        .and_then(|c| c.runtime.as_ref())
        .and_then(cudnn_version);
    let runtime_nccl = d.nccl.as_ref().and_then(nccl_version);
    for (field, files, live) in [
        (
            "pytorch.cudnn_version",
            &pytorch.cudnn_version,
            runtime_cudnn,
        ),
        ("pytorch.nccl_version", &pytorch.nccl_version, runtime_nccl),
    ] {
        if let (Some(f), Some(l)) = (files, live.as_ref()) {
            if f != l {
                reasons.add(
                    field,
                    format!("the library files say {f}, the imported torch reports {l}"),
                );
            }
        }
    }
    for (section, libs) in [("cuda", cuda), ("rocm", rocm)] {
        for (name, lib) in libs {
            let Some(main) = lib.files.first().and_then(|f| f.path.as_deref()) else {
                continue;
            };
            let chosen = std::fs::canonicalize(main).unwrap_or_else(|_| PathBuf::from(main));
            let base = crate::libs::file_name(&chosen);
            let stem = base.split(".so").next().unwrap_or(&base).to_string();
            let loaded: Vec<PathBuf> = d
                .loaded_libraries
                .iter()
                .map(PathBuf::from)
                .filter(|p| {
                    let n = crate::libs::file_name(p);
                    n.split(".so").next() == Some(stem.as_str())
                })
                .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
                .collect();
            if !loaded.is_empty() && !loaded.contains(&chosen) {
                reasons.add(
                    &format!("{section}.libraries.{name}"),
                    format!(
                        "the imported torch mapped {}, the probe chose {}",
                        loaded[0].display(),
                        chosen.display()
                    ),
                );
            }
        }
    }
}

fn allocator(backend: Option<String>, env: &BTreeMap<String, String>) -> Allocator {
    let conf = [
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_ALLOC_CONF",
        "PYTORCH_HIP_ALLOC_CONF",
    ]
    .iter()
    .find_map(|k| env.get(*k).cloned());
    Allocator { backend, conf }
}

/// GPU runtime, math and communication libraries plus torch's own, by file name.
fn is_gpu_lib(path: &str) -> bool {
    const NEEDLES: &[&str] = &[
        "libcu",
        "libnccl",
        "libnvrtc",
        "libnvJitLink",
        "libnvshmem",
        "libtorch",
        "libc10",
        "libamdhip",
        "libhip",
        "librocblas",
        "libMIOpen",
        "librccl",
        "libhsa",
        "libaotriton",
        "libroc",
    ];
    let name = path.rsplit('/').next().unwrap_or(path);
    NEEDLES.iter().any(|n| name.starts_with(n))
}

/// cuDNN as `getVersionInt()` (91900; cuDNN 8: 8907) or a `(9, 19, 0)` tuple.
fn cudnn_version(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => n.as_u64().map(|c| {
            if c >= 90000 {
                format!("{}.{}.{}", c / 10000, c % 10000 / 100, c % 100)
            } else {
                format!("{}.{}.{}", c / 1000, c % 1000 / 100, c % 100)
            }
        }),
        Value::Array(a) => Some(
            a.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("."),
        ),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn nccl_version(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => n.as_u64().map(nccl_version_from_code),
        Value::Array(a) => Some(
            a.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("."),
        ),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The "Build settings:" line of `torch.__config__.show()` (`KEY=VALUE, KEY=VALUE, …`; values
/// may contain `, ` but a new entry always starts with an upper-case `KEY=`), and the "CPU
/// capability usage" line.
pub(crate) fn parse_config_show(text: &str) -> (BTreeMap<String, String>, Option<String>) {
    let mut settings = BTreeMap::new();
    let cpu = text
        .lines()
        .find_map(|l| {
            l.trim()
                .trim_start_matches("- ")
                .strip_prefix("CPU capability usage:")
        })
        .map(|s| s.trim().to_string());
    let Some(rest) = text.split_once("Build settings:").map(|(_, r)| r) else {
        return (settings, cpu);
    };
    let rest = rest.lines().next().unwrap_or("");
    let mut current: Option<(String, String)> = None;
    for tok in rest.split(", ").filter(|t| !t.trim().is_empty()) {
        let starts_entry = tok.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty()
                && k.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        });
        if starts_entry {
            if let Some((k, v)) = current.take() {
                settings.insert(k, v);
            }
            let (k, v) = tok.split_once('=').unwrap_or((tok, ""));
            current = Some((k.to_string(), v.trim().to_string()));
        } else if let Some((_, v)) = current.as_mut() {
            v.push_str(", ");
            v.push_str(tok.trim_end());
        }
    }
    if let Some((k, v)) = current {
        settings.insert(k, v.trim_end_matches(',').trim().to_string());
    }
    (settings, cpu)
}

/// `-DNAME[=VALUE]` tokens; a bare define is `true`.
pub(crate) fn cxx_defines(flags: &str) -> BTreeMap<String, Value> {
    flags
        .split_whitespace()
        .filter_map(|t| t.strip_prefix("-D"))
        .filter(|t| !t.is_empty())
        .map(|t| match t.split_once('=') {
            Some((k, v)) => (k.to_string(), Value::String(v.to_string())),
            None => (t.to_string(), Value::Bool(true)),
        })
        .collect()
}

/// AORTA's fixed 17 build flags (§7.4): ON/OFF/TRUE/FALSE/1/0 (any case) → bool, other
/// strings kept, absent → null; build settings win over CXX defines; `USE_MIOPEN` also reads
/// `CAFFE2_USE_MIOPEN`.
pub(crate) const BUILD_FLAGS: [&str; 17] = [
    "USE_FLASH_ATTENTION",
    "USE_ROCM_CK_SDPA",
    "USE_AOTRITON",
    "USE_MEM_EFF_ATTENTION",
    "DISABLE_AOTRITON",
    "USE_ROCM",
    "USE_CUDA",
    "USE_CUDNN",
    "USE_MIOPEN",
    "USE_FBGEMM",
    "USE_FBGEMM_GENAI",
    "USE_NCCL",
    "USE_MKL",
    "USE_MKLDNN",
    "USE_OPENMP",
    "USE_KINETO",
    "BUILD_TYPE",
];

pub(crate) fn build_flags(
    settings: &BTreeMap<String, String>,
    defines: &BTreeMap<String, Value>,
) -> BTreeMap<String, Value> {
    let coerce = |v: &str| match v.to_ascii_uppercase().as_str() {
        "ON" | "TRUE" | "1" => Value::Bool(true),
        "OFF" | "FALSE" | "0" => Value::Bool(false),
        _ => Value::String(v.to_string()),
    };
    let one = |k: &str| {
        settings.get(k).map(|v| coerce(v)).or_else(|| {
            defines.get(k).map(|v| {
                if let Value::String(s) = v {
                    coerce(s)
                } else {
                    v.clone()
                }
            })
        })
    };
    BUILD_FLAGS
        .iter()
        .map(|k| {
            let v = one(k)
                .or_else(|| {
                    (*k == "USE_MIOPEN")
                        .then(|| one("CAFFE2_USE_MIOPEN"))
                        .flatten()
                })
                .unwrap_or(Value::Null);
            (k.to_string(), v)
        })
        .collect()
}

/// `venv` (a `pyvenv.cfg` beside the interpreter's `bin/`, or `prefix != base_prefix`),
/// `conda` (`conda-meta/` in the prefix, or `$CONDA_DEFAULT_ENV` with no venv), else `system`.
pub(crate) fn python_env(
    rt: &mut Runtime,
    interp: &Path,
    rep: Option<&PyReport>,
    env: &BTreeMap<String, String>,
) {
    let prefix = rep
        .and_then(|r| r.python.prefix.clone())
        .map(PathBuf::from)
        .or_else(|| {
            interp
                .parent()
                .and_then(Path::parent)
                .map(Path::to_path_buf)
        });
    let Some(prefix) = prefix else { return };
    let venv = prefix.join("pyvenv.cfg").exists()
        || rep
            .is_some_and(|r| r.python.prefix.is_some() && r.python.prefix != r.python.base_prefix);
    let conda =
        prefix.join("conda-meta").is_dir() || (!venv && env.contains_key("CONDA_DEFAULT_ENV"));
    let kind = if venv {
        rt.venv_path = Some(prefix.display().to_string());
        "venv"
    } else if conda {
        rt.conda_env = env
            .get("CONDA_DEFAULT_ENV")
            .cloned()
            .or_else(|| prefix.file_name().map(|n| n.to_string_lossy().into_owned()));
        "conda"
    } else {
        "system"
    };
    rt.python_env = Some(kind.to_string());
}

/// Where the interpreter's packages probably are, before it has answered (venv/conda layout,
/// Debian's dist-packages): lets library hashing start while `import torch` runs.
pub(crate) fn guess_site_packages(interp: &Path) -> Vec<PathBuf> {
    let Some(prefix) = interp.parent().and_then(Path::parent) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for lib in ["lib", "lib64"] {
        for n in crate::libs::list_dir(&prefix.join(lib)) {
            if n.starts_with("python3") {
                for sub in ["site-packages", "dist-packages"] {
                    let d = prefix.join(lib).join(&n).join(sub);
                    if d.is_dir() {
                        out.push(d);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_show_of_torch_2_11() {
        let text = "PyTorch built with:\n  - CPU capability usage: AVX512\n  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, CUDA_VERSION=13.0, CXX_FLAGS= -fvisibility-inlines-hidden -DUSE_PTHREADPOOL -DNDEBUG -DUSE_KINETO -DLIBKINETO_NOXPUPTI=ON -DUSE_FBGEMM -O2, LAPACK_INFO=mkl, USE_CUDA=ON, USE_CUDNN=ON, USE_NCCL=1, USE_ROCM=OFF, \n";
        let (s, cpu) = parse_config_show(text);
        assert_eq!(cpu.as_deref(), Some("AVX512"));
        assert_eq!(s["BUILD_TYPE"], "Release");
        assert_eq!(s["USE_ROCM"], "OFF");
        assert!(s["CXX_FLAGS"].contains("-DUSE_FBGEMM -O2"));
        let d = cxx_defines(&s["CXX_FLAGS"]);
        assert_eq!(d["USE_KINETO"], Value::Bool(true));
        assert_eq!(d["LIBKINETO_NOXPUPTI"], Value::String("ON".into()));
        let f = build_flags(&s, &d);
        assert_eq!(f.len(), 17);
        assert_eq!(f["USE_CUDA"], Value::Bool(true));
        assert_eq!(f["USE_NCCL"], Value::Bool(true));
        assert_eq!(f["USE_FBGEMM"], Value::Bool(true), "from the CXX defines");
        assert_eq!(f["BUILD_TYPE"], Value::String("Release".into()));
        assert_eq!(f["USE_MIOPEN"], Value::Null);
        let alias = build_flags(
            &[("CAFFE2_USE_MIOPEN".to_string(), "1".to_string())].into(),
            &BTreeMap::new(),
        );
        assert_eq!(alias["USE_MIOPEN"], Value::Bool(true));
    }

    #[test]
    fn library_versions() {
        assert_eq!(
            cudnn_version(&serde_json::json!(91900)).as_deref(),
            Some("9.19.0")
        );
        assert_eq!(
            cudnn_version(&serde_json::json!(8907)).as_deref(),
            Some("8.9.7")
        );
        assert_eq!(
            nccl_version(&serde_json::json!([2, 28, 9])).as_deref(),
            Some("2.28.9")
        );
    }
}
