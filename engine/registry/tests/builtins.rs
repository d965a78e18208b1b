//! The built-in table: AORTA's 22 exactly, the NVIDIA additions, and their descriptions.

use aorta_registry::{builtins, is_posix_env_name, Registry, Source};
use std::collections::BTreeMap;

/// AORTA 0.2.1 spec §4.2, copied independently of `builtins.rs` so a slip in either shows.
const AORTA_22: &[(&str, &[(&str, &str)])] = &[
    ("none", &[]),
    ("tf32_off", &[("DISABLE_TF32", "1")]),
    ("xnack", &[("HSA_XNACK", "1")]),
    ("gpu_max_hw_queues_2", &[("GPU_MAX_HW_QUEUES", "2")]),
    (
        "debug_hip_dynamic_queues_1",
        &[("DEBUG_HIP_DYNAMIC_QUEUES", "1")],
    ),
    (
        "debug_hip_dynamic_queues_2",
        &[("DEBUG_HIP_DYNAMIC_QUEUES", "2")],
    ),
    ("roc_aql_queue_size_1024", &[("ROC_AQL_QUEUE_SIZE", "1024")]),
    ("hsa_no_sdma", &[("HSA_ENABLE_SDMA", "0")]),
    ("hsa_no_scratch_reclaim", &[("HSA_NO_SCRATCH_RECLAIM", "1")]),
    ("hsa_disable_cache", &[("HSA_DISABLE_CACHE", "1")]),
    ("hsa_enable_cache", &[("HSA_DISABLE_CACHE", "0")]),
    ("roc_signal_pool_16k", &[("ROC_SIGNAL_POOL_SIZE", "16384")]),
    (
        "gpu_force_blit_copy_128",
        &[("GPU_FORCE_BLIT_COPY_SIZE", "128")],
    ),
    (
        "debug_clr_no_batch_cpu_sync",
        &[("DEBUG_CLR_BATCH_CPU_SYNC_SIZE", "0")],
    ),
    (
        "nccl_launch_order_implicit",
        &[("NCCL_LAUNCH_ORDER_IMPLICIT", "1")],
    ),
    (
        "rccl_gfx942_cheap_fence_off",
        &[("RCCL_GFX942_CHEAP_FENCE_OFF", "1")],
    ),
    (
        "pytorch_no_cuda_memory_caching",
        &[("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")],
    ),
    (
        "pytorch_alloc_expandable_segments",
        &[("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")],
    ),
    ("hip_launch_blocking", &[("HIP_LAUNCH_BLOCKING", "1")]),
    ("amd_log_level_4", &[("AMD_LOG_LEVEL", "4")]),
    ("fa_prefer_ck", &[("TORCH_ROCM_FA_PREFER_CK", "1")]),
    ("fa_prefer_aotriton", &[("TORCH_ROCM_FA_PREFER_CK", "0")]),
];

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn aorta_builtins_are_exactly_the_spec_table() {
    assert_eq!(builtins::AORTA_MITIGATIONS.len(), 22);
    let reg = Registry::builtin();
    for (i, (name, bundle)) in AORTA_22.iter().enumerate() {
        assert_eq!(builtins::AORTA_MITIGATIONS[i].name, *name, "spec order");
        let m = reg
            .mitigation(name)
            .unwrap_or_else(|| panic!("missing built-in {name}"));
        assert_eq!(m.env, env(bundle), "{name}");
        assert_eq!(m.source, Source::BuiltIn);
        assert_eq!(m.source.to_string(), "aorta");
    }
}

