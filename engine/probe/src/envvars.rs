//! `env_vars`: which variables the snapshot records.
//!
//! Three sources, merged: AORTA 0.2.1's canonical 58 (an explicit allow-list, spec §7.4), the
//! NVIDIA/PyTorch ones it never had, and every variable a registered mitigation sets (the CLI
//! passes `Registry::mitigation_env_vars()`; AORTA missed 11 of its own, §12.8.1). Those names
//! are always present (`null` when unset). On top, any *set* variable under a tracked prefix
//! (`NCCL_*`, `CUDA_*`, …) is recorded, so an exported knob nobody listed still changes the key.

use std::collections::{BTreeMap, BTreeSet};

/// AORTA 0.2.1's list, in its order (spec §7.4). Pinned by a test.
pub const AORTA_ENV_VARS: [&str; 58] = [
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HSA_XNACK",
    "HSA_KERNARG_POOL_SIZE",
    "HSA_NO_SCRATCH_RECLAIM",
    "HSA_OVERRIDE_GFX_VERSION",
    "GPU_MAX_HW_QUEUES",
    "AMDGCN_USE_BUFFER_OPS",
    "DISABLE_TF32",
    "PYTORCH_ROCM_ARCH",
    "HIP_LAUNCH_BLOCKING",
    "NCCL_MAX_NCHANNELS",
    "NCCL_P2P_LEVEL",
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "RCCL_MSCCL_ENABLE",
    "RCCL_AINIC_ROCE",
    "NCCL_NET_PLUGIN",
    "NCCL_NET",
    "RCCL_CTS_OFFLOAD_ENABLED",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_ROCE_VERSION_NUM",
    "NCCL_IB_TC",
    "NCCL_IB_FIFO_TC",
    "NCCL_GDR_FLUSH_DISABLE",
    "NCCL_GDRCOPY_ENABLE",
    "NCCL_IB_USE_INLINE",
    "NCCL_IB_PCI_RELAXED_ORDERING",
    "NCCL_IB_QPS_PER_CONNECTION",
    "NCCL_PXN_DISABLE",
    "NCCL_IGNORE_CPU_AFFINITY",
    "NCCL_NET_OPTIONAL_RECV_COMPLETION",
    "RCCL_GDR_FLUSH_GPU_MEM_NO_RELAXED_ORDERING",
    "NCCL_IB_TIMEOUT",
    "NCCL_IB_SL",
    "NCCL_IB_SPLIT_DATA_ON_QPS",
    "NCCL_DMABUF_ENABLE",
    "NCCL_CUMEM_ENABLE",
    "IONIC_LOCKFREE",
    "RCCL_DISABLE_RAIL_TREES",
    "RCCL_LL128_FORCE_ENABLE",
    "NCCL_WORK_FIFO_BYTES",
    "RCCL_GFX9_CHEAP_FENCE_OFF",
    "FBGEMM_NO_JK",
    "FBGEMM_TBE_V2",
    "FBGEMM_TBE_ROCM_HIP_BACKWARD_KERNEL",
    "FBGEMM_BOUNDS_CHECK_INDICES_V2",
    "MIOPEN_SYSTEM_DB_PATH",
    "MIOPEN_USER_DB_PATH",
    "MIOPEN_DEBUG_DISABLE_FIND_DB",
    "MIOPEN_FIND_MODE",
    "TORCH_ROCM_FA_PREFER_CK",
    "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL",
    "TORCH_BLAS_PREFER_HIPBLASLT",
    "TORCH_HIPBLASLT_TUNING_FILE",
    "TORCH_HIPBLASLT_TUNING_OVERRIDE_FILE",
    "TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE",
    "PYTORCH_CUDA_ALLOC_CONF",
];

