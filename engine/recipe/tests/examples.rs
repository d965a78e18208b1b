//! Every recipe shipped in recipes/ loads, with the cell names and env vars AORTA would give.
use aorta_recipe::{load_recipe, FlagRecipe, Mode};
use aorta_registry::Registry;
use std::path::PathBuf;

fn recipes_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../recipes")
}

fn load(name: &str) -> aorta_recipe::Recipe {
    load_recipe(&recipes_dir().join(name), &[])
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .recipe
}

#[test]
fn every_shipped_recipe_loads() {
    let mut n = 0;
    for entry in std::fs::read_dir(recipes_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            load_recipe(&path, &[]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            n += 1;
        }
    }
    assert!(n >= 15, "expected the AORTA example ports, found {n}");
}

/// The recipes the GPU runs use (bench/device/, docs/benchmarks.md) load too; the torch
/// workload's profiler recipe profiles both cells.
#[test]
fn the_device_bench_recipes_load() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/device");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            load_recipe(&path, &[]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            n += 1;
        }
    }
    assert!(n >= 6, "found {n}");
    let r = load_recipe(&dir.join("training-torchprof.yaml"), &[])
        .unwrap()
        .recipe;
    assert_eq!(r.mode, Mode::Triage);
    for c in &r.cells {
        assert_eq!(
            c.effective_collect(&r).names(),
            ["torch_profiler"],
            "{}",
            c.name
        );
    }
}

fn names(r: &aorta_recipe::Recipe) -> Vec<&str> {
    r.cells.iter().map(|c| c.name.as_str()).collect()
}

#[test]
fn fsdp_smoke_cells_and_env() {
    let r = load("example-fsdp-smoke.yaml");
    assert_eq!(
        names(&r),
        ["baseline-local", "tf32_off-local", "xnack-local"]
    );
    assert_eq!(r.ticket.as_deref(), Some("EXAMPLE-151"));
    assert_eq!(r.confound.resolved_baseline, "baseline-local");
    assert_eq!(
        r.cells[1].resolved_env.iter().collect::<Vec<_>>(),
        [(&"DISABLE_TF32".to_string(), &"1".to_string())]
    );
    assert_eq!(r.cells[2].resolved_env["HSA_XNACK"], "1");
}

#[test]
fn probe_templates_cells_and_redaction() {
    for v in ["bash", "buck2", "torchrun"] {
        let r = load(&format!("probe-template-{v}.yaml"));
        assert_eq!(r.mode, Mode::Probe);
        assert_eq!(
            names(&r),
            ["none-none", "none-xnack", "tf32_off-none", "tf32_off-xnack"]
        );
        let p = r.probe.unwrap();
        assert_eq!(
            p.redaction.unwrap().scrub_env_keys,
            ["AWS_*", "GCP_*", "*_TOKEN", "*_KEY", "USER", "HOME"]
        );
        assert_eq!(p.collect_paths, ["${AORTA_ARTIFACT_DIR}/profiles"]);
    }
}

#[test]
fn probe_flag_sweep_is_18_by_3() {
    let r = load("probe-flag-sweep.yaml");
    assert_eq!(r.cells.len(), 54);
    assert_eq!(r.cells[1].name, "none-hip_launch_blocking");
    assert_eq!(r.cells[1].resolved_env["HIP_LAUNCH_BLOCKING"], "1");
    let last = r.cells.last().unwrap();
    assert_eq!(
        last.name,
        "pytorch_alloc_expandable_segments-amd_log_level_4"
    );
    assert_eq!(
        last.resolved_env["PYTORCH_CUDA_ALLOC_CONF"],
        "expandable_segments:True"
    );
    assert_eq!(last.resolved_env["AMD_LOG_LEVEL"], "4");
}

#[test]
fn llm_determinism_merges_cell_config() {
    let r = load("example-llm-determinism.yaml");
    let moe = r.cells.iter().find(|c| c.name == "moe").unwrap();
    let cfg = moe.effective_workload_config(&r);
    assert_eq!(cfg["num_experts"], 4);
    assert_eq!(cfg["hidden_size"], 256);
}

#[test]
fn race_smoke_extra_env_and_sdc_baseline() {
    let r = load("race_smoke.yaml");
    assert!(r.save_logs);
    assert_eq!(r.cells[1].resolved_env["NCCL_ALGO"], "Ring");
    let r = load("ainic-gdr-flush-sdc.yaml");
    assert_eq!((r.cells.len(), r.trials), (5, 16));
    assert_eq!(r.confound.resolved_baseline, "gdr_flush_on");
    let r = load("ainic-sdc-stress-reproducer.yaml");
    assert_eq!(r.cells[1].resolved_env["GPU_MAX_HW_QUEUES"], "2");
    assert_eq!(
        r.cells[3].effective_workload_config(&r)["same_stream_mode"],
        true
    );
}

