//! The CUDA side: a context on the rank's GPU, three streams (compute, comm with the configured
//! priority, copy), the plan's buffers, the pattern kernels, GEMMs and NCCL. Driver calls go
//! through cudarc's `sys` layer (dynamically loaded, so the binary starts without a GPU); every
//! library is checked before first use and its absence is a `Setup` error, never a panic.

pub mod kernels;

use aorta_hw_queue::nccl;

use std::ffi::{c_void, CString};
use std::ptr;
use std::time::Instant;

use cudarc::driver::result::DriverError;
use cudarc::driver::sys;
use cudarc::nccl::sys::{ncclComm_t, ncclDataType_t, ncclRedOp_t};

use aorta_hw_queue::backend::lt::{Lt, LtGemm};
use aorta_hw_queue::backend::{Dtype as GemmDtype, GemmShape};

use crate::config::{CommPriority, RaceConfig};
use crate::pattern::Dtype;
use crate::plan::{BufSpec, Layout, Op, Plan, StreamId, STREAMS};
use crate::runner::Executor;

fn describe(r: sys::CUresult) -> String {
    let e = DriverError(r);
    match (e.error_name(), e.error_string()) {
        (Ok(n), Ok(t)) => format!("{} ({})", n.to_string_lossy(), t.to_string_lossy()),
        _ => format!("{r:?}"),
    }
}

fn ck(r: sys::CUresult, what: &str) -> Result<(), String> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {}", describe(r)))
    }
}

/// Device memory, or host memory for H2D sources (pinned, or a pageable Vec).
enum Mem {
    Dev(sys::CUdeviceptr),
    Pinned(*mut u8),
    Pageable(Vec<u8>),
}

pub struct Runtime {
    pub info: serde_json::Value,
    dtype: Dtype,
    world: u32,
    streams: [sys::CUstream; STREAMS],
    events: Vec<sys::CUevent>,
    funcs: Vec<sys::CUfunction>,
    bufs: Vec<(Mem, usize)>,
    /// The compute load: hw-queue's cuBLASLt GEMM (gemm_size³, the heuristic's first algorithm).
    gemm: Option<(Lt, LtGemm)>,
    window_ns: u64,
    blocks: u32,
    nccl: Option<nccl::Nccl>,
    comm: ncclComm_t,
    flag: sys::CUdeviceptr,
}

fn nccl_dtype(d: Dtype) -> ncclDataType_t {
    match d {
        Dtype::Bf16 => ncclDataType_t::ncclBfloat16,
        Dtype::F16 => ncclDataType_t::ncclFloat16,
        Dtype::F32 => ncclDataType_t::ncclFloat32,
    }
}

fn attr(dev: sys::CUdevice, a: sys::CUdevice_attribute) -> Result<i32, String> {
    let mut v = 0;
    ck(
        // SAFETY: valid out-pointer and device.
        unsafe { sys::cuDeviceGetAttribute(&mut v, a, dev) },
        "cuDeviceGetAttribute",
    )?;
    Ok(v)
}

fn dev_alloc(bytes: usize) -> Result<sys::CUdeviceptr, String> {
    let mut p = 0;
    // SAFETY: valid out-pointer; a context is current.
    unsafe {
        ck(
            sys::cuMemAlloc_v2(&mut p, bytes.max(4)),
            &format!("cuMemAlloc ({bytes} bytes)"),
        )?;
        ck(sys::cuMemsetD8_v2(p, 0, bytes.max(4)), "cuMemsetD8")?;
    }
    Ok(p)
}

/// Whether the libraries a run needs can be loaded (no panics: checked before first use).
pub fn check_libraries(cfg: &RaceConfig) -> Result<(), String> {
    // SAFETY: only dlopen attempts.
    unsafe {
        if !sys::is_culib_present() {
            return Err("the CUDA driver library (libcuda.so.1) was not found: run on a machine with an NVIDIA GPU and its driver".into());
        }
        if !cudarc::nvrtc::sys::is_culib_present() {
            return Err("NVRTC (libnvrtc.so.13) was not found: put the CUDA 13 toolkit's lib64 (or the nvidia-cuda-nvrtc wheel's lib) on LD_LIBRARY_PATH".into());
        }
        if cfg.simulate_compute && !cudarc::cublaslt::sys::is_culib_present() {
            return Err("cuBLASLt (libcublasLt.so.13) was not found: put the CUDA toolkit's lib64 or the nvidia-cublas wheel's lib on LD_LIBRARY_PATH, or set simulate_compute: false".into());
        }
    }
    Ok(())
}

