//! `gpu_doctor`: the active checks of `aorta doctor --level medium` (docs/doctor.md), one GPU per
//! trial, through the workload protocol. It measures and compares bits; every threshold lives
//! in the engine's doctor crate (`aorta_doctor::active`), which judges RESULT.json's `metrics`:
//!
//! - `gemm`: a bf16 cuBLAS GEMM (m = n = k = `gemm_n`) with fp32 accumulation and output, timed
//!   by CUDA events over `gemm_iters` runs (TFLOP/s), then checked bit for bit against an fp64
//!   host reference on a sample of elements. Inputs are integers in {-1, 0, 1}, so every
//!   partial sum is an integer below 2^24 and the exact product is representable: any
//!   difference is a wrong bit, never rounding or summation order;
//! - `copy`: pinned host↔device `cuMemcpy` bandwidth (GB/s) each way;
//! - `memtest`: write/verify kernels (PTX, JIT-compiled by the driver like gpu_smoke's) over
//!   `memtest_fraction` of free memory with six patterns: all zeros, all ones, the two
//!   checkerboards, an address hash and its complement; mismatching words are counted.
//!
//! With `peers` (≥ 2 ordinals) the trial runs the multi-GPU check instead: `p2p`, for every ordered
//! pair, whether peer access is offered, `cuMemcpyPeer` GB/s and every word of the copy checked.
//! With `allreduce` (≥ 1 ordinal) it runs the collective check: an NCCL all-reduce over those
//! GPUs, bandwidth and every element checked (src/allreduce.rs; `allreduce_bytes`, default
//! 256 MiB; `inject_allreduce_mismatch`).
//!
//! `config` keys: `device` (ordinal; aorta runs it with CUDA_DEVICE_ORDER=PCI_BUS_ID), `gemm_n`
//! (default 8192), `gemm_iters` (default 100), `memtest_fraction` (default 0.5), `copy_bytes`
//! (default 256 MiB), and for testing the detection on real hardware `inject_gemm_mismatch` /
//! `inject_memtest_mismatch` (true: one element / word is overwritten on the device after the
//! computation, before the check, so the trial must report exactly one mismatch).

use std::ffi::{c_void, CString};
use std::path::Path;
use std::ptr;
use std::time::Instant;

use cudarc::cublas::sys as blas;
use cudarc::driver::result as dr;
use cudarc::driver::sys;
use serde_json::{json, Value};

use crate::backend::cuda::driver_present;
use crate::backend::{ck, dev_alloc, launch_1d, open_device, primary, GpuError, Result};

pub const NAME: &str = "gpu_doctor";

/// The six memory-test patterns: (name, base pattern, address multiplier; 0 = constant).
pub const PATTERNS: [(&str, u32, u32); 6] = [
    ("zeros", 0x0000_0000, 0),
    ("ones", 0xFFFF_FFFF, 0),
    ("checker", 0xAAAA_AAAA, 0),
    ("checker_inv", 0x5555_5555, 0),
    ("address", 0x0000_0000, 0x9E37_79B1),
    ("address_inv", 0xFFFF_FFFF, 0x9E37_79B1),
];

/// The word pattern `p` writes at index `i` (the kernels compute the same).
pub fn pattern_word(pat: u32, mult: u32, i: u64) -> u32 {
    let lo = i as u32;
    let hi = (i >> 32) as u32;
    pat ^ (lo ^ hi.wrapping_mul(0x85EB_CA6B)).wrapping_mul(mult)
}