#[test]
fn nvidia_builtins_are_present() {
    let expected: &[(&str, &[(&str, &str)])] = &[
        ("cuda_launch_blocking", &[("CUDA_LAUNCH_BLOCKING", "1")]),
        (
            "cuda_device_max_connections_1",
            &[("CUDA_DEVICE_MAX_CONNECTIONS", "1")],
        ),
        (
            "cuda_device_max_connections_32",
            &[("CUDA_DEVICE_MAX_CONNECTIONS", "32")],
        ),
        (
            "cuda_module_loading_eager",
            &[("CUDA_MODULE_LOADING", "EAGER")],
        ),
        ("nvidia_tf32_override_0", &[("NVIDIA_TF32_OVERRIDE", "0")]),
        (
            "cublas_workspace_4096_8",
            &[("CUBLAS_WORKSPACE_CONFIG", ":4096:8")],
        ),
        ("nccl_algo_ring", &[("NCCL_ALGO", "Ring")]),
        ("nccl_algo_tree", &[("NCCL_ALGO", "Tree")]),
        ("nccl_proto_simple", &[("NCCL_PROTO", "Simple")]),
        ("nccl_p2p_disable", &[("NCCL_P2P_DISABLE", "1")]),
        ("nccl_nvls_disable", &[("NCCL_NVLS_ENABLE", "0")]),
        ("nccl_cumem_disable", &[("NCCL_CUMEM_ENABLE", "0")]),
        ("nccl_debug_info", &[("NCCL_DEBUG", "INFO")]),
        (
            "torch_nccl_blocking_wait",
            &[("TORCH_NCCL_BLOCKING_WAIT", "1")],
        ),
        (
            "torch_nccl_flight_recorder",
            &[
                ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1"),
                ("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"),
            ],
        ),
    ];
    assert_eq!(builtins::CUDA_MITIGATIONS.len(), expected.len());
    let reg = Registry::builtin();
    for (name, bundle) in expected {
        assert_eq!(
            reg.mitigation(name).map(|m| &m.env),
            Some(&env(bundle)),
            "{name}"
        );
    }
    assert_eq!(reg.mitigations().count(), 22 + 15);
}

#[test]
fn none_is_empty() {
    assert!(Registry::builtin()
        .mitigation("none")
        .unwrap()
        .env
        .is_empty());
}

#[test]
fn every_builtin_is_well_formed() {
    let mut names: Vec<&str> = builtins::mitigations().map(|b| b.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names.len(),
        builtins::mitigations().count(),
        "duplicate built-in name"
    );
    for b in builtins::mitigations() {
        let d = b.description;
        assert!(!d.trim().is_empty(), "{}: empty description", b.name);
        assert!(
            !d.contains(['\n', '\r']) && d.trim() == d,
            "{}: description must be one trimmed line",
            b.name
        );
        assert!(
            b.env.windows(2).all(|w| w[0].0 < w[1].0),
            "{}: env keys sorted and unique",
            b.name
        );
        for (k, v) in b.env {
            assert!(is_posix_env_name(k) && !v.contains('\0'), "{}: {k}", b.name);
        }
    }
    for (name, d) in builtins::ENVIRONMENTS {
        assert!(!d.is_empty() && !d.contains('\n'), "{name}");
    }
}

#[test]
fn builtin_environments_have_no_overrides() {
    let reg = Registry::builtin();
    let names: Vec<&str> = reg.environments().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["default", "local"]);
    for e in reg.environments() {
        assert_eq!((&e.docker, &e.venv, &e.buck_target), (&None, &None, &None));
        assert_eq!(e.source, Source::BuiltIn);
    }
}

#[test]
fn mitigation_env_vars_cover_every_bundle() {
    let vars = Registry::builtin().mitigation_env_vars();
    // The 11 that AORTA's env probe failed to capture (spec §12.8.1) must be listed.
    for v in [
        "AMD_LOG_LEVEL",
        "DEBUG_CLR_BATCH_CPU_SYNC_SIZE",
        "HSA_DISABLE_CACHE",
        "RCCL_GFX942_CHEAP_FENCE_OFF",
        "ROC_SIGNAL_POOL_SIZE",
        "NCCL_ALGO",
    ] {
        assert!(vars.contains(v), "{v}");
    }
    let total: usize = builtins::mitigations().map(|b| b.env.len()).sum();
    assert!(
        vars.len() < total,
        "shared vars (DEBUG_HIP_DYNAMIC_QUEUES, ...) appear once"
    );
}

#[test]
fn loading_nothing_gives_the_builtins() {
    let reg = Registry::load(None, &[]).unwrap();
    assert_eq!(
        reg.mitigations().count(),
        Registry::builtin().mitigations().count()
    );
    assert!(reg.sidecars().is_empty() && reg.project().is_none());
}

#[test]
fn posix_env_names() {
    for ok in ["A", "_", "a_1", "HSA_XNACK", "_X9"] {
        assert!(is_posix_env_name(ok), "{ok}");
    }
    for bad in ["", "1A", "A=B", "A B", "A-B", "É", "A\0"] {
        assert!(!is_posix_env_name(bad), "{bad:?}");
    }
}
