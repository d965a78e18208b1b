//! The CUDA backend: the driver API through cudarc's `sys`/`result` layers (dynamically loaded,
//! so the binary starts without libcuda), kernels from NVRTC, GEMMs from cuBLASLt.
//! cudarc's safe layer is not used for streams and launches: it records events around buffer
//! uses on multi-stream contexts, and those events would add the very dependencies we measure.

use std::ffi::{c_void, CString};
use std::ptr;

use cudarc::driver::result as dr;
use cudarc::driver::sys;

use super::driver::{ck, describe, dev_alloc, open_device};
use super::kernels;
use super::lt::{Lt, LtGemm};
use super::{
    AlgoInfo, Buf, DeviceInfo, Event, Gemm, GemmShape, Gpu, GpuError, Graph, Kernel, MemKind,
    Priority, Result, Stream, FLAG_SLOTS,
};

const NO_DRIVER: &str = "the CUDA driver library (libcuda.so.1) was not found. aorta-hw-queue \
loads CUDA at run time and needs an NVIDIA GPU with its driver; on a machine without one only \
`list` and `compare` work";

/// Whether libcuda can be loaded (never panics).
pub fn driver_present() -> bool {
    // SAFETY: only tries dlopen on the candidate names.
    unsafe { sys::is_culib_present() }
}

struct BufEntry {
    dptr: sys::CUdeviceptr,
    host: *mut c_void,
    kind: MemKind,
}

const F_SPIN: usize = 0;
const F_SPIN_CLK: usize = 1;
const F_TINY: usize = 2;
const F_EMPTY: usize = 3;
const F_FILL32: usize = 4;
const F_FILL16: usize = 5;

pub struct CudaGpu {
    info: DeviceInfo,
    dev: sys::CUdevice,
    module: sys::CUmodule,
    f: Vec<sys::CUfunction>,
    streams: Vec<sys::CUstream>,
    events: Vec<sys::CUevent>,
    bufs: Vec<BufEntry>,
    stamps: sys::CUdeviceptr,
    stamp_cap: u32,
    flags_host: *mut u64,
    flags_dev: sys::CUdeviceptr,
    lt: Option<Lt>,
    gemms: Vec<LtGemm>,
    graphs: Vec<(sys::CUgraph, sys::CUgraphExec)>,
    clk_per_ns: Option<f64>,
}

fn attr(dev: sys::CUdevice, a: sys::CUdevice_attribute) -> Result<i32> {
    // SAFETY: dev is a valid device ordinal handle.
    unsafe { dr::device::get_attribute(dev, a) }
        .map_err(|e| GpuError::call("cuDeviceGetAttribute", describe(e.0)))
}