impl Runtime {
    /// Context, streams, kernels, buffers, GEMM and the NCCL library on GPU `ordinal`.
    pub fn new(
        cfg: &RaceConfig,
        layout: &Layout,
        ordinal: u32,
        world: u32,
    ) -> Result<Runtime, String> {
        use sys::CUdevice_attribute::*;
        check_libraries(cfg)?;
        let nccl = nccl::Nccl::load(&nccl::candidates(
            |k| std::env::var(k).ok(),
            &nccl::python_sites(),
        ))?;
        // SAFETY: driver calls in order with valid out-pointers.
        unsafe {
            ck(sys::cuInit(0), "cuInit")?;
            let mut count = 0;
            ck(sys::cuDeviceGetCount(&mut count), "cuDeviceGetCount")?;
            if ordinal as i32 >= count {
                return Err(format!(
                    "GPU {ordinal} requested (LOCAL_RANK), {count} visible"
                ));
            }
            let mut dev = 0;
            ck(sys::cuDeviceGet(&mut dev, ordinal as i32), "cuDeviceGet")?;
            let mut ctx = ptr::null_mut();
            ck(
                sys::cuDevicePrimaryCtxRetain(&mut ctx, dev),
                "cuDevicePrimaryCtxRetain",
            )?;
            ck(sys::cuCtxSetCurrent(ctx), "cuCtxSetCurrent")?;
            let (mut least, mut greatest) = (0, 0);
            ck(
                sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest),
                "cuCtxGetStreamPriorityRange",
            )?;
            let mut streams = [ptr::null_mut(); STREAMS];
            for (i, s) in streams.iter_mut().enumerate() {
                let prio =
                    if i == StreamId::Comm as usize && cfg.comm_priority == CommPriority::High {
                        greatest
                    } else {
                        0
                    };
                let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
                ck(
                    sys::cuStreamCreateWithPriority(s, flags, prio),
                    "cuStreamCreateWithPriority",
                )?;
            }
            let (major, minor) = (
                attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            );
            let sms = attr(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
            let mut name = [0i8; 256];
            ck(
                sys::cuDeviceGetName(name.as_mut_ptr() as *mut _, 256, dev),
                "cuDeviceGetName",
            )?;
            let name = std::ffi::CStr::from_ptr(name.as_ptr() as *const _)
                .to_string_lossy()
                .into_owned();
            let mut drv = 0;
            ck(sys::cuDriverGetVersion(&mut drv), "cuDriverGetVersion")?;
            let opts = cudarc::nvrtc::CompileOptions {
                arch: aorta_hw_queue::backend::kernels::arch_for(major, minor),
                name: Some("race.cu".into()),
                ..Default::default()
            };
            let ptx = cudarc::nvrtc::compile_ptx_with_opts(kernels::SOURCE, opts)
                .map_err(|e| format!("NVRTC: {e:?}"))?;
            let src = CString::new(ptx.to_src()).map_err(|e| e.to_string())?;
            let mut module = ptr::null_mut();
            ck(
                sys::cuModuleLoadData(&mut module, src.as_ptr() as *const c_void),
                "cuModuleLoadData (keep NVRTC no newer than the driver's CUDA)",
            )?;
            let mut funcs = Vec::new();
            for n in kernels::NAMES {
                let mut f = ptr::null_mut();
                let c = CString::new(n).map_err(|e| e.to_string())?;
                ck(
                    sys::cuModuleGetFunction(&mut f, module, c.as_ptr()),
                    "cuModuleGetFunction",
                )?;
                funcs.push(f);
            }
            let mut bufs = Vec::new();
            for BufSpec { elems, host, .. } in &layout.bufs {
                let bytes = elems * cfg.dtype.bytes();
                let m = match (host, cfg.pin_memory) {
                    (false, _) => Mem::Dev(dev_alloc(bytes)?),
                    (true, true) => {
                        let mut h = ptr::null_mut();
                        ck(
                            sys::cuMemHostAlloc(&mut h, bytes.max(4), 0),
                            "cuMemHostAlloc",
                        )?;
                        Mem::Pinned(h as *mut u8)
                    }
                    (true, false) => Mem::Pageable(vec![0u8; bytes]),
                };
                bufs.push((m, bytes));
            }
            let gemm = if cfg.simulate_compute {
                Some(gemm(cfg.gemm_size, cfg.dtype)?)
            } else {
                None
            };
            let flag = dev_alloc(4)?;
            let nver = nccl.version()?;
            let info = serde_json::json!({
                "gpu": name, "compute_capability": format!("{major}.{minor}"), "sm_count": sms,
                "driver": format!("{}.{}", drv / 1000, (drv % 1000) / 10), "nccl_version": nver, "nccl_library": nccl.path,
                "stream_priority_range": [least, greatest],
                "cuda_device_max_connections": std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").unwrap_or_else(|_| "unset (8)".into()),
                "cuda_launch_blocking": std::env::var("CUDA_LAUNCH_BLOCKING").unwrap_or_else(|_| "unset".into()),
            });
            let rt = Runtime {
                info,
                dtype: cfg.dtype,
                world,
                streams,
                events: Vec::new(),
                funcs,
                bufs,
                gemm,
                window_ns: (cfg.race_window_us * 1e3) as u64,
                blocks: sms * 4,
                nccl: Some(nccl),
                comm: ptr::null_mut(),
                flag,
            };
            if let Some((_, g)) = &rt.gemm {
                for input in g.inputs() {
                    rt.fill_raw(
                        input,
                        (cfg.gemm_size * cfg.gemm_size) as usize,
                        0.01,
                        0,
                        streams[0],
                    )?;
                }
            }
            ck(sys::cuCtxSynchronize(), "cuCtxSynchronize")?;
            Ok(rt)
        }
    }

