//! What the driver backend (cuda.rs) and the cuBLASLt GEMMs (lt.rs) share: a driver call's
//! result as this crate's error, and device memory.

use cudarc::driver::result::DriverError;
use cudarc::driver::sys;

use super::{GpuError, Result};

/// The driver's name and text for an error code.
pub(crate) fn describe(r: sys::CUresult) -> String {
    let e = DriverError(r);
    let name = e.error_name().map(|c| c.to_string_lossy().into_owned());
    let text = e.error_string().map(|c| c.to_string_lossy().into_owned());
    match (name, text) {
        (Ok(n), Ok(t)) => format!("{n} ({t})"),
        _ => format!("{r:?}"),
    }
}

/// A driver call's result: `what` names the call in the error.
pub(crate) fn ck(r: sys::CUresult, what: &str) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(GpuError::call(what, describe(r)))
    }
}

/// The primary context of device `ordinal`, retained (the caller releases it and makes it
/// current when it needs it): the multi-GPU checks hold one per GPU.
///
/// # Safety
/// Driver calls only; cuInit has run.
pub(crate) unsafe fn primary(ordinal: usize) -> Result<(sys::CUdevice, sys::CUcontext)> {
    let dev = cudarc::driver::result::device::get(ordinal as i32)
        .map_err(|e| GpuError::Unavailable(format!("device {ordinal}: {e:?}")))?;
    let mut ctx = std::ptr::null_mut();
    ck(
        sys::cuDevicePrimaryCtxRetain(&mut ctx, dev),
        "cuDevicePrimaryCtxRetain",
    )?;
    Ok((dev, ctx))
}

/// A 1-D launch of `func` on the null stream: `grid` blocks of `block` threads, no shared
/// memory; `what` names the kernel in the error.
///
/// # Safety
/// A context is current; `params` matches `func`'s parameters and outlives the call.
pub(crate) unsafe fn launch_1d(
    func: sys::CUfunction,
    grid: u32,
    block: u32,
    params: &mut [*mut std::ffi::c_void],
    what: &str,
) -> Result<()> {
    ck(
        sys::cuLaunchKernel(
            func,
            grid,
            1,
            1,
            block,
            1,
            1,
            0,
            std::ptr::null_mut(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        ),
        what,
    )
}

/// cuInit, then device `ordinal` (`Unavailable` when the driver will not start or no such
/// device is visible), its name, and its primary context made current: how every CUDA user in
/// this crate starts.
///
/// # Safety
/// Driver calls only; the context is made current on the calling thread.
pub(crate) unsafe fn open_device(ordinal: usize) -> Result<(sys::CUdevice, String)> {
    use cudarc::driver::result as dr;
    let r = sys::cuInit(0);
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(GpuError::Unavailable(format!("cuInit: {}", describe(r))));
    }
    let count = dr::device::get_count().map_err(|e| GpuError::Unavailable(describe(e.0)))?;
    if ordinal as i32 >= count {
        return Err(GpuError::Unavailable(format!(
            "device {ordinal} requested, {count} visible"
        )));
    }
    let dev = dr::device::get(ordinal as i32).map_err(|e| GpuError::Unavailable(describe(e.0)))?;
    let mut name = [0i8; 256];
    ck(
        sys::cuDeviceGetName(name.as_mut_ptr() as *mut _, 256, dev),
        "cuDeviceGetName",
    )?;
    let name = std::ffi::CStr::from_ptr(name.as_ptr() as *const _)
        .to_string_lossy()
        .into_owned();
    let mut ctx = std::ptr::null_mut();
    ck(
        sys::cuDevicePrimaryCtxRetain(&mut ctx, dev),
        "cuDevicePrimaryCtxRetain",
    )?;
    ck(sys::cuCtxSetCurrent(ctx), "cuCtxSetCurrent")?;
    Ok((dev, name))
}

/// `bytes` (at least one) of device memory in the current context.
pub(crate) fn dev_alloc(bytes: usize, what: &str) -> Result<sys::CUdeviceptr> {
    let mut p = 0;
    // SAFETY: valid out-pointer.
    ck(unsafe { sys::cuMemAlloc_v2(&mut p, bytes.max(1)) }, what)?;
    Ok(p)
}
