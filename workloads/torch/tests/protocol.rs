//! Each workload binary through the protocol on the CPU: describe, a tiny run, a bad config.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

fn bin(name: &str) -> &'static str {
    match name {
        "training" => env!("CARGO_BIN_EXE_aorta-workload-training"),
        "inference" => env!("CARGO_BIN_EXE_aorta-workload-inference"),
        _ => env!("CARGO_BIN_EXE_aorta-workload-llm_determinism"),
    }
}

/// Runs one trial; returns the exit code and RESULT.json.
fn run(name: &str, steps: Option<u64>, config: Value) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    let res = dir.path().join("result.json");
    let doc = json!({"protocol": 1, "workload": name, "cell": "c", "trial_index": 0, "steps": steps,
                     "config": config, "trial_dir": dir.path()});
    std::fs::write(&cfg, doc.to_string()).unwrap();
    let out = Command::new(bin(name))
        .args(["run", "--config"])
        .arg(&cfg)
        .arg("--result")
        .arg(&res)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let result = read(&res).unwrap_or_else(|| {
        panic!(
            "no result; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), result)
}

fn read(p: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(p).ok()?).ok()
}

fn tiny() -> Value {
    json!({"hidden_size": 32, "num_layers": 2, "num_heads": 4, "ffn_size": 64, "vocab_size": 64})
}

#[test]
fn describe_says_who_and_needs_libtorch() {
    for name in ["training", "inference", "llm_determinism"] {
        let out = Command::new(bin(name)).arg("describe").output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["name"], name);
        assert_eq!(v["protocol"], 1);
        assert_eq!(v["requires"], json!(["libtorch"]));
    }
}

#[test]
fn training_runs_and_reports() {
    for kind in ["mlp", "transformer", "moe_transformer"] {
        let mut model = tiny();
        model["kind"] = json!(kind);
        let (code, r) = run(
            "training",
            Some(3),
            json!({"device": "cpu", "dtype": "fp32", "seq_len": 8, "model": model}),
        );
        assert_eq!(code, 0, "{r}");
        assert_eq!(r["passed"], true);
        assert_eq!(r["executed_iterations"], 3);
        assert_eq!(r["step_times_ms"].as_array().unwrap().len(), 3);
        for k in [
            "final_loss",
            "step_time_p50",
            "step_time_p99",
            "tokens_per_sec",
            "parameter_count",
        ] {
            assert!(r["metrics"][k].is_number(), "{kind}: {k} in {r}");
        }
        assert_eq!(r["metrics"]["model_kind"], kind);
    }
}

#[test]
fn training_catches_non_finite_loss() {
    let mut model = tiny();
    model["kind"] = json!("mlp");
    let (code, r) = run(
        "training",
        Some(2),
        json!({"device": "cpu", "dtype": "fp32", "seq_len": 4, "model": model, "optimizer": {"lr": 1e30}}),
    );
    assert_eq!(code, 0);
    assert_eq!(r["passed"], false, "{r}");
    assert_eq!(r["first_failure_iteration"], 1);
}

#[test]
fn bad_config_is_a_setup_failure_with_a_hint() {
    for (name, cfg) in [
        ("training", json!({"batch_size": 0})),
        ("inference", json!({"max_new_tokens": 3})),
        ("llm_determinism", json!({"dtype": "int4"})),
    ] {
        let (code, r) = run(name, None, cfg);
        assert_eq!(code, 2, "{name}: {r}");
        assert_eq!(r["main_work_started"], false);
        assert_eq!(r["failure_details"][0]["type"], "config");
        assert!(r["failure_details"][0]["hint"]
            .as_str()
            .unwrap()
            .contains("docs/workloads.md"));
    }
}

#[test]
fn inference_both_modes() {
    let req = json!({"batch_size": 3, "prompt_len": 6, "generate_tokens": 4});
    let (code, r) = run(
        "inference",
        Some(2),
        json!({"device": "cpu", "dtype": "fp32", "request": req, "model": tiny()}),
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["passed"], true, "{r}");
    let m = &r["metrics"];
    assert_eq!(m["decoded_tokens"], 2 * 3 * 3);
    assert!(
        m["prefill_latency_ms"].is_number()
            && m["decode_latency_ms"].is_number()
            && m["tokens_per_sec"].is_number()
    );
    assert!(m["logits_checksum"].as_str().unwrap().starts_with("0x"));
    let cb = json!({"device": "cpu", "dtype": "fp32", "mode": "continuous_batch", "request": req, "model": tiny(),
                    "serving": {"continuous_batch": {"max_active_requests": 2}}, "expected_logits_checksum": "0x0"});
    let (code, r) = run("inference", Some(12), cb);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["failure_details"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["failure_details"][0]["type"], "logits_checksum_mismatch");
    assert!(r["metrics"]["prefill_latency_ms"].is_null());
}

#[test]
fn determinism_identical_runs_match_and_a_forced_difference_is_caught() {
    let mut cfg = tiny();
    cfg["device"] = json!("cpu");
    cfg["seq_len"] = json!(8);
    cfg["batch_size"] = json!(2);
    cfg["plant_nondeterminism"] = json!("index_add");
    let (code, r) = run("llm_determinism", None, cfg.clone());
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["passed"], true, "{r}");
    assert_eq!(r["metrics"]["steps"][0]["num_blocks_checked"], 2);
    cfg["perturb_second_run"] = json!(0.5);
    cfg["capture_dir"] = json!("cap");
    let (code, r) = run("llm_determinism", Some(2), cfg);
    assert_eq!(code, 0);
    assert_eq!(r["passed"], false);
    let reasons = r["metrics"]["divergence_reasons"].as_array().unwrap();
    assert!(
        reasons[0]
            .as_str()
            .unwrap()
            .starts_with("step0: block[0].post"),
        "{reasons:?}"
    );
    assert_eq!(r["metrics"]["ranks_with_divergence"], json!([0]));
}