    pub fn nccl_unique_id(&self) -> Result<[u8; 128], String> {
        self.nccl.as_ref().ok_or("NCCL not loaded")?.unique_id()
    }

    fn launch(
        &self,
        f: usize,
        grid: u32,
        block: u32,
        stream: sys::CUstream,
        args: &mut [*mut c_void],
    ) -> Result<(), String> {
        ck(
            // SAFETY: f is loaded and args match its signature (callers below).
            unsafe {
                sys::cuLaunchKernel(
                    self.funcs[f],
                    grid,
                    1,
                    1,
                    block,
                    1,
                    1,
                    0,
                    stream,
                    args.as_mut_ptr(),
                    ptr::null_mut(),
                )
            },
            kernels::NAMES[f],
        )
    }

    fn fill_raw(
        &self,
        p: sys::CUdeviceptr,
        n: usize,
        v: f32,
        hold_ns: u64,
        stream: sys::CUstream,
    ) -> Result<(), String> {
        let (mut p, mut n, mut bits, mut w, mut h) = (
            p,
            n as u64,
            self.dtype.encode(v),
            self.dtype.bytes() as i32,
            hold_ns,
        );
        let grid = self.blocks.min(n.div_ceil(256).max(1) as u32);
        let mut args = [
            arg(&mut p),
            arg(&mut n),
            arg(&mut bits),
            arg(&mut w),
            arg(&mut h),
        ];
        self.launch(kernels::FILL, grid, 256, stream, &mut args)
    }

    fn dptr(&self, b: usize) -> Result<sys::CUdeviceptr, String> {
        match &self.bufs[b].0 {
            Mem::Dev(p) => Ok(*p),
            _ => Err(format!(
                "buffer {b} is host memory where device memory is needed"
            )),
        }
    }

    fn comm(&self) -> Result<(&nccl::Nccl, ncclComm_t), String> {
        match &self.nccl {
            Some(n) if !self.comm.is_null() => Ok((n, self.comm)),
            _ => Err("NCCL communicator not initialised".into()),
        }
    }

