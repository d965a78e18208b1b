//! `gpu_doctor`'s collective check (nccl-tests' `all_reduce_perf -c 1` idea): one NCCL
//! communicator rank per GPU, all driven from this one thread in NCCL groups (as nccl-tests
//! `-t 1 -g N` does), an fp32 sum all-reduce of `bytes`, the best of [`TIMED`] runs as
//! algorithm and bus bandwidth (nccl-tests' definitions), then every element of every rank's
//! output checked bit for bit on the host.
//!
//! Rank r's element i is a small integer ([`element`]), so every partial sum is an integer far
//! below 2^24 and exact in fp32 whatever order NCCL reduces in: any difference is a wrong bit
//! on a GPU or on the wire, never rounding. One GPU is a valid communicator of one rank: it
//! checks that NCCL loads and runs on this driver; bandwidth between GPUs needs two.

use std::ffi::c_void;
use std::ptr;
use std::time::Instant;

use cudarc::driver::sys;
use cudarc::nccl::sys::{cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t};
use serde_json::{json, Value};

use crate::backend::{ck, dev_alloc, primary, GpuError, Result};
use crate::nccl::{self, Nccl};

/// Timed runs after one warm-up; the fastest counts (nccl-tests reports the average of its
/// iterations; the best is steadier on a short check and still bounded by the slowest link).
pub const TIMED: usize = 5;

/// Rank `rank`'s element `i`: an integer in [-8, 8], not periodic in `i` for a fixed rank.
pub fn element(rank: usize, i: usize) -> f32 {
    (((i.wrapping_mul(7)) ^ (i >> 5)).wrapping_add(rank.wrapping_mul(13)) % 17) as f32 - 8.0
}

/// What every rank's output must hold at `i`.
pub fn expected(ranks: usize, i: usize) -> f32 {
    (0..ranks).map(|r| element(r, i)).sum()
}

/// nccl-tests' bus bandwidth of an all-reduce: the algorithm bandwidth × 2(n-1)/n, the share of
/// the data each link carries, comparable across rank counts (0 for one rank: no link used).
pub fn bus_bandwidth(algbw: f64, ranks: usize) -> f64 {
    if ranks < 2 {
        0.0
    } else {
        algbw * 2.0 * (ranks as f64 - 1.0) / ranks as f64
    }
}

struct Rank {
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
    stream: sys::CUstream,
    send: sys::CUdeviceptr,
    recv: sys::CUdeviceptr,
    comm: ncclComm_t,
}

/// Runs the check over `ordinals` with `bytes` per rank; `inject` overwrites one element of
/// rank 0's output before the check (the detection tested on real hardware).
///
/// # Safety
/// cuInit has run (open_device); this switches contexts itself.
pub unsafe fn run(ordinals: &[usize], bytes: usize, inject: bool) -> Result<Value> {
    let lib = Nccl::load(&nccl::candidates(
        |k| std::env::var(k).ok(),
        &nccl::python_sites(),
    ))
    .map_err(GpuError::Unavailable)?;
    let version = lib
        .version()
        .map_err(|e| GpuError::call("ncclGetVersion", e))?;
    let count = (bytes / 4).max(1);
    let n = ordinals.len();
    let mut ranks = Vec::with_capacity(n);
    let outcome = (|| -> Result<Value> {
        for (r, &o) in ordinals.iter().enumerate() {
            ranks.push(open_rank(o, r, count)?);
        }
        let id = lib
            .unique_id()
            .map_err(|e| GpuError::call("ncclGetUniqueId", e))?;
        group(&lib, &mut ranks, |rank, i| {
            rank.comm = lib.init(&id, n as u32, i as u32)?;
            Ok(())
        })?;
        let mut best = f64::INFINITY;
        for i in 0..=TIMED {
            let t = Instant::now();
            group(&lib, &mut ranks, |rank, _| {
                lib.all_reduce(
                    rank.send as *const c_void,
                    rank.recv as *mut c_void,
                    count,
                    ncclDataType_t::ncclFloat32,
                    ncclRedOp_t::ncclSum,
                    rank.comm,
                    rank.stream as cudaStream_t,
                )
            })?;
            for rank in &ranks {
                ck(sys::cuCtxSetCurrent(rank.ctx), "cuCtxSetCurrent")?;
                ck(sys::cuStreamSynchronize(rank.stream), "cuStreamSynchronize")?;
            }
            if i > 0 {
                best = best.min(t.elapsed().as_secs_f64());
            }
        }
        if inject {
            ck(sys::cuCtxSetCurrent(ranks[0].ctx), "cuCtxSetCurrent")?;
            let wrong = (expected(n, 0) + 1.0).to_bits();
            ck(
                sys::cuMemsetD32_v2(ranks[0].recv, wrong, 1),
                "cuMemsetD32 (inject)",
            )?;
            ck(sys::cuCtxSynchronize(), "cuCtxSynchronize")?;
        }
        let (mismatches, first_bad) = check(&ranks, count)?;
        let algbw = (count * 4) as f64 / best / 1e9;
        Ok(json!({
            "ranks": n, "ordinals": ordinals, "bytes": count * 4,
            "nccl_version": version, "nccl_library": lib.path,
            "seconds": best, "algbw_gbs": algbw, "busbw_gbs": bus_bandwidth(algbw, n),
            "mismatches": mismatches, "first_bad": first_bad,
        }))
    })();
    for rank in ranks {
        close_rank(&lib, rank);
    }
    outcome
}