/// Two kernels over `n` 32-bit words, grid-stride: `mt_fill` writes [`pattern_word`],
/// `mt_check` reads it back and counts mismatches (`atom.add`) and keeps the lowest bad index
/// (`atom.min`).
pub fn ptx() -> String {
    let value = "    cvt.u32.u64 r6, d3;
    shr.u64 d8, d3, 32;
    cvt.u32.u64 r7, d8;
    mul.lo.u32 r7, r7, 0x85EBCA6B;
    xor.b32 r6, r6, r7;
    mul.lo.u32 r6, r6, r2;
    xor.b32 r6, r6, r1;
    shl.b64 d6, d3, 2;
    add.u64 d7, d1, d6;
";
    let head = |name: &str, extra: &str| {
        format!(
            ".visible .entry {name}(.param .u64 p, .param .u64 n, .param .u32 pat, .param .u32 mult{extra})
{{
    .reg .pred q;
    .reg .b32 r<10>;
    .reg .b64 d<12>;
    ld.param.u64 d1, [p];
    ld.param.u64 d2, [n];
    ld.param.u32 r1, [pat];
    ld.param.u32 r2, [mult];
    cvta.to.global.u64 d1, d1;
    mov.u32 r3, %ctaid.x;
    mov.u32 r4, %ntid.x;
    mov.u32 r5, %tid.x;
    mul.wide.u32 d3, r3, r4;
    cvt.u64.u32 d4, r5;
    add.u64 d3, d3, d4;
    mov.u32 r3, %nctaid.x;
    mul.wide.u32 d5, r3, r4;
"
        )
    };
    let fill = format!(
        "{}LOOP_F:
    setp.ge.u64 q, d3, d2;
    @q bra DONE_F;
{value}    st.global.u32 [d7], r6;
    add.u64 d3, d3, d5;
    bra LOOP_F;
DONE_F:
    ret;
}}
",
        head("mt_fill", "")
    );
    let check = format!(
        "{}    ld.param.u64 d9, [count];
    cvta.to.global.u64 d9, d9;
    ld.param.u64 d10, [first];
    cvta.to.global.u64 d10, d10;
LOOP_C:
    setp.ge.u64 q, d3, d2;
    @q bra DONE_C;
{value}    ld.global.u32 r8, [d7];
    setp.eq.u32 q, r8, r6;
    @q bra NEXT_C;
    atom.global.add.u64 d11, [d9], 1;
    atom.global.min.u64 d11, [d10], d3;
NEXT_C:
    add.u64 d3, d3, d5;
    bra LOOP_C;
DONE_C:
    ret;
}}
",
        head("mt_check", ", .param .u64 count, .param .u64 first")
    );
    format!(".version 7.0\n.target sm_50\n.address_size 64\n\n{fill}\n{check}")
}

/// The GEMM inputs: integers in {-1, 0, 1}, deterministic, not periodic along a row or column.
pub fn input_value(seed: u64, i: u64, j: u64) -> f32 {
    let mut x =
        seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ j.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    (x % 3) as f32 - 1.0
}

#[derive(Debug, Clone)]
struct Cfg {
    device: usize,
    gemm_n: u32,
    gemm_iters: u32,
    memtest_fraction: f64,
    copy_bytes: usize,
    inject_gemm: bool,
    inject_memtest: bool,
    /// P2P mode: the ordinals whose every ordered pair is copied between (≥ 2 of them).
    peers: Vec<usize>,
    p2p_bytes: usize,
    /// Collective mode: one NCCL rank per ordinal (≥ 1 of them).
    allreduce: Vec<usize>,
    allreduce_bytes: usize,
    inject_allreduce: bool,
}

fn parse_cfg(cfg: &Value) -> std::result::Result<Cfg, String> {
    let u = |k: &str, d: u64, max: u64| -> std::result::Result<u64, String> {
        match cfg.get(k) {
            None => Ok(d),
            Some(v) => v
                .as_u64()
                .filter(|v| (1..=max).contains(v) || (k == "device" && *v == 0))
                .ok_or_else(|| format!("{k} must be a whole number from 1 to {max}, got {v}")),
        }
    };
    let fraction = match cfg.get("memtest_fraction") {
        None => 0.5,
        Some(v) => v
            .as_f64()
            .filter(|f| *f > 0.0 && *f <= 0.95)
            .ok_or_else(|| format!("memtest_fraction must be in (0, 0.95], got {v}"))?,
    };
    let b = |k: &str| cfg.get(k).and_then(Value::as_bool).unwrap_or(false);
    Ok(Cfg {
        device: u("device", 0, 1023)? as usize,
        gemm_n: u("gemm_n", 8192, 32768)? as u32,
        gemm_iters: u("gemm_iters", 100, 100_000)? as u32,
        memtest_fraction: fraction,
        copy_bytes: u("copy_bytes", 256 << 20, 8 << 30)? as usize,
        inject_gemm: b("inject_gemm_mismatch"),
        inject_memtest: b("inject_memtest_mismatch"),
        peers: match cfg.get("peers") {
            None => Vec::new(),
            Some(v) => ordinals(v)
                .filter(|p| p.len() >= 2)
                .ok_or_else(|| format!("peers must list at least two device ordinals, got {v}"))?,
        },
        p2p_bytes: u("p2p_bytes", 256 << 20, 8 << 30)? as usize,
        allreduce: match cfg.get("allreduce") {
            None => Vec::new(),
            Some(v) => ordinals(v).filter(|p| !p.is_empty()).ok_or_else(|| {
                format!("allreduce must list at least one device ordinal, got {v}")
            })?,
        },
        allreduce_bytes: u("allreduce_bytes", 256 << 20, 8 << 30)? as usize,
        inject_allreduce: b("inject_allreduce_mismatch"),
    })
}