    fn op(&mut self, op: &Op) -> Result<(), String> {
        let st = |s: StreamId| self.streams[s as usize];
        let el = self.dtype.bytes();
        let dt = nccl_dtype(self.dtype);
        match *op {
            Op::HostFill { buf, value } => {
                let pattern = self.dtype.fill(self.bufs[buf].1 / el, value);
                match &mut self.bufs[buf].0 {
                    // SAFETY: the previous iteration was synchronised, so no copy reads it now.
                    Mem::Pinned(h) => unsafe {
                        ptr::copy_nonoverlapping(pattern.as_ptr(), *h, pattern.len())
                    },
                    Mem::Pageable(v) => v.copy_from_slice(&pattern),
                    Mem::Dev(_) => return Err("HostFill of a device buffer".into()),
                }
            }
            Op::Copy { stream, dst, src } => {
                let bytes = self.bufs[dst].1.min(self.bufs[src].1);
                let d = self.dptr(dst)?;
                // SAFETY: both buffers hold at least `bytes`; the stream belongs to the context.
                unsafe {
                    match &self.bufs[src].0 {
                        Mem::Pinned(h) => ck(
                            sys::cuMemcpyHtoDAsync_v2(d, *h as *const c_void, bytes, st(stream)),
                            "cuMemcpyHtoDAsync",
                        )?,
                        Mem::Pageable(v) => ck(
                            sys::cuMemcpyHtoDAsync_v2(
                                d,
                                v.as_ptr() as *const c_void,
                                bytes,
                                st(stream),
                            ),
                            "cuMemcpyHtoDAsync",
                        )?,
                        Mem::Dev(s) => ck(
                            sys::cuMemcpyDtoDAsync_v2(d, *s, bytes, st(stream)),
                            "cuMemcpyDtoDAsync",
                        )?,
                    }
                }
            }
            Op::Fill {
                stream,
                buf,
                value,
                slow,
            } => {
                let hold = if slow { self.window_ns } else { 0 };
                self.fill_raw(
                    self.dptr(buf)?,
                    self.bufs[buf].1 / el,
                    value,
                    hold,
                    st(stream),
                )?;
            }
            Op::Consume {
                stream,
                dst,
                src,
                slow,
            } => {
                let (mut d, mut s) = (self.dptr(dst)?, self.dptr(src)?);
                let mut n16 = (self.bufs[dst].1.min(self.bufs[src].1) / 2) as u64;
                let mut hold = if slow { self.window_ns } else { 0 };
                let grid = self.blocks.min(n16.div_ceil(256).max(1) as u32);
                let mut args = [arg(&mut d), arg(&mut s), arg(&mut n16), arg(&mut hold)];
                self.launch(kernels::CONSUME, grid, 256, st(stream), &mut args)?;
            }
            Op::Gemm { stream, count } => {
                if let Some((lt, g)) = &self.gemm {
                    for _ in 0..count {
                        g.run(lt, st(stream), 0).map_err(|e| e.to_string())?;
                    }
                }
            }
            Op::Delay { stream, us } => {
                let mut ns = (us * 1e3) as u64;
                self.launch(kernels::SPIN, 1, 32, st(stream), &mut [arg(&mut ns)])?;
            }
            Op::AllReduce { stream, send, recv } => {
                let (n, c) = self.comm()?;
                let count = self.bufs[recv].1 / el;
                // SAFETY: device buffers of the plan's sizes, live communicator and stream.
                unsafe {
                    n.all_reduce(
                        self.dptr(send)? as *const c_void,
                        self.dptr(recv)? as *mut c_void,
                        count,
                        dt,
                        ncclRedOp_t::ncclSum,
                        c,
                        st(stream) as _,
                    )
                }?;
            }
            Op::AllGather { stream, send, recv } => {
                let (n, c) = self.comm()?;
                let count = self.bufs[send].1 / el;
                // SAFETY: device buffers of the plan's sizes, live communicator and stream.
                unsafe {
                    n.all_gather(
                        self.dptr(send)? as *const c_void,
                        self.dptr(recv)? as *mut c_void,
                        count,
                        dt,
                        c,
                        st(stream) as _,
                    )
                }?;
            }
            Op::ReduceScatter { stream, send, recv } => {
                let (n, c) = self.comm()?;
                let count = self.bufs[recv].1 / el;
                // SAFETY: device buffers of the plan's sizes, live communicator and stream.
                unsafe {
                    n.reduce_scatter(
                        self.dptr(send)? as *const c_void,
                        self.dptr(recv)? as *mut c_void,
                        count,
                        dt,
                        c,
                        st(stream) as _,
                    )
                }?;
            }
            Op::AllToAll { stream, send, recv } => {
                let (n, c) = self.comm()?;
                let chunk = self.bufs[send].1 / el / self.world as usize;
                // SAFETY: device buffers of the plan's sizes, live communicator and stream.
                unsafe {
                    n.all_to_all(
                        self.dptr(send)?,
                        self.dptr(recv)?,
                        chunk,
                        el,
                        self.world,
                        dt,
                        c,
                        st(stream) as _,
                    )
                }?;
            }
            Op::Record { stream, event } => {
                ck(
                    // SAFETY: the event was created for this context.
                    unsafe { sys::cuEventRecord(self.events[event], st(stream)) },
                    "cuEventRecord",
                )?;
            }
            Op::Wait { stream, event } => {
                ck(
                    // SAFETY: as above.
                    unsafe { sys::cuStreamWaitEvent(st(stream), self.events[event], 0) },
                    "cuStreamWaitEvent",
                )?;
            }
        }
        Ok(())
    }
}

