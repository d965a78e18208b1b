//! `collect: [torch_profiler]` inside these workloads. aorta sets `AORTA_TORCH_PROFILE_OUT` for
//! its Python hook (engine/engine/src/hooks/sitecustomize.py), but these binaries run no
//! Python: they start libtorch's own Kineto profiler through the shim instead and write the
//! same [`KernelProfile`] the hook writes (aorta's `profilers::collect` reads it unchanged).
//! The profiler observes: one that cannot start or stop leaves a note, never a failed trial.

use std::ffi::{c_char, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use aorta_trial::{KernelProfile, KernelStat};
use tch::Device;

/// Where aorta wants the profile (docs/diagnostics.md, "Kernel profilers").
pub const OUT_ENV: &str = "AORTA_TORCH_PROFILE_OUT";
const TOOL: &str = "torch_profiler";

type DeviceEvent = extern "C" fn(ctx: *mut c_void, name: *const c_char, duration_ns: u64);

extern "C" {
    fn aorta_profiler_start(cuda: i32, err: *mut c_char, errlen: i32) -> i32;
    fn aorta_profiler_stop(
        each: DeviceEvent,
        ctx: *mut c_void,
        err: *mut c_char,
        errlen: i32,
    ) -> i32;
}

/// What [`start`] did, for [`finish`]: the profiler is process-wide, so is this.
enum State {
    Running { cuda: bool },
    Unprofiled(String),
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// The profile's path when aorta asked for one.
pub fn requested() -> Option<PathBuf> {
    std::env::var_os(OUT_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Starts the profiler if aorta asked for one: CPU activity, and CUDA's on a GPU device (as
/// the hook does). Called once the workload knows its device, before any work on it; where the
/// profiler cannot start, the workload runs unprofiled and the note says why.
pub fn start(dev: Device) {
    if requested().is_none() {
        return;
    }
    let cuda = matches!(dev, Device::Cuda(_));
    let mut err = [0u8; 1024];
    // SAFETY: the shim writes at most errlen bytes, NUL-terminated, into err.
    let state =
        match unsafe { aorta_profiler_start(i32::from(cuda), err.as_mut_ptr().cast(), 1024) } {
            0 => State::Running { cuda },
            _ => {
                let why = format!("the profiler did not start: {}", text(&err));
                eprintln!("{TOOL}: {why}; the workload runs unprofiled");
                State::Unprofiled(why)
            }
        };
    *STATE.lock().unwrap_or_else(PoisonError::into_inner) = Some(state);
}

/// Stops the profiler and writes its profile to `out` (atomically: aorta never reads half).
pub fn finish(out: &Path) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(&stop()).map_err(std::io::Error::other)?;
    aorta_fsutil::write_atomic(out, &bytes)
}

/// The profile of this process: kernels summed by name, or a note where there are none.
fn stop() -> KernelProfile {
    let state = STATE.lock().unwrap_or_else(PoisonError::into_inner).take();
    let (kernels, note) = match state {
        None => (
            Vec::new(),
            Some(
                "not started: the workload stopped before choosing its device (see its result)"
                    .to_string(),
            ),
        ),
        Some(State::Unprofiled(why)) => (Vec::new(), Some(why)),
        Some(State::Running { cuda }) => match stop_rows() {
            Err(e) => (Vec::new(), Some(format!("profiler failed: {e}"))),
            Ok(rows) => {
                let kernels = KernelStat::sum_by_name(rows);
                let note = if !cuda {
                    Some("the workload ran on the CPU: no CUDA kernels recorded".to_string())
                } else if kernels.is_empty() {
                    Some("no CUDA kernel recorded on a CUDA device: CUPTI may be unavailable (see stderr.log)".to_string())
                } else {
                    None
                };
                (kernels, note)
            }
        },
    };
    KernelProfile {
        tool: TOOL.into(),
        kernels,
        note,
    }
}

/// One row per CUDA kernel, memcpy or memset the profiler saw.
fn stop_rows() -> Result<Vec<KernelStat>, String> {
    extern "C" fn push(ctx: *mut c_void, name: *const c_char, duration_ns: u64) {
        // SAFETY: ctx is the Vec stop_rows passes below, borrowed for the call.
        let rows = unsafe { &mut *ctx.cast::<Vec<KernelStat>>() };
        // SAFETY: a NUL-terminated string the shim keeps alive during the call.
        let name = unsafe { CStr::from_ptr(name) };
        rows.push(KernelStat {
            name: name.to_string_lossy().into_owned(),
            calls: 1,
            total_us: duration_ns as f64 / 1e3,
        });
    }
    let mut rows: Vec<KernelStat> = Vec::new();
    let mut err = [0u8; 1024];
    // SAFETY: push matches the shim's callback type and only touches rows; err as in start.
    let rc = unsafe {
        aorta_profiler_stop(
            push,
            (&mut rows as *mut Vec<KernelStat>).cast(),
            err.as_mut_ptr().cast(),
            1024,
        )
    };
    match rc {
        0 => Ok(rows),
        _ => Err(text(&err)),
    }
}

fn text(buf: &[u8]) -> String {
    CStr::from_bytes_until_nul(buf)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default()
}
