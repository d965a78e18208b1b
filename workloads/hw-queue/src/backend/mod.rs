//! The GPU backend: the handful of operations the workloads need (streams, events, kernels,
//! graphs, copies, GEMMs, device-side timestamps), behind one trait so that a HIP backend can
//! sit beside the CUDA one (docs/hw-queue.md maps each call). Handles are small indices owned by
//! the backend, which frees everything on drop.

pub mod cuda;
mod driver;
pub(crate) use driver::{ck, dev_alloc, launch_1d, open_device, primary};
/// NVRTC sources and the architecture table; the race workload compiles with the same table.
pub mod kernels;
/// The cuBLASLt GEMM, shared with the race workload's compute load.
pub mod lt;
pub mod sim;

use std::sync::OnceLock;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Why a GPU call failed. `Unavailable` (no driver, no device, no runtime library) exits 2.
#[derive(Debug)]
pub enum GpuError {
    Unavailable(String),
    Call { what: String, detail: String },
}

impl GpuError {
    pub fn call(what: impl Into<String>, detail: impl Into<String>) -> Self {
        GpuError::Call {
            what: what.into(),
            detail: detail.into(),
        }
    }
    pub fn exit_code(&self) -> i32 {
        match self {
            GpuError::Unavailable(_) => 2,
            GpuError::Call { .. } => 1,
        }
    }
}

impl std::fmt::Display for GpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuError::Unavailable(msg) => write!(f, "no usable GPU: {msg}"),
            GpuError::Call { what, detail } => write!(f, "{what} failed: {detail}"),
        }
    }
}

impl std::error::Error for GpuError {}

pub type Result<T> = std::result::Result<T, GpuError>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stream(pub usize);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Event(pub usize);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Buf(pub usize);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Gemm(pub usize);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Graph(pub usize);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    Normal,
    /// The device's greatest priority (numerically lowest, e.g. -5 on an H200).
    High,
    Value(i32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemKind {
    Device,
    /// Page-locked host memory (copy source/target for H2D/D2H).
    PinnedHost,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F32,
    Tf32,
    Bf16,
    F16,
}

impl Dtype {
    pub fn bytes(self) -> usize {
        match self {
            Dtype::F32 | Dtype::Tf32 => 4,
            Dtype::Bf16 | Dtype::F16 => 2,
        }
    }
}

/// D[m×n] = A[m×k]·B[k×n], column-major, no transposes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GemmShape {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub dtype: Dtype,
}

impl GemmShape {
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

/// One cuBLASLt (or hipBLASLt) heuristic candidate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AlgoInfo {
    pub index: usize,
    pub workspace_bytes: usize,
    pub waves: f32,
}

/// What the kernels do. Every stamped kernel writes `[min block start, max block end]`
/// (device `%globaltimer`, ns) into its stamp slot; slots are reset with `reset_stamps`.
#[derive(Clone, Copy, Debug)]
pub enum Kernel {
    /// Every thread of every block busy-waits `ns` (globaltimer, or clock64 after
    /// `use_clock64`); `grid` blocks of `block` threads.
    Spin {
        ns: u64,
        grid: u32,
        block: u32,
        stamp: Option<u32>,
    },
    /// One block: `data[i] = 2·data[i] + 1` over `elems` floats, then optionally stores `seq`
    /// into host-mapped flag `flag.0` (after a system fence) so the host sees completion.
    Tiny {
        data: Buf,
        elems: u32,
        stamp: Option<u32>,
        flag: Option<(u32, u64)>,
    },
    /// An empty one-thread kernel (launch-overhead floor).
    Empty,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub backend: String,
    pub name: String,
    pub compute_capability: String,
    pub sm_count: u32,
    pub max_threads_per_sm: u32,
    pub clock_mhz: u32,
    pub copy_engines: u32,
    pub driver_version: String,
    pub compiler_version: String,
    /// (least, greatest) stream priority; greatest is the numerically lower one.
    pub priority_range: (i32, i32),
    /// The hardware-queue knob as the process saw it at context creation.
    pub queue_env: Option<(String, String)>,
}

/// The operations every backend provides. All launches are asynchronous.
pub trait Gpu {
    fn info(&self) -> &DeviceInfo;
    fn create_stream(&mut self, priority: Priority) -> Result<Stream>;
    /// A timing event.
    fn create_event(&mut self) -> Result<Event>;
    /// An event for ordering only (fork/join, graph capture), no timing.
    fn create_marker(&mut self) -> Result<Event>;
    /// Record on `stream`, or on the legacy NULL stream when `None`.
    fn record(&mut self, event: Event, stream: Option<Stream>) -> Result<()>;
    fn wait_event(&mut self, stream: Stream, event: Event) -> Result<()>;
    fn elapsed_ms(&self, from: Event, to: Event) -> Result<f64>;
    fn sync_stream(&self, stream: Stream) -> Result<()>;
    fn sync(&self) -> Result<()>;
    fn launch(&mut self, stream: Stream, kernel: &Kernel) -> Result<()>;
    /// Make `slots` stamp slots available and set them to (MAX, 0). Synchronous.
    fn reset_stamps(&mut self, slots: u32) -> Result<()>;
    /// Read the first `slots` stamp slots (after `sync`).
    fn read_stamps(&mut self, slots: u32) -> Result<Vec<(u64, u64)>>;
    /// Volatile read of a host-mapped flag slot (0..FLAG_SLOTS).
    fn flag(&self, slot: u32) -> u64;
    fn alloc(&mut self, bytes: usize, kind: MemKind) -> Result<Buf>;
    /// Asynchronous copy; the direction follows from the buffers' kinds.
    fn copy(&mut self, stream: Stream, dst: Buf, src: Buf, bytes: usize) -> Result<()>;
    /// Allocate A, B (shared) and `outputs` C buffers, ask the heuristic for up to
    /// `candidates` algorithms. Selects candidate 0.
    fn gemm_plan(&mut self, shape: GemmShape, outputs: u32, candidates: u32) -> Result<Gemm>;
    fn gemm_algos(&self, gemm: Gemm) -> Vec<AlgoInfo>;
    fn gemm_select(&mut self, gemm: Gemm, algo: usize);
    fn gemm(&mut self, gemm: Gemm, stream: Stream, output: u32) -> Result<()>;
    fn begin_capture(&mut self, stream: Stream) -> Result<()>;
    fn end_capture(&mut self, stream: Stream) -> Result<Graph>;
    fn launch_graph(&mut self, graph: Graph, stream: Stream) -> Result<()>;
    /// Resident blocks of `Spin` per SM at this block size (occupancy).
    fn spin_blocks_per_sm(&self, block: u32) -> Result<u32>;
    /// Switch `Spin` to clock64 counting; returns the calibrated SM cycles per ns.
    fn use_clock64(&mut self, on: bool) -> Result<Option<f64>>;
}

pub const FLAG_SLOTS: u32 = 4096;

/// Nanoseconds on the host's monotonic clock since the first call in this process.
pub fn host_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}