fn arg<T>(v: &mut T) -> *mut c_void {
    v as *mut T as *mut c_void
}

impl Executor for Runtime {
    fn init_comm(&mut self, id: &[u8; 128], rank: u32) -> Result<(), String> {
        let n = self.nccl.as_ref().ok_or("NCCL not loaded")?;
        self.comm = n.init(id, self.world, rank)?;
        Ok(())
    }

    fn execute(&mut self, plan: &Plan) -> Result<f64, String> {
        while self.events.len() < plan.events {
            let mut e = ptr::null_mut();
            let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
            ck(
                // SAFETY: valid out-pointer.
                unsafe { sys::cuEventCreate(&mut e, flags) },
                "cuEventCreate",
            )?;
            self.events.push(e);
        }
        let t = Instant::now();
        for op in &plan.ops {
            self.op(op)?;
        }
        ck(
            // SAFETY: plain synchronisation.
            unsafe { sys::cuCtxSynchronize() },
            "cuCtxSynchronize (after the iteration)",
        )?;
        Ok(t.elapsed().as_secs_f64() * 1e3)
    }

    fn read(&mut self, buf: usize) -> Result<Vec<u8>, String> {
        let (m, bytes) = &self.bufs[buf];
        match m {
            Mem::Dev(p) => {
                let mut v = vec![0u8; *bytes];
                ck(
                    // SAFETY: the buffer holds `bytes`; the device is synchronised.
                    unsafe { sys::cuMemcpyDtoH_v2(v.as_mut_ptr() as *mut c_void, *p, *bytes) },
                    "cuMemcpyDtoH",
                )?;
                Ok(v)
            }
            // SAFETY: a pinned allocation of `bytes`.
            Mem::Pinned(h) => Ok(unsafe { std::slice::from_raw_parts(*h, *bytes) }.to_vec()),
            Mem::Pageable(v) => Ok(v.clone()),
        }
    }

    fn any_rank(&mut self, local: bool) -> Result<bool, String> {
        if self.world == 1 {
            return Ok(local);
        }
        let (n, c) = self.comm()?;
        let v: f32 = if local { 1.0 } else { 0.0 };
        let mut out = 0f32;
        // SAFETY: a 4-byte device buffer; synchronous copies around the collective.
        unsafe {
            ck(
                sys::cuMemcpyHtoD_v2(self.flag, &v as *const f32 as *const c_void, 4),
                "cuMemcpyHtoD (stop flag)",
            )?;
            n.all_reduce(
                self.flag as *const c_void,
                self.flag as *mut c_void,
                1,
                ncclDataType_t::ncclFloat32,
                ncclRedOp_t::ncclMax,
                c,
                self.streams[0] as _,
            )?;
            ck(
                sys::cuStreamSynchronize(self.streams[0]),
                "cuStreamSynchronize (stop flag)",
            )?;
            ck(
                sys::cuMemcpyDtoH_v2(&mut out as *mut f32 as *mut c_void, self.flag, 4),
                "cuMemcpyDtoH (stop flag)",
            )?;
        }
        Ok(out > 0.5)
    }
}

/// An n×n×n GEMM in the run's dtype; inputs are filled by the caller.
fn gemm(n: u64, dtype: Dtype) -> Result<(Lt, LtGemm), String> {
    let dtype = match dtype {
        Dtype::F32 => GemmDtype::F32,
        Dtype::Bf16 => GemmDtype::Bf16,
        Dtype::F16 => GemmDtype::F16,
    };
    let lt = Lt::new().map_err(|e| e.to_string())?;
    let g = LtGemm::new(
        &lt,
        GemmShape {
            m: n,
            n,
            k: n,
            dtype,
        },
        1,
        1,
        |_, _, _, _| Ok(()),
    )
    .map_err(|e| e.to_string())?;
    Ok((lt, g))
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // SAFETY: teardown after a synchronize; errors are ignored at exit.
        unsafe {
            let _ = sys::cuCtxSynchronize();
            if let (Some(n), false) = (&self.nccl, self.comm.is_null()) {
                n.destroy(self.comm);
            }
            if let Some((lt, g)) = self.gemm.take() {
                g.free(&lt);
            }
        }
    }
}
