//! Device choice, libtorch's global numerics switches, seeding, and the device's peak FLOP/s
//! (for model FLOPs utilisation).

use tch::{Cuda, Device, Kind};

use crate::protocol::SetupError;

extern "C" {
    fn aorta_set_deterministic(on: i32) -> i32;
    fn aorta_deterministic() -> i32;
    fn aorta_sdpa_only(which: i32) -> i32;
    fn aorta_set_tf32(on: i32) -> i32;
    fn aorta_tf32() -> i32;
    fn aorta_load_cuda(err: *mut std::ffi::c_char, errlen: i32) -> i32;
}

/// Loads libtorch's CUDA backend once (see build.rs for why it is not linked).
fn load_cuda() -> Result<(), String> {
    static LOADED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    LOADED
        .get_or_init(|| {
            let mut buf = vec![0u8; 1024];
            // SAFETY: the shim writes at most errlen bytes, NUL-terminated, into buf.
            match unsafe { aorta_load_cuda(buf.as_mut_ptr().cast(), buf.len() as i32) } {
                0 => Ok(()),
                _ => Err(std::ffi::CStr::from_bytes_until_nul(&buf)
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_default()),
            }
        })
        .clone()
}

/// `auto` picks CUDA device 0 when libtorch's CUDA backend loads and sees a GPU, else the CPU;
/// `cuda` without one is a setup error that says why.
pub fn resolve(name: &str) -> Result<Device, SetupError> {
    if name == "cpu" {
        return Ok(Device::Cpu);
    }
    let why = match load_cuda() {
        Ok(()) if Cuda::is_available() => return Ok(Device::Cuda(0)),
        Ok(()) => "libtorch sees no CUDA device".to_string(),
        Err(e) => format!("cannot load libtorch_cuda ({e})"),
    };
    if name == "auto" {
        eprintln!("device auto: using the CPU: {why}");
        return Ok(Device::Cpu);
    }
    Err(SetupError {
        kind: "gpu_unavailable",
        error: format!("device: cuda requested but {why}"),
        hint: "run on a GPU machine (driver for CUDA 13) with torch's lib folder on the library path, or set device: cpu".into(),
    })
}

pub fn device_name(d: Device) -> String {
    match d {
        Device::Cuda(i) => format!("cuda:{i}"),
        _ => "cpu".into(),
    }
}

/// Turns `torch.use_deterministic_algorithms(on, warn_only=True)` and cuDNN determinism on or
/// off, as AORTA's `enable_deterministic`. On CUDA deterministic cuBLAS also
/// needs `CUBLAS_WORKSPACE_CONFIG`, read when the first handle is made: set it before any work.
pub fn set_deterministic(on: bool) -> Result<(), String> {
    if on && std::env::var_os("CUBLAS_WORKSPACE_CONFIG").is_none() {
        std::env::set_var("CUBLAS_WORKSPACE_CONFIG", ":4096:8");
    }
    // SAFETY: plain C calls into libtorch's global context; no pointers cross.
    match unsafe { aorta_set_deterministic(i32::from(on)) } {
        0 => Ok(()),
        _ => Err("libtorch refused setDeterministicAlgorithms".into()),
    }
}

/// Scaled-dot-product attention on the math backend only: what `deterministic` needs for
/// bit-exact gradients (the fused kernels' backward passes use atomics), at the cost of their
/// speed.
pub fn sdpa_math_only() -> Result<(), String> {
    pin_attention("math")
}

/// The attention backends a config may pin (`auto` leaves libtorch's choice).
pub const ATTENTION_BACKENDS: &[&str] = &["auto", "math", "flash", "efficient", "cudnn"];

/// Pins scaled-dot-product attention to one backend (one of [`ATTENTION_BACKENDS`]).
pub fn pin_attention(name: &str) -> Result<(), String> {
    let which = match name {
        "auto" => return Ok(()),
        "math" => 0,
        "flash" => 1,
        "efficient" => 2,
        "cudnn" => 3,
        other => return Err(format!("unknown attention backend {other:?}")),
    };
    // SAFETY: plain C call into libtorch's global context.
    match unsafe { aorta_sdpa_only(which) } {
        0 => Ok(()),
        _ => Err(format!("libtorch refused to pin attention to {name}")),
    }
}

