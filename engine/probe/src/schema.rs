//! The snapshot's shape, schema `aorta.env/2` (docs/env-snapshot.md documents every field and
//! what changed from `aorta.env/1`).
//!
//! Null-not-missing: every field is always serialised (`Option` → `null`, never skipped), so a
//! reader can tell "the probe looked and found nothing" from "this schema has no such field".
//! Reading is lenient (`#[serde(default)]`, unknown keys ignored) so a newer snapshot with extra
//! fields still diffs against an older one.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The schema tag. A change in meaning bumps it, which also changes every key.
/// `aorta.env/2`: torch described from its files without importing it; the import-only fields
/// are filled by `--deep` only and left out of the default key; `pytorch.collected` and
/// `pytorch.record_blake3` added; no `torch-loaded` library origin.
pub const SCHEMA_VERSION: &str = "aorta.env/2";

/// One `aorta env probe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    pub schema_version: String,
    /// RFC 3339 UTC, `Z` suffix. Never keyed.
    pub captured_at: Option<String>,
    /// `partial_reasons` is non-empty.
    pub partial: bool,
    pub partial_reasons: Vec<PartialReason>,
    pub probe: ProbeMeta,
    pub host: Host,
    pub gpu: Gpu,
    pub cuda: Cuda,
    pub rocm: Rocm,
    pub python: Python,
    pub pytorch: Pytorch,
    /// Tracked variable → value, `null` when unset. The canonical names are always present;
    /// variables matched by a tracked prefix (`NCCL_*`, …) appear only when set.
    pub env_vars: BTreeMap<String, Option<String>>,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            schema_version: SCHEMA_VERSION.to_string(),
            captured_at: None,
            partial: false,
            partial_reasons: Vec::new(),
            probe: ProbeMeta::default(),
            host: Host::default(),
            gpu: Gpu::default(),
            cuda: Cuda::default(),
            rocm: Rocm::default(),
            python: Python::default(),
            pytorch: Pytorch::default(),
            env_vars: BTreeMap::new(),
        }
    }
}

/// Why a field is `null` although the probe expected a value (AORTA §12.8.5: structured, not a
/// prose string with the field glued on).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct PartialReason {
    /// Dotted path of the affected field or section, e.g. `gpu.devices` or `pytorch`.
    pub field: String,
    pub reason: String,
}

/// How the probe itself ran. Never keyed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ProbeMeta {
    pub aorta_probe_version: Option<String>,
    pub duration_ms: Option<u64>,
    /// `hit`, `miss`, `off` (no cache dir) or `none` (no interpreter).
    pub python_cache: Option<String>,
    /// Wall time of each step, ms.
    pub steps_ms: BTreeMap<String, u64>,
    /// Bytes hashed this run (cached hashes are free).
    pub hashed_bytes: Option<u64>,
    /// How the probe says it was launched (`--execution-context`, AORTA 0.3.0's
    /// `execution_context.probe_invocation`): `direct`, `buck2_run` or `buck2_action`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invocation: Option<String>,
    /// Set only on a snapshot read from AORTA's own env.json (`aorta env diff`): the probe
    /// never writes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported: Option<Imported>,
}

/// Where an imported snapshot came from, and what of it has no counterpart here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Imported {
    /// `AORTA 0.3.0`, `AORTA 0.2.1`, or `AORTA (env.json schema 1.N)` for another schema.
    pub from: String,
    /// AORTA's `schema_version`.
    pub schema_version: String,
    /// AORTA's fields that were not read into the snapshot, so no diff compares them.
    pub not_compared: Vec<NotCompared>,
}