/// NVIDIA driver/runtime/library and PyTorch variables that change what a CUDA process does.
pub const NVIDIA_ENV_VARS: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING",
    "CUDA_CACHE_DISABLE",
    "CUDA_FORCE_PTX_JIT",
    "CUDA_DISABLE_PTX_JIT",
    "CUDA_AUTO_BOOST",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "NVIDIA_TF32_OVERRIDE",
    "CUBLAS_WORKSPACE_CONFIG",
    "CUBLASLT_WORKSPACE_SIZE",
    "CUDNN_LOGLEVEL_DBG",
    "NCCL_DEBUG",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_NVLS_ENABLE",
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "NCCL_MIN_NCHANNELS",
    "NCCL_BUFFSIZE",
    "NCCL_NTHREADS",
    "NCCL_CROSS_NIC",
    "NCCL_COLLNET_ENABLE",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_NCCL_BLOCKING_WAIT",
    "TORCH_NCCL_AVOID_RECORD_STREAMS",
    "TORCH_NCCL_USE_COMM_NONBLOCKING",
    "TORCH_NCCL_HIGH_PRIORITY",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "TORCH_BLAS_PREFER_CUBLASLT",
    "TORCH_CUDNN_V8_API_LRU_CACHE_LIMIT",
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_HIP_ALLOC_CONF",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "PYTORCH_NVML_BASED_CUDA_CHECK",
    "PYTORCH_TUNABLEOP_ENABLED",
    "OMP_NUM_THREADS",
];

/// A set variable whose name starts with one of these is recorded even if no list names it.
pub const TRACKED_PREFIXES: &[&str] = &[
    "CUDA_",
    "CUBLAS_",
    "CUBLASLT_",
    "CUDNN_",
    "NCCL_",
    "NVIDIA_TF32",
    "TORCH_NCCL_",
    "TORCH_CUDNN_",
    "TORCH_BLAS_",
    "PYTORCH_",
    "HIP_",
    "HSA_",
    "RCCL_",
    "MIOPEN_",
    "ROCBLAS_",
    "HIPBLASLT_",
    // AORTA 0.3.0's Tensile / origami solution selectors (env.json 1.15): they pick kernels.
    "TENSILE_",
    "ANALYTICAL_GEMM_",
];

/// Every name that is always present in `env_vars`: AORTA's, NVIDIA's and `extra`.
pub fn canonical_names(extra: &BTreeSet<String>) -> BTreeSet<String> {
    AORTA_ENV_VARS
        .iter()
        .chain(NVIDIA_ENV_VARS)
        .map(|s| s.to_string())
        .chain(extra.iter().cloned())
        .collect()
}

/// The `env_vars` section for `env`.
pub(crate) fn collect(
    env: &BTreeMap<String, String>,
    extra: &BTreeSet<String>,
) -> BTreeMap<String, Option<String>> {
    let mut out: BTreeMap<String, Option<String>> = canonical_names(extra)
        .into_iter()
        .map(|n| (n.clone(), env.get(&n).cloned()))
        .collect();
    for (k, v) in env {
        if TRACKED_PREFIXES.iter().any(|p| k.starts_with(p)) {
            out.insert(k.clone(), Some(v.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aorta_list_is_pinned() {
        assert_eq!(AORTA_ENV_VARS.len(), 58);
        let unique: BTreeSet<_> = AORTA_ENV_VARS.iter().collect();
        assert_eq!(unique.len(), 58);
        assert!(
            !AORTA_ENV_VARS.contains(&"AMP_DTYPE"),
            "workload variables are not environment facts"
        );
    }

    #[test]
    fn unset_is_null_and_prefixes_catch_the_rest() {
        let env: BTreeMap<String, String> = [
            ("NCCL_ALGO_X", "ring"),
            ("TENSILE_SOLUTION_SELECTION_METHOD", "2"),
            ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
            ("HOME", "/root"),
            ("AMP_DTYPE", "bf16"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let extra: BTreeSet<String> = ["AMP_DTYPE".to_string()].into();
        let v = collect(&env, &extra);
        assert_eq!(v["CUDA_DEVICE_MAX_CONNECTIONS"].as_deref(), Some("1"));
        assert_eq!(v["NCCL_ALGO_X"].as_deref(), Some("ring"));
        assert_eq!(v["TENSILE_SOLUTION_SELECTION_METHOD"].as_deref(), Some("2"));
        assert!(
            !v.contains_key("TENSILE_DB"),
            "a prefix records only what is set"
        );
        assert_eq!(v["HIP_VISIBLE_DEVICES"], None);
        assert_eq!(
            v["AMP_DTYPE"].as_deref(),
            Some("bf16"),
            "a mitigation's variable is captured when the CLI passes it"
        );
        assert!(!v.contains_key("HOME"));
    }
}