/// A JSON list of device ordinals (each below 1024).
fn ordinals(v: &Value) -> Option<Vec<usize>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_u64().filter(|x| *x < 1024).map(|x| x as usize))
        .collect()
}

fn ckb(s: blas::cublasStatus_t, what: &str) -> Result<()> {
    if s == blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(GpuError::call(what, format!("{s:?}")))
    }
}

fn event() -> Result<sys::CUevent> {
    dr::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
        .map_err(|e| GpuError::call("cuEventCreate", format!("{e:?}")))
}

/// Milliseconds between two events recorded on the null stream around `f`.
///
/// # Safety
/// A context is current; `f` only enqueues work on the null stream.
unsafe fn timed(f: impl FnOnce() -> Result<()>) -> Result<f64> {
    let (a, b) = (event()?, event()?);
    dr::event::record(a, ptr::null_mut())
        .map_err(|e| GpuError::call("cuEventRecord", format!("{e:?}")))?;
    f()?;
    dr::event::record(b, ptr::null_mut())
        .map_err(|e| GpuError::call("cuEventRecord", format!("{e:?}")))?;
    dr::event::synchronize(b)
        .map_err(|e| GpuError::call("cuEventSynchronize", format!("{e:?}")))?;
    let ms = dr::event::elapsed(a, b)
        .map_err(|e| GpuError::call("cuEventElapsedTime", format!("{e:?}")))?;
    let _ = sys::cuEventDestroy_v2(a);
    let _ = sys::cuEventDestroy_v2(b);
    Ok(f64::from(ms))
}

