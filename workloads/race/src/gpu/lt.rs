//! The compute load: `count` GEMMs of gemm_size³ in the run's dtype through cuBLASLt (the
//! heuristic's first algorithm), writing a private output that nothing verifies.

use std::ffi::c_void;
use std::{mem, ptr};

use cudarc::cublaslt::sys as lt;
use cudarc::driver::sys;

use crate::pattern::Dtype;

const WORKSPACE: usize = 32 << 20;

fn ck(s: lt::cublasStatus_t, what: &str) -> Result<(), String> {
    if s == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {s:?}"))
    }
}

pub struct Gemm {
    handle: lt::cublasLtHandle_t,
    desc: lt::cublasLtMatmulDesc_t,
    layout: lt::cublasLtMatrixLayout_t,
    algo: lt::cublasLtMatmulAlgo_t,
    pub(crate) a: sys::CUdeviceptr,
    c: sys::CUdeviceptr,
    ws: sys::CUdeviceptr,
}

impl Gemm {
    /// A, B (the same matrix) and C of n×n; `alloc` allocates device memory.
    pub fn new(n: u64, dtype: Dtype, alloc: &mut dyn FnMut(usize) -> Result<sys::CUdeviceptr, String>) -> Result<Gemm, String> {
        // SAFETY: only dlopen attempts.
        if !unsafe { lt::is_culib_present() } {
            return Err("cuBLASLt (libcublasLt.so.13) was not found: put the CUDA toolkit's lib64 or the \
                        nvidia-cublas wheel's lib directory on LD_LIBRARY_PATH, or set simulate_compute: false"
                .into());
        }
        use lt::cublasComputeType_t::*;
        use lt::cudaDataType::*;
        let (dt, ct) = match dtype {
            Dtype::F32 => (CUDA_R_32F, CUBLAS_COMPUTE_32F),
            Dtype::Bf16 => (CUDA_R_16BF, CUBLAS_COMPUTE_32F),
            Dtype::F16 => (CUDA_R_16F, CUBLAS_COMPUTE_32F),
        };
        let bytes = (n * n) as usize * dtype.bytes();
        let (a, c, ws) = (alloc(bytes)?, alloc(bytes)?, alloc(WORKSPACE)?);
        // SAFETY: descriptors created with valid out-pointers and used while alive.
        unsafe {
            let mut handle = ptr::null_mut();
            ck(lt::cublasLtCreate(&mut handle), "cublasLtCreate")?;
            let mut desc = ptr::null_mut();
            ck(lt::cublasLtMatmulDescCreate(&mut desc, ct, CUDA_R_32F), "cublasLtMatmulDescCreate")?;
            let mut layout = ptr::null_mut();
            ck(lt::cublasLtMatrixLayoutCreate(&mut layout, dt, n, n, n as i64), "cublasLtMatrixLayoutCreate")?;
            let mut pref = ptr::null_mut();
            ck(lt::cublasLtMatmulPreferenceCreate(&mut pref), "cublasLtMatmulPreferenceCreate")?;
            let w = WORKSPACE as u64;
            ck(
                lt::cublasLtMatmulPreferenceSetAttribute(
                    pref,
                    lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                    &w as *const u64 as *const c_void,
                    mem::size_of::<u64>(),
                ),
                "cublasLtMatmulPreferenceSetAttribute",
            )?;
            let mut res: lt::cublasLtMatmulHeuristicResult_t = mem::zeroed();
            let mut count = 0;
            let st = lt::cublasLtMatmulAlgoGetHeuristic(handle, desc, layout, layout, layout, layout, pref, 1, &mut res, &mut count);
            let _ = lt::cublasLtMatmulPreferenceDestroy(pref);
            ck(st, "cublasLtMatmulAlgoGetHeuristic")?;
            if count < 1 {
                return Err(format!("cuBLASLt has no algorithm for a {n}³ {dtype:?} GEMM"));
            }
            Ok(Gemm { handle, desc, layout, algo: res.algo, a, c, ws })
        }
    }

    pub fn run(&self, stream: sys::CUstream) -> Result<(), String> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: all descriptors and buffers live; stream of the current context.
        let st = unsafe {
            lt::cublasLtMatmul(
                self.handle,
                self.desc,
                &alpha as *const f32 as *const c_void,
                self.a as *const c_void,
                self.layout,
                self.a as *const c_void,
                self.layout,
                &beta as *const f32 as *const c_void,
                self.c as *const c_void,
                self.layout,
                self.c as *mut c_void,
                self.layout,
                &self.algo,
                self.ws as *mut c_void,
                WORKSPACE,
                stream as lt::cudaStream_t,
            )
        };
        ck(st, "cublasLtMatmul")
    }
}