/// One part of AORTA's file with no counterpart here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct NotCompared {
    /// AORTA's dotted path, array elements as `*` (`hipblaslt.lib_hash`, `tensile_catalog`).
    pub field: String,
    /// blake3 (16 hex) of its leaves: two AORTA files with equal digests hold equal values.
    pub digest: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Host {
    pub hostname: Option<String>,
    pub os: Option<String>,
    /// `x86_64`, `aarch64`.
    pub machine: Option<String>,
    pub kernel_release: Option<String>,
    pub kernel_version: Option<String>,
    pub glibc_version: Option<String>,
    pub distro: Distro,
    pub cpu: Cpu,
    pub memory_total_bytes: Option<u64>,
    /// `memory_total_bytes` rounded to GiB: the keyed form (firmware reservations make exact
    /// totals differ between identical machines).
    pub memory_total_gib: Option<u64>,
    pub memory_available_bytes: Option<u64>,
    pub numa_nodes: Option<u32>,
    pub runtime: Runtime,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Distro {
    pub id: Option<String>,
    pub version_id: Option<String>,
    pub pretty_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Cpu {
    pub vendor: Option<String>,
    pub model: Option<String>,
    pub logical_count: Option<u32>,
    pub sockets: Option<u32>,
    pub cores_per_socket: Option<u32>,
    /// Vector ISA extensions that select different CPU kernels (avx2, avx512f, amx_bf16, sve, …).
    pub simd: Vec<String>,
}

/// Where the probe runs: container runtime and Python environment kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Runtime {
    /// `docker`, `podman`, `singularity` or `baremetal`.
    pub container: Option<String>,
    pub container_id: Option<String>,
    /// `venv`, `conda` or `system`; `null` without an interpreter.
    pub python_env: Option<String>,
    pub venv_path: Option<String>,
    pub conda_env: Option<String>,
    /// Any isolation signal (AORTA 0.3.0's `container_detected`): a named container above, a
    /// mount namespace other than PID 1's, or a container token (`docker`, `containerd`,
    /// `kubepods`, `libpod`, `lxc`, `crio`) in `/proc/self/cgroup`. A remote-execution worker
    /// or a Kubernetes pod is `baremetal` by name and `true` here.
    pub container_detected: Option<bool>,
    /// The probe's mount namespace, boot-scoped and hashed as AORTA 0.3.0 writes its
    /// `probe_namespace` (`mnt:<16 hex>`): two snapshots with different values were taken in
    /// different places; equal values are advisory (namespace ids are reused).
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Gpu {
    /// `nvidia`, `amd`, or `null` when the machine has no GPU.
    pub vendor: Option<String>,
    pub count: Option<u32>,
    pub driver_version: Option<String>,
    /// The tool the device list came from.
    pub source: Option<String>,
    pub devices: Vec<GpuDevice>,
    pub topology: Topology,
    /// The kernel module against the user-space driver libraries. Never keyed (see the type).
    pub driver_identity: DriverIdentity,
}

/// The GPU driver twice: the kernel module, which a container shares with its host, and the
/// user-space libraries the process would load, which a container brings or has mounted (AORTA
/// 0.3.0's `amdgpu_driver`, with NVIDIA's counterpart). Never keyed: the module's version is
/// `gpu.driver_version` (NVML reports the module's), and on a working machine the libraries
/// carry the same version; a difference is `mismatch`, and the CUDA release the container
/// brings is keyed through `cuda` (docs/env-snapshot.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct DriverIdentity {
    /// `nvidia` or `amdgpu`.
    pub module: Option<String>,
    /// The loaded module's version: the host's, also from inside a container.
    pub module_version: Option<String>,
    /// Where it was read: `/sys/module/<module>/version` or `/proc/driver/nvidia/version`.
    pub module_version_source: Option<String>,
    /// `/sys/module/<module>/srcversion`: a checksum of the module's sources.
    pub module_srcversion: Option<String>,
    /// The driver's control node is there (`/dev/nvidiactl`, `/dev/kfd`).
    pub device_node: Option<bool>,
    /// NVIDIA: `libcuda` and `libnvidia-ml` as the loader would find them (always both
    /// listed); AMD: none (ROCm's runtime is versioned with ROCm, under `rocm`).
    pub userspace: BTreeMap<String, DriverLibrary>,
    /// Set when a user-space library's version is not the module's: what differs and what it
    /// usually means.
    pub mismatch: Option<String>,
}

/// One user-space driver library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct DriverLibrary {
    /// From the real file's name (`libcuda.so.580.159.04`); `null` when the name carries none.
    pub version: Option<String>,
    /// The copy the loader would take, as found (`libcuda.so.1`).
    pub path: Option<String>,
    /// `ld-library-path`, `ldconfig` or `system` (the loader's default directories).
    pub origin: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct GpuDevice {
    pub index: Option<u32>,
    pub name: Option<String>,
    /// `sm_90`, `gfx942`.
    pub arch: Option<String>,
    /// NVIDIA compute capability, `9.0`.
    pub compute_capability: Option<String>,
    pub uuid: Option<String>,
    pub serial: Option<String>,
    pub pci_bus_id: Option<String>,
    pub memory_total_mib: Option<u64>,
    pub vbios_version: Option<String>,
    /// `enabled` / `disabled`.
    pub ecc_mode: Option<String>,
    pub mig_mode: Option<String>,
    pub power_limit_w: Option<f64>,
    pub power_default_limit_w: Option<f64>,
    pub app_clock_graphics_mhz: Option<u32>,
    pub app_clock_memory_mhz: Option<u32>,
    pub max_clock_graphics_mhz: Option<u32>,
    pub max_clock_memory_mhz: Option<u32>,
    pub persistence_mode: Option<String>,
    pub compute_mode: Option<String>,
    /// Read at probe time and different on every call: recorded, never keyed.
    pub volatile: GpuVolatile,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct GpuVolatile {
    pub clock_graphics_mhz: Option<u32>,
    pub temperature_c: Option<i32>,
    pub memory_used_mib: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Topology {
    pub source: Option<String>,
    /// One entry per GPU pair (a < b): `NV18`, `SYS`, `PIX`, `XGMI`, ….
    pub links: Vec<TopoLink>,
    pub affinity: Vec<GpuAffinity>,
    /// The tool's text, ANSI codes removed. Never keyed (names NICs).
    pub raw: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct TopoLink {
    pub a: String,
    pub b: String,
    pub link: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct GpuAffinity {
    pub gpu: String,
    pub cpu_affinity: Option<String>,
    pub numa_affinity: Option<String>,
}

/// The CUDA libraries always listed (null-not-missing: present even when not found).
pub const CUDA_LIBRARIES: [&str; 6] = ["cudart", "cublas", "cublasLt", "cudnn", "nccl", "nvrtc"];
/// The ROCm libraries always listed.
pub const ROCM_LIBRARIES: [&str; 6] = [
    "hip",
    "hipblaslt",
    "rocblas",
    "miopen",
    "rccl",
    "composable_kernel",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cuda {
    /// The CUDA version the driver supports (`cuDriverGetVersion`, the "CUDA Version" of
    /// `nvidia-smi`).
    pub driver_api_version: Option<String>,
    /// The CUDA runtime that would be loaded: the effective libcudart's version.
    pub runtime_version: Option<String>,
    pub toolkit: Toolkit,
    pub nvcc: Nvcc,
    pub libraries: BTreeMap<String, Library>,
}

impl Default for Cuda {
    fn default() -> Self {
        Cuda {
            driver_api_version: None,
            runtime_version: None,
            toolkit: Toolkit::default(),
            nvcc: Nvcc::default(),
            libraries: CUDA_LIBRARIES
                .iter()
                .map(|n| (n.to_string(), Library::default()))
                .collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Toolkit {
    pub root: Option<String>,
    pub version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Nvcc {
    pub path: Option<String>,
    /// `13.0.88` (the `V…` of `nvcc --version`).
    pub version: Option<String>,
    /// `13.0`.
    pub release: Option<String>,
}

/// One GPU library (cuBLAS, cuDNN, rocBLAS, …): the copy that would be used, and every copy found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Library {
    pub version: Option<String>,
    /// Where the version came from: `file-name`, `dist-info:<dist>`, `header:<file>`, `soname`.
    pub version_source: Option<String>,
    /// How the effective copy was chosen: `wheel`, `ld-library-path`, `ldconfig`, `toolkit`,
    /// `rocm-root`, `torch-bundled`.
    pub origin: Option<String>,
    /// The effective copy (the library's main file, symlinks kept as found).
    pub path: Option<String>,
    /// The effective main file and its companions (cuDNN's sub-libraries, NVRTC builtins) with
    /// their blake3 hashes.
    pub files: Vec<LibFile>,
    /// Every copy found, in search order. Never keyed.
    pub candidates: Vec<Candidate>,
    /// ROCm: the release tweak (`<LIB>_VERSION_TWEAK`) or CK's commit.
    pub build: Option<String>,
    /// ROCm: `blake3` over the sorted kernel-database file names (AORTA's
    /// `kernel_db_revision`, blake3 instead of sha256).
    pub kernel_db_revision: Option<String>,
    /// The effective file's `DT_RPATH`/`DT_RUNPATH`. Never keyed: they are bytes of the file,
    /// which `files[].blake3` already keys.
    pub linkage: Linkage,
}

/// Where a library's own dependencies are looked for: the search paths of its ELF dynamic
/// section (AORTA 0.3.0's `library_linkage`, its issue #413: a `DT_RPATH` defeats an
/// `LD_LIBRARY_PATH` substitution below the library, a `DT_RUNPATH` does not).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Linkage {
    /// Which tags the file carries, `rpath` and/or `runpath` (AORTA's `dt_tags`).
    pub tags: Vec<String>,
    /// The one the loader honours: `runpath` when both are there (glibc then ignores
    /// `DT_RPATH`), else `rpath`, else `none`; `null` when the file was not read.
    pub effective: Option<String>,
    /// `DT_RPATH` as written (`$ORIGIN/../lib`), entries joined by `:`.
    pub rpath: Option<String>,
    /// `DT_RUNPATH` as written.
    pub runpath: Option<String>,
    /// Why the dynamic section could not be read (not an ELF file, cut short). Kept here, not
    /// as a partial reason: the library's identity is complete without it.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct LibFile {
    pub name: String,
    pub path: Option<String>,
    pub size_bytes: Option<u64>,
    pub blake3: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Candidate {
    pub path: String,
    pub origin: String,
    pub version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Rocm {
    pub root: Option<String>,
    /// `ROCM_PATH`, `ROCM_HOME`, `HIP_PATH`, `rocm-sdk`, `wheel`, `/opt/rocm`, `/opt/rocm-*`.
    pub root_source: Option<String>,
    pub candidates: Vec<Candidate>,
    pub version: Option<String>,
    pub version_dev: Option<String>,
    /// amdgpu kernel driver (`/sys/module/amdgpu/version`).
    pub kmd_version: Option<String>,
    /// `amd` or `nvidia` (HIP's platform), derived from the GPU and torch.
    pub hip_platform: Option<String>,
    pub libraries: BTreeMap<String, Library>,
    pub gpu_arch: GpuArch,
}

impl Default for Rocm {
    fn default() -> Self {
        Rocm {
            root: None,
            root_source: None,
            candidates: Vec::new(),
            version: None,
            version_dev: None,
            kmd_version: None,
            hip_platform: None,
            libraries: ROCM_LIBRARIES
                .iter()
                .map(|n| (n.to_string(), Library::default()))
                .collect(),
            gpu_arch: GpuArch::default(),
        }
    }
}

/// `rocm_agent_enumerator`'s answer, `gfx000` (the CPU agent) dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct GpuArch {
    pub agent_count: Option<u32>,
    pub gfx_targets: Vec<String>,
    pub agent_arch_counts: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Python {
    /// The interpreter as chosen (a venv's `bin/python3`, not resolved: resolving loses the venv).
    pub executable: Option<String>,
    pub executable_resolved: Option<String>,
    pub version: Option<String>,
    pub implementation: Option<String>,
    pub prefix: Option<String>,
    pub base_prefix: Option<String>,
    pub site_packages: Vec<String>,
    /// Installed distributions that matter here (`nvidia-*`, `torch*`, `triton*`, `rocm*`, …).
    pub distributions: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Pytorch {
    pub version: Option<String>,
    pub git_commit: Option<String>,
    pub cuda_version: Option<String>,
    pub hip_version: Option<String>,
    pub debug: Option<bool>,
    pub torch_dir: Option<String>,
    /// blake3 over the wheel's own file hashes in torch's installed `RECORD` (the same for
    /// every installation of one wheel); `null` for a source or editable install.
    pub record_blake3: Option<String>,
    /// How the section was filled: `files` (torch's `version.py`, dist-info and library files,
    /// no import: the import-only fields below are `null`), `files+import` (`--deep` also
    /// imported torch), `null` when no torch was found. Never keyed.
    pub collected: Option<String>,
    /// Import-only (`--deep`).
    pub build: TorchBuild,
    /// The cuDNN of `cuda.libraries.cudnn` (`9.19.0`, the form `cudnnGetVersion` gives) for a
    /// CUDA build of torch.
    pub cudnn_version: Option<String>,
    /// Import-only (`--deep`).
    pub cudnn_compiled_version: Option<String>,
    /// NCCL (`cuda.libraries.nccl`) or, for a HIP build, RCCL (`rocm.libraries.rccl`).
    pub nccl_version: Option<String>,
    /// Import-only (`--deep`).
    pub sdpa: Sdpa,
    /// Import-only (`--deep`).
    pub numerics: Numerics,
    /// `backend` is import-only (`--deep`); `conf` comes from the environment.
    pub allocator: Allocator,
    pub triton_version: Option<String>,
    /// Import-only: GPU-related shared objects the torch process had mapped. Never keyed.
    pub loaded_libraries: Vec<String>,
    /// Import-only. Never keyed.
    pub import_seconds: Option<f64>,
    /// Import-only: whether the probe's own process ended with CUDA initialised (it must be
    /// `false`). Never keyed.
    pub cuda_initialized: Option<bool>,
}

/// The `pytorch` fields only `import torch` can fill (`--deep`). None of them feeds the default
/// key (`KeyRules` skips them beside [`crate::key::DEFAULT_EXCLUDE`]), so a key never depends on whether a deep
/// probe ran; a recipe that keys one of them gets a deep probe ([`crate::KeyRules::needs_deep`]).
pub const IMPORT_ONLY_FIELDS: [&str; 8] = [
    "pytorch.build",
    "pytorch.cudnn_compiled_version",
    "pytorch.sdpa",
    "pytorch.numerics",
    "pytorch.allocator.backend",
    "pytorch.loaded_libraries",
    "pytorch.import_seconds",
    "pytorch.cuda_initialized",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct TorchBuild {
    /// `KEY=VALUE` of the "Build settings:" line of `torch.__config__.show()`.
    pub settings: BTreeMap<String, String>,
    /// `-DNAME[=VALUE]` tokens of `CXX_FLAGS` (`true` for a bare define).
    pub cxx_defines: BTreeMap<String, serde_json::Value>,
    /// AORTA's fixed 17 build flags, coerced to booleans where they are ON/OFF-like.
    pub flags: BTreeMap<String, serde_json::Value>,
    /// Compiled GPU architectures (`sm_90`, `gfx942`).
    pub arch_list: Vec<String>,
    /// `CPU capability usage` (AVX512, …).
    pub cpu_capability: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Sdpa {
    pub flash: Option<bool>,
    pub mem_efficient: Option<bool>,
    pub math: Option<bool>,
    pub cudnn: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Numerics {
    pub matmul_allow_tf32: Option<bool>,
    pub cudnn_allow_tf32: Option<bool>,
    pub float32_matmul_precision: Option<String>,
    pub matmul_fp16_reduced_precision: Option<bool>,
    pub matmul_bf16_reduced_precision: Option<bool>,
    pub preferred_blas_library: Option<String>,
    pub deterministic_algorithms: Option<bool>,
    pub deterministic_warn_only: Option<bool>,
    pub cudnn_deterministic: Option<bool>,
    pub cudnn_benchmark: Option<bool>,
    pub cudnn_enabled: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Allocator {
    /// `native` or `cudaMallocAsync`.
    pub backend: Option<String>,
    /// `PYTORCH_CUDA_ALLOC_CONF` (or `PYTORCH_ALLOC_CONF`, `PYTORCH_HIP_ALLOC_CONF`) as seen.
    pub conf: Option<String>,
}
