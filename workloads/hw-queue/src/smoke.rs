//! `gpu_smoke` (AORTA 0.3.0's workload): is the GPU usable at all? One tiny kernel — `x += 1`
//! over `n` elements, `steps` times — on device 0, then the sum checked on the host. The
//! kernel is PTX written here and JIT-compiled by the driver, so the only thing it needs is
//! libcuda (no NVRTC, no libtorch): a failure says the driver, the device or the context, not
//! a toolkit. Without a GPU the trial is a setup failure (`main_work_started: false`), the
//! engine's `error`, with the reason.
//!
//! `config` keys, as AORTA's: `n` (elements, default 8), `dtype` (`float32` default, `float16`,
//! `bfloat16`); the trial's `steps` (default 1; 0 allocates and verifies only).

use std::ffi::{c_void, CString};
use std::path::Path;
use std::ptr;
use std::time::Instant;

use cudarc::driver::sys;
use serde_json::{json, Value};

use crate::backend::cuda::driver_present;
use crate::backend::{ck, dev_alloc, launch_1d, open_device, GpuError, Result};

pub const NAME: &str = "gpu_smoke";

/// The PTX module: one kernel per element type, `x[i] += v` for `i < n`. They share the index
/// computation and the bounds check; each type has its own load-add-store (f16 through `cvt`,
/// bf16 as the top 16 bits of an f32, rounded to nearest even).
fn ptx() -> String {
    let kernel = |name: &str, elem_bytes: u32, body: &str| {
        format!(
            ".visible .entry {name}(.param .u64 x, .param .u32 n, .param .f32 v)
{{
    .reg .pred p;
    .reg .b16 h<2>;
    .reg .b32 r<10>;
    .reg .f32 f<3>;
    .reg .b64 d<4>;
    ld.param.u64 d1, [x];
    ld.param.u32 r1, [n];
    ld.param.f32 f1, [v];
    mov.u32 r2, %ctaid.x;
    mov.u32 r3, %ntid.x;
    mov.u32 r4, %tid.x;
    mad.lo.s32 r5, r2, r3, r4;
    setp.ge.u32 p, r5, r1;
    @p bra DONE;
    cvta.to.global.u64 d2, d1;
    mul.wide.u32 d3, r5, {elem_bytes};
    add.s64 d2, d2, d3;
{body}DONE:
    ret;
}}
"
        )
    };
    [
        ".version 7.0\n.target sm_50\n.address_size 64\n".to_owned(),
        kernel(
            "add_f32",
            4,
            "    ld.global.f32 f2, [d2];
    add.f32 f2, f2, f1;
    st.global.f32 [d2], f2;
",
        ),
        kernel(
            "add_f16",
            2,
            "    ld.global.b16 h1, [d2];
    cvt.f32.f16 f2, h1;
    add.f32 f2, f2, f1;
    cvt.rn.f16.f32 h1, f2;
    st.global.b16 [d2], h1;
",
        ),
        kernel(
            "add_bf16",
            2,
            "    ld.global.b16 h1, [d2];
    cvt.u32.u16 r6, h1;
    shl.b32 r6, r6, 16;
    mov.b32 f2, r6;
    add.f32 f2, f2, f1;
    mov.b32 r6, f2;
    shr.u32 r7, r6, 16;
    and.b32 r7, r7, 1;
    add.u32 r7, r7, 32767;
    add.u32 r6, r6, r7;
    shr.u32 r6, r6, 16;
    cvt.u16.u32 h1, r6;
    st.global.b16 [d2], h1;
",
        ),
    ]
    .concat()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Dtype {
    F32,
    F16,
    Bf16,
}

impl Dtype {
    fn parse(s: &str) -> Option<Dtype> {
        match s {
            "float32" => Some(Dtype::F32),
            "float16" => Some(Dtype::F16),
            "bfloat16" => Some(Dtype::Bf16),
            _ => None,
        }
    }

    fn bytes(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
        }
    }

    fn kernel(self) -> &'static str {
        match self {
            Dtype::F32 => "add_f32",
            Dtype::F16 => "add_f16",
            Dtype::Bf16 => "add_bf16",
        }
    }

    /// The host's sum of the device's elements.
    fn sum(self, raw: &[u8]) -> f64 {
        match self {
            Dtype::F32 => raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .sum(),
            Dtype::F16 => raw
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
                .sum(),
            Dtype::Bf16 => raw
                .chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64())
                .sum(),
        }
    }
}