/// The GEMM: TFLOP/s and the bitwise check on a sample.
///
/// # Safety
/// A context is current.
unsafe fn gemm(c: &Cfg) -> Result<Value> {
    if !blas::is_culib_present() {
        return Err(GpuError::Unavailable(
            "cuBLAS (libcublas.so.13 or similar) was not found: put the CUDA toolkit's lib64 or the nvidia-cublas wheel's lib directory on LD_LIBRARY_PATH".into(),
        ));
    }
    let n = c.gemm_n as usize;
    let elems = n * n;
    // Column-major A (n×n) and B (n×n) in bf16.
    let a_host: Vec<half::bf16> = (0..elems)
        .map(|x| half::bf16::from_f32(input_value(1, (x % n) as u64, (x / n) as u64)))
        .collect();
    let b_host: Vec<half::bf16> = (0..elems)
        .map(|x| half::bf16::from_f32(input_value(2, (x % n) as u64, (x / n) as u64)))
        .collect();
    let a = dev_alloc(elems * 2, "cuMemAlloc (GEMM A)")?;
    let b = dev_alloc(elems * 2, "cuMemAlloc (GEMM B)")?;
    let out = dev_alloc(elems * 4, "cuMemAlloc (GEMM C)")?;
    ck(
        sys::cuMemcpyHtoD_v2(a, a_host.as_ptr() as *const c_void, elems * 2),
        "cuMemcpyHtoD (A)",
    )?;
    ck(
        sys::cuMemcpyHtoD_v2(b, b_host.as_ptr() as *const c_void, elems * 2),
        "cuMemcpyHtoD (B)",
    )?;
    let mut h: blas::cublasHandle_t = ptr::null_mut();
    ckb(blas::cublasCreate_v2(&mut h), "cublasCreate")?;
    let (alpha, beta) = (1.0f32, 0.0f32);
    let ni = n as i32;
    let run = || {
        ckb(
            blas::cublasGemmEx(
                h,
                blas::cublasOperation_t::CUBLAS_OP_N,
                blas::cublasOperation_t::CUBLAS_OP_N,
                ni,
                ni,
                ni,
                &alpha as *const f32 as *const c_void,
                a as *const c_void,
                blas::cudaDataType::CUDA_R_16BF,
                ni,
                b as *const c_void,
                blas::cudaDataType::CUDA_R_16BF,
                ni,
                &beta as *const f32 as *const c_void,
                out as *mut c_void,
                blas::cudaDataType::CUDA_R_32F,
                ni,
                blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            ),
            "cublasGemmEx (bf16 in, fp32 accumulate and out)",
        )
    };
    for _ in 0..5 {
        run()?;
    }
    ck(sys::cuCtxSynchronize(), "cuCtxSynchronize (GEMM warm-up)")?;
    let ms = timed(|| {
        for _ in 0..c.gemm_iters {
            run()?;
        }
        Ok(())
    })?;
    let flops = 2.0 * (n as f64).powi(3) * f64::from(c.gemm_iters);
    let tflops = flops / (ms / 1e3) / 1e12;
    // Samples: 16 rows × 1,024 columns (pseudo-random, row 0 and column 0 among them), so
    // each row of A is gathered once and every column of B is contiguous.
    let pick = |count: u64, salt: u64| -> Vec<usize> {
        (0..count)
            .map(|s| match s {
                0 => 0,
                _ => (s.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt).rotate_left(17) as usize % n,
            })
            .collect()
    };
    let rows = pick(16, 0xA5A5);
    let cols = pick(1024, 0x5A5A);
    if c.inject_gemm {
        // Overwrite C(0, 0) with a value the product cannot have (it is an integer).
        ck(
            sys::cuMemsetD32_v2(out, 0.5f32.to_bits(), 1),
            "cuMemsetD32 (injected mismatch)",
        )?;
    }
    let mut c_host = vec![0f32; elems];
    ck(
        sys::cuMemcpyDtoH_v2(c_host.as_mut_ptr() as *mut c_void, out, elems * 4),
        "cuMemcpyDtoH (C)",
    )?;
    let mut mismatches = 0u64;
    let mut first: Option<Value> = None;
    let mut max_err = 0f64;
    for &r in &rows {
        let arow: Vec<f64> = (0..n)
            .map(|k| f64::from(a_host[r + k * n].to_f32()))
            .collect();
        for &col in &cols {
            let bcol = &b_host[col * n..(col + 1) * n];
            let want: f64 = arow
                .iter()
                .zip(bcol)
                .map(|(x, y)| x * f64::from(y.to_f32()))
                .sum();
            let got = c_host[r + col * n];
            if f64::from(got) != want {
                mismatches += 1;
                max_err = max_err.max((f64::from(got) - want).abs());
                if first.is_none() {
                    first = Some(
                        json!({"row": r, "col": col, "got": got, "want": want, "got_bits": format!("{:#010x}", got.to_bits())}),
                    );
                }
            }
        }
    }
    let _ = blas::cublasDestroy_v2(h);
    let _ = sys::cuMemFree_v2(a);
    let _ = sys::cuMemFree_v2(b);
    let _ = sys::cuMemFree_v2(out);
    Ok(json!({
        "n": n, "dtype": "bf16", "accumulate": "fp32", "iterations": c.gemm_iters,
        "ms": ms, "tflops": tflops, "checked": rows.len() * cols.len(), "mismatches": mismatches,
        "max_abs_error": max_err, "first_mismatch": first,
    }))
}

/// Pinned host↔device copies: GB/s each way (best of 5 after a warm-up).
///
/// # Safety
/// A context is current.
unsafe fn copies(c: &Cfg) -> Result<Value> {
    let bytes = c.copy_bytes;
    let mut host: *mut c_void = ptr::null_mut();
    ck(
        sys::cuMemAllocHost_v2(&mut host, bytes),
        "cuMemAllocHost (pinned)",
    )?;
    ptr::write_bytes(host as *mut u8, 0x5A, bytes);
    let dev = dev_alloc(bytes, "cuMemAlloc (copy)")?;
    let best = |h2d: bool| -> Result<f64> {
        let mut best = 0f64;
        for i in 0..6 {
            let ms = timed(|| {
                if h2d {
                    ck(sys::cuMemcpyHtoD_v2(dev, host, bytes), "cuMemcpyHtoD")
                } else {
                    ck(sys::cuMemcpyDtoH_v2(host, dev, bytes), "cuMemcpyDtoH")
                }
            })?;
            if i > 0 {
                best = best.max(bytes as f64 / (ms / 1e3) / 1e9);
            }
        }
        Ok(best)
    };
    let h2d = best(true)?;
    let d2h = best(false)?;
    let _ = sys::cuMemFree_v2(dev);
    let _ = sys::cuMemFreeHost(host);
    Ok(json!({"bytes": bytes, "h2d_gbs": h2d, "d2h_gbs": d2h}))
}