pub fn deterministic() -> bool {
    // SAFETY: as above.
    unsafe { aorta_deterministic() == 1 }
}

/// TF32 for cuBLAS matmuls and cuDNN. `DISABLE_TF32=1` (the `tf32_off` mitigation) or
/// `NVIDIA_TF32_OVERRIDE=0` in the environment win over the config.
pub fn set_tf32(want: bool) -> Result<bool, String> {
    let env_off = std::env::var("DISABLE_TF32").is_ok_and(|v| v == "1")
        || std::env::var("NVIDIA_TF32_OVERRIDE").is_ok_and(|v| v == "0");
    let on = want && !env_off;
    // SAFETY: as above.
    match unsafe { aorta_set_tf32(i32::from(on)) } {
        0 => Ok(on),
        _ => Err("libtorch refused setAllowTF32CuBLAS".into()),
    }
}

pub fn tf32() -> bool {
    // SAFETY: as above.
    unsafe { aorta_tf32() == 1 }
}

/// Seeds libtorch's CPU and CUDA generators.
pub fn seed(seed: u64) {
    tch::manual_seed(seed as i64);
}

/// Waits for queued GPU work so host timers measure it.
pub fn sync(d: Device) {
    if let Device::Cuda(i) = d {
        Cuda::synchronize(i as i64);
    }
}

/// The GPU's marketing name from nvidia-smi (libtorch's C API does not expose device
/// properties); None on CPU or when nvidia-smi is missing.
pub fn gpu_model(d: Device) -> Option<String> {
    let Device::Cuda(i) = d else { return None };
    let out = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=name",
            "--format=csv,noheader",
            "-i",
            &i.to_string(),
        ])
        .output()
        .ok()?;
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

/// Dense peak TFLOP/s of known GPUs for `kind` (fp32 with TF32 counts as TF32 peak).
pub fn peak_tflops(model: &str, kind: Kind, tf32: bool) -> Option<f64> {
    let m = model.to_ascii_uppercase();
    // (name fragment, bf16/fp16, tf32, fp32)
    const TABLE: &[(&str, f64, f64, f64)] = &[
        ("H200", 989.4, 494.7, 66.9),
        ("H100", 989.4, 494.7, 66.9),
        ("GH200", 989.4, 494.7, 66.9),
        ("B200", 2250.0, 1100.0, 80.0),
        ("A100", 312.0, 156.0, 19.5),
        ("L40S", 362.1, 183.0, 91.6),
        ("MI300X", 1307.4, 653.7, 163.4),
        ("MI325X", 1307.4, 653.7, 163.4),
    ];
    let &(_, half, t32, f32) = TABLE.iter().find(|(n, ..)| m.contains(n))?;
    Some(match kind {
        Kind::BFloat16 | Kind::Half => half,
        _ if tf32 => t32,
        _ => f32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks() {
        assert_eq!(
            peak_tflops("NVIDIA H200", Kind::BFloat16, false),
            Some(989.4)
        );
        assert_eq!(peak_tflops("NVIDIA H200", Kind::Float, true), Some(494.7));
        assert_eq!(peak_tflops("NVIDIA H200", Kind::Float, false), Some(66.9));
        assert_eq!(
            peak_tflops("NVIDIA A100-SXM4-80GB", Kind::Half, false),
            Some(312.0)
        );
        assert_eq!(peak_tflops("Some CPU", Kind::Float, false), None);
    }

    #[test]
    fn switches_round_trip() {
        set_deterministic(true).unwrap();
        assert!(deterministic());
        set_deterministic(false).unwrap();
        assert!(!deterministic());
        assert!(!set_tf32(false).unwrap());
        assert!(!tf32());
    }
}