impl CudaGpu {
    pub fn new(ordinal: usize) -> Result<Self> {
        use sys::CUdevice_attribute::*;
        if !driver_present() {
            return Err(GpuError::Unavailable(NO_DRIVER.into()));
        }
        // SAFETY: plain driver calls with valid out-pointers, made in order.
        unsafe {
            let (dev, name) = open_device(ordinal)?;
            let mut drv = 0;
            ck(sys::cuDriverGetVersion(&mut drv), "cuDriverGetVersion")?;
            let (mut least, mut greatest) = (0, 0);
            ck(
                sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest),
                "cuCtxGetStreamPriorityRange",
            )?;
            let (major, minor) = (
                attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            );
            let info = DeviceInfo {
                backend: "cuda".into(),
                name,
                compute_capability: format!("{major}.{minor}"),
                sm_count: attr(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
                max_threads_per_sm: attr(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?
                    as u32,
                clock_mhz: (attr(dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? / 1000) as u32,
                copy_engines: attr(dev, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)? as u32,
                driver_version: format!("{}.{}", drv / 1000, (drv % 1000) / 10),
                compiler_version: nvrtc_version()?,
                priority_range: (least, greatest),
                queue_env: Some((
                    "CUDA_DEVICE_MAX_CONNECTIONS".into(),
                    std::env::var("CUDA_DEVICE_MAX_CONNECTIONS")
                        .unwrap_or_else(|_| "unset (8)".into()),
                )),
            };
            let module = compile(kernels::arch_for(major, minor), &info)?;
            let mut f = Vec::new();
            for n in kernels::NAMES {
                let mut func = ptr::null_mut();
                let cname = CString::new(n).expect("kernel name");
                ck(
                    sys::cuModuleGetFunction(&mut func, module, cname.as_ptr()),
                    "cuModuleGetFunction",
                )?;
                f.push(func);
            }
            let mut host = ptr::null_mut();
            let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
            ck(
                sys::cuMemHostAlloc(&mut host, FLAG_SLOTS as usize * 8, flags),
                "cuMemHostAlloc (flags)",
            )?;
            ptr::write_bytes(host as *mut u8, 0, FLAG_SLOTS as usize * 8);
            let mut flags_dev = 0;
            ck(
                sys::cuMemHostGetDevicePointer_v2(&mut flags_dev, host, 0),
                "cuMemHostGetDevicePointer",
            )?;
            let mut gpu = CudaGpu {
                info,
                dev,
                module,
                f,
                streams: Vec::new(),
                events: Vec::new(),
                bufs: Vec::new(),
                stamps: 0,
                stamp_cap: 0,
                flags_host: host as *mut u64,
                flags_dev,
                lt: None,
                gemms: Vec::new(),
                graphs: Vec::new(),
                clk_per_ns: None,
            };
            gpu.reset_stamps(1024)?;
            Ok(gpu)
        }
    }

    fn s(&self, s: Stream) -> sys::CUstream {
        self.streams[s.0]
    }

    fn raw_launch(
        &self,
        f: usize,
        grid: u32,
        block: u32,
        stream: sys::CUstream,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: f is a loaded function and args match its signature (callers below).
        let r = unsafe {
            sys::cuLaunchKernel(
                self.f[f],
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
        };
        ck(r, kernels::NAMES[f])
    }

    fn stamp_ptr(&self, slot: Option<u32>) -> Result<sys::CUdeviceptr> {
        match slot {
            None => Ok(0),
            Some(s) if s < self.stamp_cap => Ok(self.stamps + s as u64 * 16),
            Some(s) => Err(GpuError::call(
                "stamp",
                format!("slot {s} >= {} (reset_stamps first)", self.stamp_cap),
            )),
        }
    }

    /// Fill a device buffer with small pseudo-random values of `dtype`'s width.
    pub(crate) fn fill(
        &self,
        dptr: sys::CUdeviceptr,
        elems: u64,
        half: Option<bool>,
        seed: u32,
    ) -> Result<()> {
        let (mut p, mut n, mut sd) = (dptr, elems, seed);
        let grid = 1024u32;
        match half {
            None => {
                let mut args = [arg(&mut p), arg(&mut n), arg(&mut sd)];
                self.raw_launch(F_FILL32, grid, 256, ptr::null_mut(), &mut args)
            }
            Some(bf16) => {
                let mut b = bf16 as i32;
                let mut args = [arg(&mut p), arg(&mut n), arg(&mut sd), arg(&mut b)];
                self.raw_launch(F_FILL16, grid, 256, ptr::null_mut(), &mut args)
            }
        }
    }

    fn new_event(&mut self, flags: sys::CUevent_flags) -> Result<Event> {
        let e =
            dr::event::create(flags).map_err(|e| GpuError::call("cuEventCreate", describe(e.0)))?;
        self.events.push(e);
        Ok(Event(self.events.len() - 1))
    }
}

fn arg<T>(v: &mut T) -> *mut c_void {
    v as *mut T as *mut c_void
}

fn nvrtc_version() -> Result<String> {
    // SAFETY: only dlopen attempts.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(GpuError::Unavailable(
            "NVRTC (libnvrtc.so.13 or similar) was not found: put the CUDA toolkit's lib64 (e.g. \
             /usr/local/cuda/lib64) on LD_LIBRARY_PATH"
                .into(),
        ));
    }
    let (mut a, mut b) = (0, 0);
    // SAFETY: valid out-pointers.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut a, &mut b) };
    Ok(format!("nvrtc {a}.{b}"))
}

unsafe fn compile(arch: Option<&'static str>, info: &DeviceInfo) -> Result<sys::CUmodule> {
    let opts = cudarc::nvrtc::CompileOptions {
        arch,
        name: Some("hw_queue.cu".into()),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(kernels::SOURCE, opts)
        .map_err(|e| GpuError::call("NVRTC compile", format!("{e:?}")))?;
    let src = CString::new(ptx.to_src()).map_err(|e| GpuError::call("PTX", e.to_string()))?;
    let mut m = ptr::null_mut();
    let r = sys::cuModuleLoadData(&mut m, src.as_ptr() as *const c_void);
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(GpuError::call(
            "cuModuleLoadData",
            format!(
                "{} — driver {} cannot JIT PTX from {}? keep NVRTC no newer than the driver's CUDA",
                describe(r),
                info.driver_version,
                info.compiler_version
            ),
        ));
    }
    Ok(m)
}