/// What the trial measured on the device.
struct Ran {
    device: String,
    sum: f64,
    step_times_ms: Vec<f64>,
}

fn run_on_device(n: u32, steps: u32, dtype: Dtype) -> Result<Ran> {
    if !driver_present() {
        return Err(GpuError::Unavailable(
            "the CUDA driver library (libcuda.so.1) was not found: no NVIDIA GPU driver here"
                .into(),
        ));
    }
    // SAFETY: driver calls in order, each with valid out-pointers and live handles; the
    // kernel's parameters are pointers to locals that outlive the launch's synchronize.
    unsafe {
        let (dev, device) = open_device(0)?;
        let src = CString::new(ptx()).expect("no NUL in the PTX");
        let mut module = ptr::null_mut();
        ck(
            sys::cuModuleLoadData(&mut module, src.as_ptr() as *const c_void),
            "cuModuleLoadData (the driver's PTX JIT)",
        )?;
        let mut func = ptr::null_mut();
        let kname = CString::new(dtype.kernel()).expect("kernel name");
        ck(
            sys::cuModuleGetFunction(&mut func, module, kname.as_ptr()),
            "cuModuleGetFunction",
        )?;
        let bytes = n as usize * dtype.bytes();
        let mut x = dev_alloc(bytes, "cuMemAlloc")?;
        ck(sys::cuMemsetD8_v2(x, 0, bytes), "cuMemsetD8")?;
        let (mut count_arg, mut v) = (n, 1.0f32);
        let mut params: [*mut c_void; 3] = [
            &mut x as *mut _ as *mut c_void,
            &mut count_arg as *mut _ as *mut c_void,
            &mut v as *mut _ as *mut c_void,
        ];
        let block = 256u32;
        let grid = n.div_ceil(block);
        let mut step_times_ms = Vec::with_capacity(steps as usize);
        for _ in 0..steps {
            let t = Instant::now();
            launch_1d(func, grid, block, &mut params, "cuLaunchKernel")?;
            ck(sys::cuCtxSynchronize(), "cuCtxSynchronize (the kernel ran)")?;
            step_times_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let mut host = vec![0u8; bytes];
        ck(
            sys::cuMemcpyDtoH_v2(host.as_mut_ptr() as *mut c_void, x, bytes),
            "cuMemcpyDtoH",
        )?;
        let _ = sys::cuMemFree_v2(x);
        let _ = sys::cuModuleUnload(module);
        let _ = sys::cuDevicePrimaryCtxRelease_v2(dev);
        Ok(Ran {
            device,
            sum: dtype.sum(&host),
            step_times_ms,
        })
    }
}

fn result(passed: bool, started: bool, details: Vec<Value>, steps: u32, extra: Value) -> Value {
    let mut r = json!({
        "passed": passed,
        "failure_count": usize::from(!passed),
        "first_failure_iteration": if passed || !started || steps == 0 { Value::Null } else { json!(steps - 1) },
        "failure_details": details,
        "total_iterations": if started { steps } else { 0 },
        "executed_iterations": if started { steps } else { 0 },
        "configured_iterations": steps,
        "step_times_ms": [],
        "elapsed_sec": 0.0,
        "metrics": {},
        "main_work_started": started,
    });
    if let (Some(r), Some(extra)) = (r.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            r.insert(k.clone(), v.clone());
        }
    }
    r
}

