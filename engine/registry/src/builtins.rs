//! The built-in mitigations and environments, as one data table.
//!
//! Policy (AORTA §4.2): only variables consumed by a runtime or library belong here; flags
//! that a workload reads itself go to sidecars. A mitigation is a pure env-var bundle, so
//! there are no "torch flag" mitigations. The AMD table reproduces AORTA 0.2.1's 22 entries
//! exactly (names and bundles); the NVIDIA/CUDA table adds the counterparts AORTA lacks
//! (NCCL variables are also read by RCCL, so several apply to both vendors).

/// One built-in mitigation: a name, its env bundle (sorted by key) and what it tests.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinMitigation {
    pub name: &'static str,
    pub env: &'static [(&'static str, &'static str)],
    pub description: &'static str,
}

const fn m(
    name: &'static str,
    env: &'static [(&'static str, &'static str)],
    description: &'static str,
) -> BuiltinMitigation {
    BuiltinMitigation {
        name,
        env,
        description,
    }
}

/// AORTA 0.2.1's 22 built-in mitigations, in the spec's order.
#[rustfmt::skip]
pub const AORTA_MITIGATIONS: &[BuiltinMitigation] = &[
    m("none", &[], "No overrides: the control cell every other mitigation is compared against"),
    m("tf32_off", &[("DISABLE_TF32", "1")],
      "Disables TF32 in hipBLASLt (DISABLE_TF32=1): tests whether reduced-precision matmul causes the symptom"),
    m("xnack", &[("HSA_XNACK", "1")],
      "Enables XNACK page-fault replay (HSA_XNACK=1): tests whether GPU faults on migratable/unified memory cause the symptom"),
    m("gpu_max_hw_queues_2", &[("GPU_MAX_HW_QUEUES", "2")],
      "Limits HIP to 2 hardware queues per device (GPU_MAX_HW_QUEUES=2): tests whether cross-queue concurrency causes the symptom"),
    m("debug_hip_dynamic_queues_1", &[("DEBUG_HIP_DYNAMIC_QUEUES", "1")],
      "Selects HIP dynamic queue assignment mode 1 (DEBUG_HIP_DYNAMIC_QUEUES=1): tests whether stream-to-queue mapping causes the symptom"),
    m("debug_hip_dynamic_queues_2", &[("DEBUG_HIP_DYNAMIC_QUEUES", "2")],
      "Selects HIP dynamic queue assignment mode 2 (DEBUG_HIP_DYNAMIC_QUEUES=2): tests whether stream-to-queue mapping causes the symptom"),
    m("roc_aql_queue_size_1024", &[("ROC_AQL_QUEUE_SIZE", "1024")],
      "Shrinks each ROCr AQL queue to 1024 packets (ROC_AQL_QUEUE_SIZE=1024): tests whether queue depth or packet backlog causes the symptom"),
    m("hsa_no_sdma", &[("HSA_ENABLE_SDMA", "0")],
      "Disables the SDMA copy engines in favour of blit kernels (HSA_ENABLE_SDMA=0): tests whether DMA-engine copies cause the symptom"),
    m("hsa_no_scratch_reclaim", &[("HSA_NO_SCRATCH_RECLAIM", "1")],
      "Keeps scratch memory permanently assigned to queues (HSA_NO_SCRATCH_RECLAIM=1): tests whether scratch reclaim causes the symptom"),
    m("hsa_disable_cache", &[("HSA_DISABLE_CACHE", "1")],
      "Maps GPU memory uncached (HSA_DISABLE_CACHE=1): tests whether GPU cache coherence causes the symptom (slow)"),
    m("hsa_enable_cache", &[("HSA_DISABLE_CACHE", "0")],
      "Pins GPU memory caching on (HSA_DISABLE_CACHE=0): the explicit counterpart of hsa_disable_cache"),
    m("roc_signal_pool_16k", &[("ROC_SIGNAL_POOL_SIZE", "16384")],
      "Grows the HIP signal pool to 16384 (ROC_SIGNAL_POOL_SIZE=16384): tests whether signal exhaustion or reuse causes the symptom"),
    m("gpu_force_blit_copy_128", &[("GPU_FORCE_BLIT_COPY_SIZE", "128")],
      "Forces blit-kernel copies for small transfers (GPU_FORCE_BLIT_COPY_SIZE=128): tests whether the copy path causes the symptom"),
    m("debug_clr_no_batch_cpu_sync", &[("DEBUG_CLR_BATCH_CPU_SYNC_SIZE", "0")],
      "Stops the HIP runtime batching CPU-side syncs (DEBUG_CLR_BATCH_CPU_SYNC_SIZE=0): tests whether deferred host syncs cause the symptom"),
    m("nccl_launch_order_implicit", &[("NCCL_LAUNCH_ORDER_IMPLICIT", "1")],
      "Launches collectives in host submission order (NCCL_LAUNCH_ORDER_IMPLICIT=1): tests whether cross-rank launch reordering causes hangs"),
    m("rccl_gfx942_cheap_fence_off", &[("RCCL_GFX942_CHEAP_FENCE_OFF", "1")],
      "Turns off RCCL's cheap memory fence on gfx942 (RCCL_GFX942_CHEAP_FENCE_OFF=1): tests whether a weak fence corrupts collectives"),
    m("pytorch_no_cuda_memory_caching", &[("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")],
      "Disables PyTorch's caching allocator (PYTORCH_NO_CUDA_MEMORY_CACHING=1): tests whether allocator reuse hides or causes memory errors"),
    m("pytorch_alloc_expandable_segments", &[("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")],
      "Uses expandable allocator segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): tests whether fragmentation causes the OOM"),
    m("hip_launch_blocking", &[("HIP_LAUNCH_BLOCKING", "1")],
      "Makes every HIP launch synchronous (HIP_LAUNCH_BLOCKING=1): tests for asynchronous races and pins errors to the failing call"),
    m("amd_log_level_4", &[("AMD_LOG_LEVEL", "4")],
      "Turns on verbose HIP runtime logging (AMD_LOG_LEVEL=4): diagnostic, records API calls and errors around the failure"),
    m("fa_prefer_ck", &[("TORCH_ROCM_FA_PREFER_CK", "1")],
      "Prefers the Composable Kernel flash-attention backend (TORCH_ROCM_FA_PREFER_CK=1): tests whether the attention backend causes the symptom"),
    m("fa_prefer_aotriton", &[("TORCH_ROCM_FA_PREFER_CK", "0")],
      "Prefers the AOTriton flash-attention backend (TORCH_ROCM_FA_PREFER_CK=0): tests whether the attention backend causes the symptom"),
];