/// Runs `f` for every rank inside one NCCL group, each with its context current (NCCL takes the
/// device from the current context, as a CUDA runtime call would).
unsafe fn group(
    lib: &Nccl,
    ranks: &mut [Rank],
    mut f: impl FnMut(&mut Rank, usize) -> std::result::Result<(), String>,
) -> Result<()> {
    lib.group_start()
        .map_err(|e| GpuError::call("ncclGroupStart", e))?;
    let mut first_err = None;
    for (i, rank) in ranks.iter_mut().enumerate() {
        if let Err(e) = ck(sys::cuCtxSetCurrent(rank.ctx), "cuCtxSetCurrent") {
            first_err.get_or_insert(e);
            break;
        }
        if let Err(e) = f(rank, i) {
            first_err.get_or_insert(GpuError::call("nccl", e));
            break;
        }
    }
    let end = lib
        .group_end()
        .map_err(|e| GpuError::call("ncclGroupEnd", e));
    match first_err {
        Some(e) => Err(e),
        None => end,
    }
}

unsafe fn open_rank(ordinal: usize, rank: usize, count: usize) -> Result<Rank> {
    let (dev, ctx) = primary(ordinal)?;
    ck(sys::cuCtxSetCurrent(ctx), "cuCtxSetCurrent")?;
    let mut stream = ptr::null_mut();
    ck(
        sys::cuStreamCreate(
            &mut stream,
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
        ),
        "cuStreamCreate",
    )?;
    let send = dev_alloc(count * 4, "cuMemAlloc (all-reduce input)")?;
    let recv = dev_alloc(count * 4, "cuMemAlloc (all-reduce output)")?;
    let host: Vec<f32> = (0..count).map(|i| element(rank, i)).collect();
    ck(
        sys::cuMemcpyHtoD_v2(send, host.as_ptr() as *const c_void, count * 4),
        "cuMemcpyHtoD (all-reduce input)",
    )?;
    ck(sys::cuMemsetD32_v2(recv, 0, count), "cuMemsetD32 (clear)")?;
    ck(sys::cuCtxSynchronize(), "cuCtxSynchronize")?;
    Ok(Rank {
        dev,
        ctx,
        stream,
        send,
        recv,
        comm: ptr::null_mut(),
    })
}

/// Every element of every rank's output against [`expected`], bit for bit: the mismatch count
/// and the first bad (rank, index).
unsafe fn check(ranks: &[Rank], count: usize) -> Result<(u64, Value)> {
    let mut host = vec![0f32; count];
    let mut bad = 0u64;
    let mut first = Value::Null;
    for (r, rank) in ranks.iter().enumerate() {
        ck(sys::cuCtxSetCurrent(rank.ctx), "cuCtxSetCurrent")?;
        ck(
            sys::cuMemcpyDtoH_v2(host.as_mut_ptr() as *mut c_void, rank.recv, count * 4),
            "cuMemcpyDtoH (all-reduce check)",
        )?;
        for (i, got) in host.iter().enumerate() {
            let want = expected(ranks.len(), i);
            if got.to_bits() != want.to_bits() {
                if first.is_null() {
                    first = json!({"rank": r, "index": i, "got": got, "expected": want});
                }
                bad += 1;
            }
        }
    }
    Ok((bad, first))
}

unsafe fn close_rank(lib: &Nccl, rank: Rank) {
    let _ = sys::cuCtxSetCurrent(rank.ctx);
    if !rank.comm.is_null() {
        lib.destroy(rank.comm);
    }
    let _ = sys::cuMemFree_v2(rank.send);
    let _ = sys::cuMemFree_v2(rank.recv);
    let _ = sys::cuStreamDestroy_v2(rank.stream);
    let _ = sys::cuDevicePrimaryCtxRelease_v2(rank.dev);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_are_exact_integers_for_any_rank_count() {
        for ranks in [1, 2, 8, 1024] {
            for i in [0, 1, 31, 32, 1 << 20] {
                let s = expected(ranks, i);
                assert_eq!(s, s.trunc());
                assert!(s.abs() <= 8.0 * ranks as f32);
            }
        }
        let one: std::collections::BTreeSet<i32> =
            (0..1000).map(|i| element(0, i) as i32).collect();
        assert_eq!(one.len(), 17, "every value in [-8, 8] occurs");
        assert_ne!(element(0, 5), element(1, 5), "ranks hold different data");
    }

    #[test]
    fn bus_bandwidth_follows_nccl_tests() {
        assert_eq!(bus_bandwidth(100.0, 1), 0.0);
        assert_eq!(bus_bandwidth(100.0, 2), 100.0);
        assert_eq!(bus_bandwidth(100.0, 8), 175.0);
    }
}