/// The pattern memory test.
///
/// # Safety
/// A context is current.
unsafe fn memtest(c: &Cfg, dev: sys::CUdevice) -> Result<Value> {
    let src = CString::new(ptx()).expect("no NUL in the PTX");
    let mut module = ptr::null_mut();
    ck(
        sys::cuModuleLoadData(&mut module, src.as_ptr() as *const c_void),
        "cuModuleLoadData (the driver's PTX JIT)",
    )?;
    let func = |name: &str| -> Result<sys::CUfunction> {
        let mut f = ptr::null_mut();
        let cname = CString::new(name).expect("kernel name");
        ck(
            sys::cuModuleGetFunction(&mut f, module, cname.as_ptr()),
            "cuModuleGetFunction",
        )?;
        Ok(f)
    };
    let (fill, check) = (func("mt_fill")?, func("mt_check")?);
    let (mut free, mut total) = (0usize, 0usize);
    ck(sys::cuMemGetInfo_v2(&mut free, &mut total), "cuMemGetInfo")?;
    let mut bytes = ((free as f64 * c.memtest_fraction) as usize) & !((2 << 20) - 1);
    // The largest single allocation may be smaller than the free total: back off.
    let mut buf = 0;
    for _ in 0..8 {
        let mut p = 0;
        if sys::cuMemAlloc_v2(&mut p, bytes) == sys::CUresult::CUDA_SUCCESS {
            buf = p;
            break;
        }
        bytes = (bytes / 10 * 9) & !((2 << 20) - 1);
    }
    if buf == 0 {
        return Err(GpuError::call(
            "cuMemAlloc (memtest)",
            format!("{free} bytes free, none allocatable"),
        ));
    }
    let words = (bytes / 4) as u64;
    let counters = dev_alloc(16, "cuMemAlloc (memtest counters)")?;
    let mut sms = 0i32;
    ck(
        sys::cuDeviceGetAttribute(
            &mut sms,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            dev,
        ),
        "cuDeviceGetAttribute",
    )?;
    let grid = (sms.max(1) as u32) * 8;
    let mut total_bad = 0u64;
    let mut first_bad: Option<u64> = None;
    let mut names = Vec::new();
    let t = Instant::now();
    for (pi, (name, pat, mult)) in PATTERNS.iter().enumerate() {
        names.push(*name);
        let (mut p, mut nw, mut pt, mut mu) = (buf, words, *pat, *mult);
        let mut args: [*mut c_void; 4] = [
            &mut p as *mut _ as *mut c_void,
            &mut nw as *mut _ as *mut c_void,
            &mut pt as *mut _ as *mut c_void,
            &mut mu as *mut _ as *mut c_void,
        ];
        launch_1d(fill, grid, 256, &mut args, "cuLaunchKernel (mt_fill)")?;
        if c.inject_memtest && pi == 0 {
            // One word of the first pattern overwritten at word 1,000 (or the last word).
            let at = 1000.min(words - 1);
            ck(
                sys::cuMemsetD32_v2(buf + at * 4, 0xDEAD_BEEF, 1),
                "cuMemsetD32 (injected mismatch)",
            )?;
        }
        // count = 0, first = u64::MAX
        ck(sys::cuMemsetD32_v2(counters, 0, 2), "cuMemsetD32 (count)")?;
        ck(
            sys::cuMemsetD32_v2(counters + 8, 0xFFFF_FFFF, 2),
            "cuMemsetD32 (first)",
        )?;
        let (mut cnt, mut fst) = (counters, counters + 8);
        let mut args: [*mut c_void; 6] = [
            &mut p as *mut _ as *mut c_void,
            &mut nw as *mut _ as *mut c_void,
            &mut pt as *mut _ as *mut c_void,
            &mut mu as *mut _ as *mut c_void,
            &mut cnt as *mut _ as *mut c_void,
            &mut fst as *mut _ as *mut c_void,
        ];
        launch_1d(check, grid, 256, &mut args, "cuLaunchKernel (mt_check)")?;
        ck(sys::cuCtxSynchronize(), "cuCtxSynchronize (memtest)")?;
        let mut host = [0u64; 2];
        ck(
            sys::cuMemcpyDtoH_v2(host.as_mut_ptr() as *mut c_void, counters, 16),
            "cuMemcpyDtoH (memtest counters)",
        )?;
        total_bad += host[0];
        if host[0] > 0 {
            let off = host[1] * 4;
            first_bad = Some(first_bad.map_or(off, |f: u64| f.min(off)));
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let _ = sys::cuMemFree_v2(buf);
    let _ = sys::cuMemFree_v2(counters);
    let _ = sys::cuModuleUnload(module);
    Ok(json!({
        "bytes": bytes, "free_bytes": free, "total_bytes": total, "fraction": c.memtest_fraction,
        "patterns": names, "mismatches": total_bad, "first_bad_offset": first_bad,
        "seconds": secs, "gbs": (bytes as f64 * 2.0 * PATTERNS.len() as f64) / secs / 1e9,
    }))
}

/// Peer-to-peer: for every ordered pair of `c.peers`, whether the driver offers peer access,
/// the best of 5 `cuMemcpyPeer` of `p2p_bytes` (GB/s), and every word of the copy checked on
/// the host against the pattern written on the source.
///
/// # Safety
/// cuInit has run (open_device).
unsafe fn p2p(c: &Cfg) -> Result<Value> {
    let bytes = c.p2p_bytes & !3;
    let words = bytes / 4;
    let mut ends = Vec::new();
    for &o in &c.peers {
        ends.push(primary(o)?);
    }
    let mut pairs = Vec::new();
    let mut host = vec![0u32; words];
    for (ai, &from) in c.peers.iter().enumerate() {
        for (bi, &to) in c.peers.iter().enumerate() {
            if ai == bi {
                continue;
            }
            let ((da, ca), (db, cb)) = (ends[ai], ends[bi]);
            let mut can = 0i32;
            ck(
                sys::cuDeviceCanAccessPeer(&mut can, da, db),
                "cuDeviceCanAccessPeer",
            )?;
            if can != 0 {
                ck(sys::cuCtxSetCurrent(ca), "cuCtxSetCurrent")?;
                let r = sys::cuCtxEnablePeerAccess(cb, 0);
                if r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
                    ck(r, "cuCtxEnablePeerAccess")?;
                }
            }
            ck(sys::cuCtxSetCurrent(ca), "cuCtxSetCurrent")?;
            let src = dev_alloc(bytes, "cuMemAlloc (p2p source)")?;
            let pattern = 0xA5A5_0000u32 | ((from as u32 & 0xFF) << 8) | (to as u32 & 0xFF);
            ck(
                sys::cuMemsetD32_v2(src, pattern, words),
                "cuMemsetD32 (p2p pattern)",
            )?;
            ck(sys::cuCtxSynchronize(), "cuCtxSynchronize")?;
            ck(sys::cuCtxSetCurrent(cb), "cuCtxSetCurrent")?;
            let dst = dev_alloc(bytes, "cuMemAlloc (p2p destination)")?;
            ck(
                sys::cuMemsetD32_v2(dst, 0, words),
                "cuMemsetD32 (p2p clear)",
            )?;
            ck(sys::cuCtxSynchronize(), "cuCtxSynchronize")?;
            let mut best = 0f64;
            for i in 0..6 {
                let t = Instant::now();
                ck(sys::cuMemcpyPeer(dst, cb, src, ca, bytes), "cuMemcpyPeer")?;
                ck(sys::cuCtxSynchronize(), "cuCtxSynchronize (p2p)")?;
                ck(sys::cuCtxSetCurrent(ca), "cuCtxSetCurrent")?;
                ck(sys::cuCtxSynchronize(), "cuCtxSynchronize (p2p)")?;
                ck(sys::cuCtxSetCurrent(cb), "cuCtxSetCurrent")?;
                let s = t.elapsed().as_secs_f64();
                if i > 0 && s > 0.0 {
                    best = best.max(bytes as f64 / s / 1e9);
                }
            }
            ck(
                sys::cuMemcpyDtoH_v2(host.as_mut_ptr() as *mut c_void, dst, bytes),
                "cuMemcpyDtoH (p2p check)",
            )?;
            let bad = host.iter().filter(|w| **w != pattern).count();
            let first_bad = host.iter().position(|w| *w != pattern).map(|i| i * 4);
            let _ = sys::cuMemFree_v2(dst);
            ck(sys::cuCtxSetCurrent(ca), "cuCtxSetCurrent")?;
            let _ = sys::cuMemFree_v2(src);
            pairs.push(
                json!({"from": from, "to": to, "peer_access": can != 0, "gbs": best,
                              "mismatches": bad, "first_bad_offset": first_bad}),
            );
        }
    }
    for (d, _) in ends {
        let _ = sys::cuDevicePrimaryCtxRelease_v2(d);
    }
    let mismatches: usize = pairs
        .iter()
        .filter_map(|p| p["mismatches"].as_u64())
        .map(|m| m as usize)
        .sum();
    Ok(json!({"bytes": bytes, "pairs": pairs, "mismatches": mismatches}))
}

fn result(passed: bool, started: bool, details: Vec<Value>, metrics: Value, elapsed: f64) -> Value {
    json!({
        "passed": passed,
        "failure_count": details.len(),
        "first_failure_iteration": if passed || !started { Value::Null } else { json!(0) },
        "failure_details": details,
        "total_iterations": u32::from(started),
        "executed_iterations": u32::from(started),
        "configured_iterations": 1,
        "step_times_ms": [],
        "elapsed_sec": elapsed,
        "metrics": metrics,
        "main_work_started": started,
    })
}

/// One trial: reads CONFIG, writes RESULT; exit 0 when it ran, 2 when it could not start.
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
    let cfg = match parse_cfg(&doc.get("config").cloned().unwrap_or(json!({}))) {
        Ok(c) => c,
        Err(e) => return setup_failed("config", e, "see docs/doctor.md for the gpu_doctor keys"),
    };
    if !driver_present() {
        return setup_failed(
            "gpu_unavailable",
            "the CUDA driver library (libcuda.so.1) was not found: no NVIDIA GPU driver here"
                .into(),
            "run on a machine with an NVIDIA GPU and its driver",
        );
    }
    // SAFETY: driver calls in order on this thread, after open_device made a context current.
    let opened = unsafe { open_device(cfg.device) };
    let (dev, device) = match opened {
        Ok(d) => d,
        Err(e) => {
            return setup_failed(
                "gpu_unavailable",
                e.to_string(),
                "check nvidia-smi and the device index",
            )
        }
    };
    let mut metrics = json!({"device": device, "ordinal": cfg.device});
    let mut details = Vec::new();
    type Step<'a> = Box<dyn Fn() -> Result<Value> + 'a>;
    let steps: Vec<(&str, Step)> = if !cfg.allreduce.is_empty() {
        vec![(
            "allreduce",
            // SAFETY: cuInit ran in open_device; the check switches contexts itself.
            Box::new(|| unsafe {
                crate::allreduce::run(&cfg.allreduce, cfg.allreduce_bytes, cfg.inject_allreduce)
            }),
        )]
    } else if cfg.peers.is_empty() {
        vec![
            // SAFETY: the context opened above is current on this thread.
            ("gemm", Box::new(|| unsafe { gemm(&cfg) })),
            // SAFETY: as above.
            ("copy", Box::new(|| unsafe { copies(&cfg) })),
            // SAFETY: as above.
            ("memtest", Box::new(|| unsafe { memtest(&cfg, dev) })),
        ]
    } else {
        // SAFETY: cuInit ran in open_device; p2p switches contexts itself.
        vec![("p2p", Box::new(|| unsafe { p2p(&cfg) }))]
    };
    for (name, step) in steps.iter() {
        let t = Instant::now();
        match step() {
            Ok(v) => {
                eprintln!(
                    "{NAME}: {name} done in {:.2} s: {v}",
                    t.elapsed().as_secs_f64()
                );
                let bad = v.get("mismatches").and_then(Value::as_u64).unwrap_or(0);
                if bad > 0 {
                    details.push(json!({"type": format!("{name}_mismatch"), "error": format!("{name}: {bad} mismatches"), "hint": "the GPU computed or stored wrong bits: see aorta doctor's remedy"}));
                }
                metrics[*name] = v;
            }
            // A library that is not there (cuBLAS off the loader path) says nothing about the
            // GPU: reported as unavailable, judged "not applicable" by aorta doctor.
            Err(GpuError::Unavailable(e)) => {
                eprintln!("{NAME}: {name} unavailable: {e}");
                metrics[*name] = json!({"unavailable": e});
            }
            Err(e) => {
                eprintln!("{NAME}: {name} FAILED: {e}");
                details.push(json!({"type": format!("{name}_error"), "error": e.to_string(), "hint": "a driver or library call failed on this GPU"}));
            }
        }
    }
    // SAFETY: the primary context retained by open_device.
    unsafe {
        let _ = sys::cuDevicePrimaryCtxRelease_v2(dev);
    }
    let passed = details.is_empty();
    write(&result(
        passed,
        true,
        details,
        metrics,
        t0.elapsed().as_secs_f64(),
    ));
    0
}