/// NVIDIA/CUDA (and NCCL/PyTorch-distributed) mitigations that AORTA 0.2.1 lacks.
#[rustfmt::skip]
pub const CUDA_MITIGATIONS: &[BuiltinMitigation] = &[
    m("cuda_launch_blocking", &[("CUDA_LAUNCH_BLOCKING", "1")],
      "Makes every CUDA launch synchronous (CUDA_LAUNCH_BLOCKING=1): tests for asynchronous races and pins errors to the failing call"),
    m("cuda_device_max_connections_1", &[("CUDA_DEVICE_MAX_CONNECTIONS", "1")],
      "Funnels all streams into one hardware work queue (CUDA_DEVICE_MAX_CONNECTIONS=1): tests whether cross-stream concurrency causes the symptom"),
    m("cuda_device_max_connections_32", &[("CUDA_DEVICE_MAX_CONNECTIONS", "32")],
      "Allows the maximum 32 hardware work queues (CUDA_DEVICE_MAX_CONNECTIONS=32): tests whether false stream serialisation causes the symptom"),
    m("cuda_module_loading_eager", &[("CUDA_MODULE_LOADING", "EAGER")],
      "Loads all CUDA kernels at context creation (CUDA_MODULE_LOADING=EAGER): tests whether lazy module loading causes stalls or deadlocks"),
    m("nvidia_tf32_override_0", &[("NVIDIA_TF32_OVERRIDE", "0")],
      "Forces TF32 off in cuBLAS/cuDNN whatever the framework asks (NVIDIA_TF32_OVERRIDE=0): tests whether reduced-precision matmul causes the symptom"),
    m("cublas_workspace_4096_8", &[("CUBLAS_WORKSPACE_CONFIG", ":4096:8")],
      "Fixes the cuBLAS workspace layout (CUBLAS_WORKSPACE_CONFIG=:4096:8): makes GEMMs reproducible, tests whether nondeterministic reductions cause the symptom"),
    m("nccl_algo_ring", &[("NCCL_ALGO", "Ring")],
      "Forces the ring collective algorithm (NCCL_ALGO=Ring): tests whether the tuner's algorithm choice causes the symptom"),
    m("nccl_algo_tree", &[("NCCL_ALGO", "Tree")],
      "Forces the tree collective algorithm (NCCL_ALGO=Tree): tests whether the tuner's algorithm choice causes the symptom"),
    m("nccl_proto_simple", &[("NCCL_PROTO", "Simple")],
      "Forces the Simple protocol, no LL/LL128 (NCCL_PROTO=Simple): tests whether low-latency protocols cause corruption or hangs"),
    m("nccl_p2p_disable", &[("NCCL_P2P_DISABLE", "1")],
      "Disables direct GPU peer-to-peer transport (NCCL_P2P_DISABLE=1): tests whether the P2P/NVLink path causes the symptom"),
    m("nccl_nvls_disable", &[("NCCL_NVLS_ENABLE", "0")],
      "Disables NVLink SHARP collectives (NCCL_NVLS_ENABLE=0): tests whether NVSwitch in-network reduction causes the symptom"),
    m("nccl_cumem_disable", &[("NCCL_CUMEM_ENABLE", "0")],
      "Makes NCCL use legacy allocations instead of cuMem (NCCL_CUMEM_ENABLE=0): tests whether cuMem-backed buffers cause the symptom"),
    m("nccl_debug_info", &[("NCCL_DEBUG", "INFO")],
      "Turns on NCCL/RCCL INFO logging (NCCL_DEBUG=INFO): diagnostic, records topology, transports and the failing collective"),
    m("torch_nccl_blocking_wait", &[("TORCH_NCCL_BLOCKING_WAIT", "1")],
      "Makes PyTorch wait on collectives synchronously (TORCH_NCCL_BLOCKING_WAIT=1): turns silent collective hangs into timeout errors"),
    m("torch_nccl_flight_recorder", &[("TORCH_NCCL_DUMP_ON_TIMEOUT", "1"), ("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")],
      "Enables PyTorch's NCCL flight recorder and dumps it on timeout: diagnostic, shows which collective each rank was stuck in"),
];

/// Built-in environments: both run in the current process with no overrides; `default` is
/// reserved as a site-configurable alias (AORTA §4.3).
pub const ENVIRONMENTS: &[(&str, &str)] = &[
    (
        "default",
        "Current process, no overrides (reserved as a site-configurable alias of local)",
    ),
    (
        "local",
        "Current process, no overrides: runs on this host with its own toolchain",
    ),
];

/// Every built-in mitigation, AMD first.
pub fn mitigations() -> impl Iterator<Item = &'static BuiltinMitigation> {
    AORTA_MITIGATIONS.iter().chain(CUDA_MITIGATIONS)
}