#[test]
fn flag_mode_builds_the_product_and_matches_recipe_inline_names() {
    let flags = FlagRecipe {
        workload: Some("training".into()),
        mitigation_axis: Some("none, tf32_off".into()),
        environment_axis: Some("local,image:rocm/pytorch:latest".into()),
        trials: Some(2),
        steps: Some(3),
        ..Default::default()
    };
    let r = flags.build(&Registry::builtin()).unwrap();
    let n: Vec<_> = r.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        n,
        [
            "none-local",
            "none-_inline_982a8846",
            "tf32_off-local",
            "tf32_off-_inline_982a8846"
        ]
    );
    assert_eq!(r.confound.resolved_baseline, "none-local");
    assert_eq!(r.confound.threshold, 1.15);
}

#[test]
fn flag_mode_errors() {
    let base = FlagRecipe {
        workload: Some("training".into()),
        mitigation_axis: Some("none".into()),
        environment_axis: Some("local".into()),
        trials: Some(1),
        steps: Some(1),
        ..Default::default()
    };
    let reg = Registry::builtin();
    let check = |f: FlagRecipe, needle: &str| {
        let e = f.build(&reg).unwrap_err();
        assert!(e.to_string().contains(needle), "{e} lacks {needle}");
    };
    check(
        FlagRecipe {
            steps: None,
            ..base.clone()
        },
        "--steps",
    );
    check(
        FlagRecipe {
            trials: Some(0),
            ..base.clone()
        },
        ">= 1",
    );
    check(
        FlagRecipe {
            steps: Some(-1),
            ..base.clone()
        },
        ">= 1",
    );
    check(
        FlagRecipe {
            workload: Some(" ".into()),
            ..base.clone()
        },
        "must not be empty",
    );
    check(
        FlagRecipe {
            confound_threshold: Some(0.0),
            ..base.clone()
        },
        "> 0",
    );
    check(
        FlagRecipe {
            ticket: Some("".into()),
            ..base.clone()
        },
        "must not be empty",
    );
    check(
        FlagRecipe {
            mitigation_axis: Some(" , ".into()),
            ..base.clone()
        },
        "axis is empty",
    );
    check(
        FlagRecipe {
            environment_axis: Some("image:".into()),
            ..base.clone()
        },
        "needs an image reference",
    );
    check(
        FlagRecipe {
            baseline_cell: Some("nope".into()),
            ..base.clone()
        },
        "'nope' is not a cell",
    );
    check(
        FlagRecipe {
            mitigation_axis: Some("bogus".into()),
            ..base.clone()
        },
        "unknown mitigation 'bogus'",
    );
    check(
        FlagRecipe {
            collect: Some("bogus".into()),
            ..base.clone()
        },
        "unknown collector",
    );
}

/// `--trials auto` takes the recipe's budget as flags: `--max-walltime` (a duration) and
/// `--max-gpu-hours`; either without `--trials auto`, or a bad value, is a usage error.
#[test]
fn flag_mode_auto_takes_the_walltime_and_gpu_hour_budget() {
    let base = FlagRecipe {
        workload: Some("training".into()),
        mitigation_axis: Some("none,tf32_off".into()),
        environment_axis: Some("local".into()),
        trials_auto: true,
        steps: Some(1),
        max_walltime: Some("90m".into()),
        max_gpu_hours: Some(2.5),
        ..Default::default()
    };
    let r = base.build(&Registry::builtin()).unwrap();
    let a = r.auto.unwrap();
    assert_eq!(
        (a.max_walltime_sec, a.max_gpu_hours),
        (Some(5400.0), Some(2.5))
    );
    for (flags, needle) in [
        (
            FlagRecipe {
                trials_auto: false,
                trials: Some(3),
                max_gpu_hours: None,
                ..base.clone()
            },
            "--max-walltime: applies only to --trials auto",
        ),
        (
            FlagRecipe {
                max_walltime: Some("soon".into()),
                ..base.clone()
            },
            "--max-walltime: 'soon' is not a duration",
        ),
        (
            FlagRecipe {
                max_gpu_hours: Some(0.0),
                ..base.clone()
            },
            "--max-gpu-hours: must be a positive number of GPU-hours, got 0",
        ),
    ] {
        let e = flags.build(&Registry::builtin()).unwrap_err();
        assert!(e.to_string().contains(needle), "{e}");
    }
}