/// `aorta-workload-gpu_doctor describe | run --config C --result R`.
pub fn main(args: &[String]) -> i32 {
    crate::protocol::serve(NAME, crate::protocol::describe(NAME), args, run_trial)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_has_two_grid_stride_kernels() {
        let p = ptx();
        assert_eq!(p.matches(".visible .entry").count(), 2);
        assert_eq!(p.matches('{').count(), p.matches('}').count());
        assert!(p.contains("atom.global.add.u64") && p.contains("atom.global.min.u64"));
        assert_eq!(
            p.matches("mul.lo.u32 r6, r6, r2;").count(),
            2,
            "fill and check compute the same word"
        );
    }

    #[test]
    fn patterns_and_inputs() {
        assert_eq!(pattern_word(0xAAAA_AAAA, 0, 12345), 0xAAAA_AAAA);
        assert_ne!(
            pattern_word(0, 0x9E37_79B1, 1),
            pattern_word(0, 0x9E37_79B1, 2)
        );
        assert_ne!(
            pattern_word(0, 0x9E37_79B1, 1),
            pattern_word(0, 0x9E37_79B1, 1 + (1 << 32))
        );
        let vals: std::collections::BTreeSet<i32> =
            (0..1000).map(|i| input_value(1, i, 7) as i32).collect();
        assert_eq!(vals.into_iter().collect::<Vec<_>>(), [-1, 0, 1]);
    }

    #[test]
    fn config_keys_are_checked() {
        let c = parse_cfg(&json!({})).unwrap();
        assert_eq!((c.device, c.gemm_n, c.memtest_fraction), (0, 8192, 0.5));
        assert!(parse_cfg(&json!({"memtest_fraction": 1.5})).is_err());
        assert!(parse_cfg(&json!({"gemm_n": 0})).is_err());
        assert!(
            parse_cfg(&json!({"inject_gemm_mismatch": true}))
                .unwrap()
                .inject_gemm
        );
        assert_eq!(parse_cfg(&json!({"peers": [0, 1]})).unwrap().peers, [0, 1]);
        assert!(parse_cfg(&json!({"peers": [0]})).is_err());
        assert!(parse_cfg(&json!({"peers": "0,1"})).is_err());
        assert_eq!(
            parse_cfg(&json!({"allreduce": [0]})).unwrap().allreduce,
            [0]
        );
        assert!(parse_cfg(&json!({"allreduce": []})).is_err());
        assert!(parse_cfg(&json!({"allreduce": [0, 4096]})).is_err());
    }

    /// Without a GPU the trial is a setup failure with the reason, never a pass.
    #[test]
    fn without_a_driver_it_cannot_start() {
        if driver_present() {
            return eprintln!("skipped: a CUDA driver is present");
        }
        let dir = tempfile::tempdir().unwrap();
        let (c, r) = (
            dir.path().join("CONFIG.json"),
            dir.path().join("RESULT.json"),
        );
        std::fs::write(&c, r#"{"config": {}}"#).unwrap();
        assert_eq!(run_trial(&c, &r), 2);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).unwrap();
        assert_eq!(v["passed"], false);
        assert_eq!(v["main_work_started"], false);
    }
}
