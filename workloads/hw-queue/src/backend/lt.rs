//! cuBLASLt GEMMs: one descriptor set per shape, the heuristic's top candidates kept so the
//! caller can time each and select the best (`gemm_select`).

use std::ffi::c_void;
use std::mem;
use std::ptr;

use cudarc::cublaslt::sys as lt;
use cudarc::driver::sys;

use super::driver::dev_alloc;
use super::{AlgoInfo, Dtype, GemmShape, GpuError, Result};

const WORKSPACE: usize = 32 << 20;

fn ckl(s: lt::cublasStatus_t, what: &str) -> Result<()> {
    if s == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(GpuError::call(what, format!("{s:?}")))
    }
}

pub struct Lt {
    handle: lt::cublasLtHandle_t,
}

impl Lt {
    pub fn new() -> Result<Self> {
        // SAFETY: only dlopen attempts.
        if !unsafe { lt::is_culib_present() } {
            return Err(GpuError::Unavailable(
                "cuBLASLt (libcublasLt.so.13 or similar) was not found: put the CUDA toolkit's \
                 lib64 or the nvidia-cublas wheel's lib directory on LD_LIBRARY_PATH"
                    .into(),
            ));
        }
        let mut handle = ptr::null_mut();
        // SAFETY: valid out-pointer; a context is current.
        ckl(unsafe { lt::cublasLtCreate(&mut handle) }, "cublasLtCreate")?;
        Ok(Lt { handle })
    }
}

impl Drop for Lt {
    fn drop(&mut self) {
        // SAFETY: created in new().
        unsafe {
            let _ = lt::cublasLtDestroy(self.handle);
        }
    }
}

pub struct LtGemm {
    desc: lt::cublasLtMatmulDesc_t,
    layouts: [lt::cublasLtMatrixLayout_t; 3],
    a: sys::CUdeviceptr,
    b: sys::CUdeviceptr,
    outs: Vec<sys::CUdeviceptr>,
    workspaces: Vec<sys::CUdeviceptr>,
    results: Vec<lt::cublasLtMatmulHeuristicResult_t>,
    pub(crate) selected: usize,
}

fn types(d: Dtype) -> (lt::cudaDataType, lt::cublasComputeType_t) {
    use lt::cublasComputeType_t::*;
    use lt::cudaDataType::*;
    match d {
        Dtype::F32 => (CUDA_R_32F, CUBLAS_COMPUTE_32F),
        Dtype::Tf32 => (CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32),
        Dtype::Bf16 => (CUDA_R_16BF, CUBLAS_COMPUTE_32F),
        Dtype::F16 => (CUDA_R_16F, CUBLAS_COMPUTE_32F),
    }
}