impl Gpu for CudaGpu {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn create_stream(&mut self, priority: Priority) -> Result<Stream> {
        let prio = match priority {
            Priority::Normal => 0,
            Priority::High => self.info.priority_range.1,
            Priority::Value(v) => v,
        };
        let mut s = ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        ck(
            // SAFETY: valid out-pointer; current context set in new().
            unsafe { sys::cuStreamCreateWithPriority(&mut s, flags, prio) },
            "cuStreamCreateWithPriority",
        )?;
        self.streams.push(s);
        Ok(Stream(self.streams.len() - 1))
    }

    fn create_event(&mut self) -> Result<Event> {
        self.new_event(sys::CUevent_flags::CU_EVENT_DEFAULT)
    }

    fn create_marker(&mut self) -> Result<Event> {
        self.new_event(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
    }

    fn record(&mut self, event: Event, stream: Option<Stream>) -> Result<()> {
        let s = stream.map_or(ptr::null_mut(), |s| self.s(s));
        // SAFETY: both handles are live.
        ck(
            unsafe { sys::cuEventRecord(self.events[event.0], s) },
            "cuEventRecord",
        )
    }

    fn wait_event(&mut self, stream: Stream, event: Event) -> Result<()> {
        // SAFETY: both handles are live.
        ck(
            unsafe { sys::cuStreamWaitEvent(self.s(stream), self.events[event.0], 0) },
            "cuStreamWaitEvent",
        )
    }

    fn elapsed_ms(&self, from: Event, to: Event) -> Result<f64> {
        // SAFETY: both events are live and recorded.
        unsafe { dr::event::elapsed(self.events[from.0], self.events[to.0]) }
            .map(f64::from)
            .map_err(|e| GpuError::call("cuEventElapsedTime", describe(e.0)))
    }

    fn sync_stream(&self, stream: Stream) -> Result<()> {
        // SAFETY: live stream.
        ck(
            unsafe { sys::cuStreamSynchronize(self.s(stream)) },
            "cuStreamSynchronize",
        )
    }

    fn sync(&self) -> Result<()> {
        // SAFETY: context is current.
        ck(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize")
    }

    fn launch(&mut self, stream: Stream, kernel: &Kernel) -> Result<()> {
        let st = self.s(stream);
        match *kernel {
            Kernel::Spin {
                ns,
                grid,
                block,
                stamp,
            } => {
                let mut sp = self.stamp_ptr(stamp)?;
                match self.clk_per_ns {
                    None => {
                        let mut ns = ns;
                        self.raw_launch(F_SPIN, grid, block, st, &mut [arg(&mut ns), arg(&mut sp)])
                    }
                    Some(rate) => {
                        let mut cycles = (ns as f64 * rate) as i64;
                        self.raw_launch(
                            F_SPIN_CLK,
                            grid,
                            block,
                            st,
                            &mut [arg(&mut cycles), arg(&mut sp)],
                        )
                    }
                }
            }
            Kernel::Tiny {
                data,
                elems,
                stamp,
                flag,
            } => {
                let mut d = self.bufs[data.0].dptr;
                let mut n = elems;
                let mut sp = self.stamp_ptr(stamp)?;
                let (mut fp, mut seq) = match flag {
                    Some((slot, seq)) if slot < FLAG_SLOTS => {
                        (self.flags_dev + slot as u64 * 8, seq)
                    }
                    Some((slot, _)) => {
                        return Err(GpuError::call(
                            "flag",
                            format!("slot {slot} >= {FLAG_SLOTS}"),
                        ))
                    }
                    None => (0, 0),
                };
                if let Some((slot, _)) = flag {
                    // SAFETY: slot < FLAG_SLOTS inside the mapped allocation.
                    unsafe { ptr::write_volatile(self.flags_host.add(slot as usize), 0) };
                }
                let mut args = [
                    arg(&mut d),
                    arg(&mut n),
                    arg(&mut sp),
                    arg(&mut fp),
                    arg(&mut seq),
                ];
                self.raw_launch(F_TINY, 1, 256, st, &mut args)
            }
            Kernel::Empty => self.raw_launch(F_EMPTY, 1, 1, st, &mut []),
        }
    }

    fn reset_stamps(&mut self, slots: u32) -> Result<()> {
        if slots > self.stamp_cap {
            if self.stamps != 0 {
                self.sync()?;
                // SAFETY: allocated by us, nothing in flight uses it after sync.
                ck(unsafe { sys::cuMemFree_v2(self.stamps) }, "cuMemFree")?;
            }
            let cap = slots.next_power_of_two().max(1024);
            self.stamps = dev_alloc(cap as usize * 16, "cuMemAlloc (stamps)")?;
            self.stamp_cap = cap;
        }
        let init: Vec<u64> = (0..slots).flat_map(|_| [u64::MAX, 0]).collect();
        // SAFETY: init fits in the allocation.
        ck(
            unsafe {
                sys::cuMemcpyHtoD_v2(self.stamps, init.as_ptr() as *const c_void, init.len() * 8)
            },
            "cuMemcpyHtoD (stamps)",
        )
    }

    fn read_stamps(&mut self, slots: u32) -> Result<Vec<(u64, u64)>> {
        let slots = slots.min(self.stamp_cap);
        let mut raw = vec![0u64; slots as usize * 2];
        ck(
            // SAFETY: raw holds exactly the copied bytes.
            unsafe {
                sys::cuMemcpyDtoH_v2(raw.as_mut_ptr() as *mut c_void, self.stamps, raw.len() * 8)
            },
            "cuMemcpyDtoH (stamps)",
        )?;
        Ok(raw.chunks(2).map(|c| (c[0], c[1])).collect())
    }

    fn flag(&self, slot: u32) -> u64 {
        assert!(slot < FLAG_SLOTS);
        // SAFETY: in bounds of the mapped allocation; the GPU writes it, hence volatile.
        unsafe { ptr::read_volatile(self.flags_host.add(slot as usize)) }
    }

    fn alloc(&mut self, bytes: usize, kind: MemKind) -> Result<Buf> {
        let entry = match kind {
            MemKind::Device => {
                let dptr = dev_alloc(bytes, "cuMemAlloc")?;
                // SAFETY: fresh allocation of `bytes`.
                ck(unsafe { sys::cuMemsetD8_v2(dptr, 0, bytes) }, "cuMemsetD8")?;
                BufEntry {
                    dptr,
                    host: ptr::null_mut(),
                    kind,
                }
            }
            MemKind::PinnedHost => {
                let mut host = ptr::null_mut();
                ck(
                    // SAFETY: valid out-pointer.
                    unsafe {
                        sys::cuMemHostAlloc(&mut host, bytes.max(1), sys::CU_MEMHOSTALLOC_PORTABLE)
                    },
                    "cuMemHostAlloc",
                )?;
                // SAFETY: fresh host allocation of `bytes`.
                unsafe { ptr::write_bytes(host as *mut u8, 1, bytes) };
                BufEntry {
                    dptr: 0,
                    host,
                    kind,
                }
            }
        };
        self.bufs.push(entry);
        Ok(Buf(self.bufs.len() - 1))
    }

    fn copy(&mut self, stream: Stream, dst: Buf, src: Buf, bytes: usize) -> Result<()> {
        let (d, s, st) = (&self.bufs[dst.0], &self.bufs[src.0], self.s(stream));
        // SAFETY: buffers are live and at least `bytes` long (caller's contract).
        let r = unsafe {
            match (d.kind, s.kind) {
                (MemKind::Device, MemKind::PinnedHost) => {
                    sys::cuMemcpyHtoDAsync_v2(d.dptr, s.host, bytes, st)
                }
                (MemKind::PinnedHost, MemKind::Device) => {
                    sys::cuMemcpyDtoHAsync_v2(d.host, s.dptr, bytes, st)
                }
                (MemKind::Device, MemKind::Device) => {
                    sys::cuMemcpyDtoDAsync_v2(d.dptr, s.dptr, bytes, st)
                }
                (MemKind::PinnedHost, MemKind::PinnedHost) => sys::cuMemcpyAsync(
                    d.host as sys::CUdeviceptr,
                    s.host as sys::CUdeviceptr,
                    bytes,
                    st,
                ),
            }
        };
        ck(r, "cuMemcpyAsync")
    }

    fn gemm_plan(&mut self, shape: GemmShape, outputs: u32, candidates: u32) -> Result<Gemm> {
        if self.lt.is_none() {
            self.lt = Some(Lt::new()?);
        }
        let lt = self.lt.as_ref().expect("lt");
        let g = LtGemm::new(
            lt,
            shape,
            outputs.max(1),
            candidates.max(1),
            |p, n, half, seed| self.fill(p, n, half, seed),
        )?;
        self.sync()?;
        self.gemms.push(g);
        Ok(Gemm(self.gemms.len() - 1))
    }

    fn gemm_algos(&self, gemm: Gemm) -> Vec<AlgoInfo> {
        self.gemms[gemm.0].algos()
    }

    fn gemm_select(&mut self, gemm: Gemm, algo: usize) {
        self.gemms[gemm.0].selected = algo;
    }

    fn gemm(&mut self, gemm: Gemm, stream: Stream, output: u32) -> Result<()> {
        let lt = self.lt.as_ref().expect("gemm_plan creates the handle");
        self.gemms[gemm.0].run(lt, self.streams[stream.0], output as usize)
    }

    fn begin_capture(&mut self, stream: Stream) -> Result<()> {
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: live stream.
        ck(
            unsafe { sys::cuStreamBeginCapture_v2(self.s(stream), mode) },
            "cuStreamBeginCapture",
        )
    }

    fn end_capture(&mut self, stream: Stream) -> Result<Graph> {
        let mut g = ptr::null_mut();
        let mut exec = ptr::null_mut();
        // SAFETY: the stream is capturing; out-pointers valid.
        unsafe {
            ck(
                sys::cuStreamEndCapture(self.s(stream), &mut g),
                "cuStreamEndCapture",
            )?;
            ck(
                sys::cuGraphInstantiateWithFlags(&mut exec, g, 0),
                "cuGraphInstantiate",
            )?;
            ck(sys::cuGraphUpload(exec, self.s(stream)), "cuGraphUpload")?;
        }
        self.graphs.push((g, exec));
        Ok(Graph(self.graphs.len() - 1))
    }

    fn launch_graph(&mut self, graph: Graph, stream: Stream) -> Result<()> {
        // SAFETY: live graph exec and stream.
        ck(
            unsafe { sys::cuGraphLaunch(self.graphs[graph.0].1, self.s(stream)) },
            "cuGraphLaunch",
        )
    }

    fn spin_blocks_per_sm(&self, block: u32) -> Result<u32> {
        let mut n = 0;
        ck(
            // SAFETY: valid function and out-pointer.
            unsafe {
                sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                    &mut n,
                    self.f[F_SPIN],
                    block as i32,
                    0,
                )
            },
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        )?;
        Ok(n.max(1) as u32)
    }

    fn use_clock64(&mut self, on: bool) -> Result<Option<f64>> {
        if !on {
            self.clk_per_ns = None;
            return Ok(None);
        }
        // Calibrate: spin a known number of cycles and time it with globaltimer.
        let cycles: i64 = 20_000_000;
        self.reset_stamps(1)?;
        let (mut c, mut sp) = (cycles, self.stamps);
        self.raw_launch(
            F_SPIN_CLK,
            1,
            32,
            ptr::null_mut(),
            &mut [arg(&mut c), arg(&mut sp)],
        )?;
        self.sync()?;
        let (t0, t1) = self.read_stamps(1)?[0];
        let rate = cycles as f64 / (t1.saturating_sub(t0).max(1)) as f64;
        self.clk_per_ns = Some(rate);
        Ok(Some(rate))
    }
}

impl Drop for CudaGpu {
    fn drop(&mut self) {
        // SAFETY: everything below was created by this object; errors at teardown are ignored.
        unsafe {
            let _ = sys::cuCtxSynchronize();
            for (g, e) in self.graphs.drain(..) {
                let _ = sys::cuGraphExecDestroy(e);
                let _ = sys::cuGraphDestroy(g);
            }
            if let Some(lt) = &self.lt {
                for g in self.gemms.drain(..) {
                    g.free(lt);
                }
            }
            self.lt = None;
            for e in self.events.drain(..) {
                let _ = sys::cuEventDestroy_v2(e);
            }
            for s in self.streams.drain(..) {
                let _ = sys::cuStreamDestroy_v2(s);
            }
            for b in self.bufs.drain(..) {
                match b.kind {
                    MemKind::Device => {
                        let _ = sys::cuMemFree_v2(b.dptr);
                    }
                    MemKind::PinnedHost => {
                        let _ = sys::cuMemFreeHost(b.host);
                    }
                }
            }
            if self.stamps != 0 {
                let _ = sys::cuMemFree_v2(self.stamps);
            }
            let _ = sys::cuMemFreeHost(self.flags_host as *mut c_void);
            let _ = sys::cuModuleUnload(self.module);
            let _ = sys::cuDevicePrimaryCtxRelease_v2(self.dev);
        }
    }
}
