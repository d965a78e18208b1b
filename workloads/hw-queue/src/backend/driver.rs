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

/// `bytes` (at least one) of device memory in the current context.
pub(crate) fn dev_alloc(bytes: usize, what: &str) -> Result<sys::CUdeviceptr> {
    let mut p = 0;
    // SAFETY: valid out-pointer.
    ck(unsafe { sys::cuMemAlloc_v2(&mut p, bytes.max(1)) }, what)?;
    Ok(p)
}