impl LtGemm {
    pub fn new(
        h: &Lt,
        shape: GemmShape,
        outputs: u32,
        candidates: u32,
        fill: impl Fn(sys::CUdeviceptr, u64, Option<bool>, u32) -> Result<()>,
    ) -> Result<Self> {
        let (dt, ct) = types(shape.dtype);
        let el = shape.dtype.bytes();
        let GemmShape { m, n, k, .. } = shape;
        let half = match shape.dtype {
            Dtype::F32 | Dtype::Tf32 => None,
            Dtype::Bf16 => Some(true),
            Dtype::F16 => Some(false),
        };
        let a = dev_alloc((m * k) as usize * el, "cuMemAlloc (A)")?;
        let b = dev_alloc((k * n) as usize * el, "cuMemAlloc (B)")?;
        fill(a, m * k, half, 1)?;
        fill(b, k * n, half, 2)?;
        let mut outs = Vec::new();
        let mut workspaces = Vec::new();
        for _ in 0..outputs {
            outs.push(dev_alloc((m * n) as usize * el, "cuMemAlloc (C)")?);
            workspaces.push(dev_alloc(WORKSPACE, "cuMemAlloc (workspace)")?);
        }
        // SAFETY: descriptors are created and used with valid pointers; freed in `free`.
        unsafe {
            let mut desc = ptr::null_mut();
            ckl(
                lt::cublasLtMatmulDescCreate(&mut desc, ct, lt::cudaDataType::CUDA_R_32F),
                "cublasLtMatmulDescCreate",
            )?;
            let mut layouts = [ptr::null_mut(); 3];
            for (l, (r, c)) in layouts.iter_mut().zip([(m, k), (k, n), (m, n)]) {
                ckl(
                    lt::cublasLtMatrixLayoutCreate(l, dt, r, c, r as i64),
                    "cublasLtMatrixLayoutCreate",
                )?;
            }
            let mut pref = ptr::null_mut();
            ckl(
                lt::cublasLtMatmulPreferenceCreate(&mut pref),
                "cublasLtMatmulPreferenceCreate",
            )?;
            let ws = WORKSPACE as u64;
            ckl(
                lt::cublasLtMatmulPreferenceSetAttribute(
                    pref,
                    lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                    &ws as *const u64 as *const c_void,
                    mem::size_of::<u64>(),
                ),
                "cublasLtMatmulPreferenceSetAttribute",
            )?;
            let mut results: Vec<lt::cublasLtMatmulHeuristicResult_t> =
                vec![mem::zeroed(); candidates as usize];
            let mut count = 0;
            let st = lt::cublasLtMatmulAlgoGetHeuristic(
                h.handle,
                desc,
                layouts[0],
                layouts[1],
                layouts[2],
                layouts[2],
                pref,
                candidates as i32,
                results.as_mut_ptr(),
                &mut count,
            );
            let _ = lt::cublasLtMatmulPreferenceDestroy(pref);
            ckl(st, "cublasLtMatmulAlgoGetHeuristic")?;
            results.truncate(count.max(0) as usize);
            results.retain(|r| {
                r.state == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS && r.workspaceSize <= WORKSPACE
            });
            if results.is_empty() {
                return Err(GpuError::call(
                    "cublasLtMatmulAlgoGetHeuristic",
                    format!("no algorithm for {shape:?}"),
                ));
            }
            Ok(LtGemm {
                desc,
                layouts,
                a,
                b,
                outs,
                workspaces,
                results,
                selected: 0,
            })
        }
    }

    /// The A and B inputs, for a caller that fills them after creation.
    pub fn inputs(&self) -> [sys::CUdeviceptr; 2] {
        [self.a, self.b]
    }

    pub(crate) fn algos(&self) -> Vec<AlgoInfo> {
        self.results
            .iter()
            .enumerate()
            .map(|(index, r)| AlgoInfo {
                index,
                workspace_bytes: r.workspaceSize,
                waves: r.wavesCount,
            })
            .collect()
    }

    pub fn run(&self, h: &Lt, stream: sys::CUstream, out: usize) -> Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let c = self.outs[out % self.outs.len()];
        let ws = self.workspaces[out % self.workspaces.len()];
        let r = &self.results[self.selected.min(self.results.len() - 1)];
        // SAFETY: all descriptors and buffers live; stream is a CUstream of the current context.
        let st = unsafe {
            lt::cublasLtMatmul(
                h.handle,
                self.desc,
                &alpha as *const f32 as *const c_void,
                self.a as *const c_void,
                self.layouts[0],
                self.b as *const c_void,
                self.layouts[1],
                &beta as *const f32 as *const c_void,
                c as *const c_void,
                self.layouts[2],
                c as *mut c_void,
                self.layouts[2],
                &r.algo,
                ws as *mut c_void,
                WORKSPACE,
                stream as lt::cudaStream_t,
            )
        };
        ckl(st, "cublasLtMatmul")
    }

    pub fn free(self, _h: &Lt) {
        // SAFETY: created in new(); the context was synchronized by the caller.
        unsafe {
            let _ = lt::cublasLtMatmulDescDestroy(self.desc);
            for l in self.layouts {
                let _ = lt::cublasLtMatrixLayoutDestroy(l);
            }
            for p in [self.a, self.b]
                .into_iter()
                .chain(self.outs)
                .chain(self.workspaces)
            {
                let _ = sys::cuMemFree_v2(p);
            }
        }
    }
}