/// One trial: reads CONFIG, writes RESULT; the exit code (0 ran, 2 could not start).
pub fn run_trial(config: &Path, result_path: &Path) -> i32 {
    let t0 = Instant::now();
    let write = |v: &Value| crate::protocol::write_result(NAME, result_path, v);
    let setup_failed = |kind: &str, error: String, hint: &str| {
        crate::protocol::setup_failed(NAME, result_path, kind, &error, hint)
    };
    let doc = match crate::protocol::read_config(config) {
        Ok(v) => v,
        Err(e) => return setup_failed("config", e, "the engine writes CONFIG.json"),
    };
    let cfg = doc.get("config").cloned().unwrap_or(json!({}));
    let n = match cfg.get("n").map(Value::as_u64) {
        None => 8,
        Some(Some(n)) if (1..=1 << 30).contains(&n) => n as u32,
        Some(_) => {
            return setup_failed(
                "config",
                format!("n must be a whole number from 1 to 2^30, got {}", cfg["n"]),
                "e.g. workload_config: {n: 1024}",
            )
        }
    };
    let dtype_word = cfg
        .get("dtype")
        .and_then(Value::as_str)
        .unwrap_or("float32");
    let Some(dtype) = Dtype::parse(dtype_word) else {
        return setup_failed(
            "config",
            format!("unknown dtype {dtype_word:?}"),
            "float32, float16 or bfloat16",
        );
    };
    let steps = doc
        .get("steps")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .min(1 << 20) as u32;
    match run_on_device(n, steps, dtype) {
        Err(GpuError::Unavailable(e)) => setup_failed(
            "gpu_unavailable",
            e,
            "run on a machine with an NVIDIA GPU and its driver (libcuda.so.1 on the library path)",
        ),
        Err(e @ GpuError::Call { .. }) => {
            let e = e.to_string();
            eprintln!("{NAME} FAIL: {e}");
            write(&result(
                false,
                true,
                vec![
                    json!({"type": "gpu_error", "error": e, "hint": "the driver refused the smallest kernel: check nvidia-smi, the kernel log (Xid) and the device's health"}),
                ],
                steps,
                json!({"elapsed_sec": t0.elapsed().as_secs_f64()}),
            ));
            0
        }
        Ok(ran) => {
            let expected = f64::from(n) * f64::from(steps);
            // AORTA's tolerance: half precision rounds once the counts grow.
            let passed = (ran.sum - expected).abs() <= 1e-3f64.max(1e-2 * expected.abs());
            let line = format!(
                "{NAME} {}: sum={} expected={expected} on {} ({dtype_word}, n={n}, steps={steps})",
                if passed { "PASS" } else { "FAIL" },
                ran.sum,
                ran.device
            );
            eprintln!("{line}");
            let details = match passed {
                true => vec![],
                false => vec![json!({"sum": ran.sum, "expected": expected, "error": line})],
            };
            write(&result(
                passed,
                true,
                details,
                steps,
                json!({
                    "step_times_ms": ran.step_times_ms,
                    "elapsed_sec": t0.elapsed().as_secs_f64(),
                    "metrics": {"sum": ran.sum, "expected": expected, "n": n, "dtype": dtype_word, "device": ran.device},
                }),
            ));
            0
        }
    }
}

/// `aorta-workload-gpu_smoke describe | run --config C --result R`.
pub fn main(args: &[String]) -> i32 {
    crate::protocol::serve(NAME, crate::protocol::describe(NAME), args, run_trial)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_has_one_bounded_kernel_per_element_type() {
        let ptx = ptx();
        assert_eq!(ptx.matches(".visible .entry").count(), 3);
        assert_eq!(ptx.matches('{').count(), ptx.matches('}').count());
        for (kernel, stride) in [("add_f32", 4), ("add_f16", 2), ("add_bf16", 2)] {
            let at = ptx.find(&format!("entry {kernel}(")).unwrap();
            let body = &ptx[at..at + ptx[at..].find("ret;").unwrap()];
            assert!(
                body.contains(&format!("mul.wide.u32 d3, r5, {stride};")),
                "{body}"
            );
            assert!(body.contains("@p bra DONE;"), "{body}");
        }
    }

    #[test]
    fn host_sums_read_each_element_type() {
        let f32s: Vec<u8> = [1.0f32, 2.5].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(Dtype::F32.sum(&f32s), 3.5);
        let f16s: Vec<u8> = [half::f16::from_f32(3.0), half::f16::from_f32(4.0)]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(Dtype::F16.sum(&f16s), 7.0);
        let bf16s: Vec<u8> = [half::bf16::from_f32(8.0)]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(Dtype::Bf16.sum(&bf16s), 8.0);
        assert_eq!(Dtype::parse("float64"), None);
    }
}
