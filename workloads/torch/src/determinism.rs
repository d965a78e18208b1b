//! `llm_determinism` (spec §8.4): one training step (forward, fp32 loss, backward) of a
//! transformer run twice from the same parameters and seeds; every bit must agree. Checksums
//! cover the loss, logits, each gradient and parameter, and every block's input and output, so
//! a divergence names the first block where it appeared. Switches: `deterministic`
//! (torch.use_deterministic_algorithms), `allow_tf32`, a planted atomics-based reduction
//! (`plant_nondeterminism`) and `perturb_second_run`, which proves the comparison catches a
//! difference on hardware where the planted source happens to be deterministic (the CPU).

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

use serde_json::{json, Value};
use tch::{nn, Kind, Tensor};

use crate::checksum::{scalar_bits, tensor_checksum};
use crate::common::{build, read_model, ModelDefaults};
use crate::config::{dtype_name, parse_dtype, Reader, DTYPES};
use crate::device;
use crate::model::{loss, Attend, Model, ModelCfg, Plant};
use crate::protocol::{Outcome, SetupError, Trial};

pub const NAME: &str = "llm_determinism";
const HINT: &str = "see docs/workloads.md#llm_determinism for the keys and their ranges";

#[derive(Debug, Clone)]
pub struct Config {
    pub model: ModelCfg,
    pub seq_len: i64,
    pub batch_size: i64,
    pub dtype: Kind,
    pub seed: u64,
    pub steps: u64,
    pub checksum_mode: String,
    pub capture_dir: Option<String>,
    pub model_label: String,
    pub device: String,
    pub deterministic: bool,
    pub allow_tf32: bool,
    pub plant: String,
    pub perturb_second_run: f64,
}

pub fn parse(t: &Trial) -> Result<Config, SetupError> {
    let mut r = Reader::new(t.config.clone());
    let seq_len = r.uint("seq_len", 512, 1) as i64;
    let defaults = ModelDefaults {
        kind: "transformer",
        hidden: 2048,
        layers: 24,
        heads: 16,
        ffn: 5632,
        experts: 1,
    };
    // AORTA's keys sit at the top level here; `model` names a kind in some recipes.
    let (mut model, _) = read_model(&mut r, &defaults, &["transformer"], seq_len);
    let plant = r.choice(
        "plant_nondeterminism",
        "none",
        &["none", "index_add", "scatter_add"],
    );
    model.plant = match plant.as_str() {
        "index_add" => Plant::IndexAdd,
        "scatter_add" => Plant::ScatterAdd,
        _ => Plant::None,
    };
    let cfg = Config {
        model,
        seq_len,
        batch_size: r.uint("batch_size", 1, 1) as i64,
        dtype: parse_dtype(&r.choice("dtype", "bf16", DTYPES)).unwrap_or(Kind::BFloat16),
        seed: r.uint("seed", 1234, 0),
        steps: t.steps.unwrap_or_else(|| r.uint("steps", 1, 1)),
        checksum_mode: r.choice("checksum_mode", "per_rank", &["per_rank", "global"]),
        capture_dir: r.opt_str("capture_dir"),
        model_label: r
            .opt_str("model_label")
            .unwrap_or_else(|| "generic-repeated-block".into()),
        device: r.choice("device", "auto", &["auto", "cuda", "cpu"]),
        deterministic: r.boolean("deterministic", true),
        allow_tf32: r.boolean("allow_tf32", false),
        plant,
        perturb_second_run: r.float("perturb_second_run", 0.0),
    };
    // Unknown keys are ignored, as in AORTA.
    r.finish(HINT)?;
    Ok(cfg)
}

/// Everything one run of the step leaves behind, as bit checksums.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSums {
    pub loss_bits: String,
    pub logits: String,
    pub block_pre: Vec<String>,
    pub block_post: Vec<String>,
    pub grads: BTreeMap<String, String>,
    pub params: BTreeMap<String, String>,
}

/// Reasons two runs differ, in the order a reader wants them: blocks first (where it began).
pub fn compare(a: &RunSums, b: &RunSums) -> Vec<String> {
    let mut out = Vec::new();
    for (what, x, y) in [
        ("pre", &a.block_pre, &b.block_pre),
        ("post", &a.block_post, &b.block_post),
    ] {
        if x.len() != y.len() {
            out.push(format!(
                "block {what} checksum count {} != {}",
                x.len(),
                y.len()
            ));
        }
    }
    if out.is_empty() {
        // Block by block, input before output: the first reason is where the bits parted.
        for i in 0..a.block_pre.len() {
            for (what, x, y) in [
                ("pre", &a.block_pre, &b.block_pre),
                ("post", &a.block_post, &b.block_post),
            ] {
                if x[i] != y[i] {
                    out.push(format!("block[{i}].{what} {} != {}", x[i], y[i]));
                }
            }
        }
    }
    if a.loss_bits != b.loss_bits {
        out.push(format!("loss_bits {} != {}", a.loss_bits, b.loss_bits));
    }
    if a.logits != b.logits {
        out.push(format!("logits {} != {}", a.logits, b.logits));
    }
    for (kind, x, y) in [
        ("grad", &a.grads, &b.grads),
        ("param", &a.params, &b.params),
    ] {
        for (name, p) in x {
            match y.get(name) {
                Some(q) if q == p => {}
                Some(q) => out.push(format!("{kind}[{name}] {p} != {q}")),
                None => out.push(format!("{kind}[{name}] missing in run 2")),
            }
        }
    }
    out
}

fn one_run(
    model: &Model,
    vs: &nn::VarStore,
    inputs: &Tensor,
    labels: &Tensor,
    seed: u64,
) -> RunSums {
    device::seed(seed + 1);
    for p in vs.trainable_variables() {
        let mut g = p.grad();
        if g.defined() {
            let _ = g.zero_();
        }
    }
    let (mut pre, mut post) = (Vec::new(), Vec::new());
    let logits = model.forward(inputs, Attend::Full, &mut |_, x, y| {
        pre.push(tensor_checksum(x));
        post.push(tensor_checksum(y));
    });
    let l = loss(&logits, labels);
    l.backward();
    let vars = vs.variables();
    let grads = vars
        .iter()
        .filter(|(_, t)| t.grad().defined())
        .map(|(n, t)| (n.clone(), tensor_checksum(&t.grad())))
        .collect();
    let params = vars
        .iter()
        .map(|(n, t)| (n.clone(), tensor_checksum(t)))
        .collect();
    RunSums {
        loss_bits: scalar_bits(&l),
        logits: tensor_checksum(&logits),
        block_pre: pre,
        block_post: post,
        grads,
        params,
    }
}

pub fn run(t: &Trial) -> Result<Outcome, SetupError> {
    let cfg = parse(t)?;
    let dev = device::resolve(&cfg.device)?;
    crate::profile::start(dev);
    let torch_err = |e: String| SetupError {
        kind: "torch_error",
        error: e,
        hint: "see stderr.log".into(),
    };
    device::set_deterministic(cfg.deterministic).map_err(torch_err)?;
    if cfg.deterministic {
        device::sdpa_math_only().map_err(torch_err)?;
    }
    let tf32 = device::set_tf32(cfg.allow_tf32).map_err(torch_err)?;
    let (vs, model) = build(&cfg.model, cfg.seed, cfg.dtype, dev);
    device::seed(cfg.seed); // AORTA: input ids from a CPU generator seeded seed + rank
    let inputs = Tensor::randint(
        cfg.model.vocab,
        [cfg.batch_size, cfg.seq_len],
        (Kind::Int64, tch::Device::Cpu),
    );
    let labels = inputs.roll([-1], [1]).to_device(dev);
    let inputs = inputs.to_device(dev);
    let mut capture = match &cfg.capture_dir {
        Some(d) => {
            let dir = t.trial_dir.join(d);
            std::fs::create_dir_all(&dir)
                .map_err(|e| torch_err(format!("capture_dir {}: {e}", dir.display())))?;
            Some(
                std::fs::File::create(dir.join("rank000.jsonl"))
                    .map_err(|e| torch_err(format!("capture file: {e}")))?,
            )
        }
        None => None,
    };
    // The parameter the perturbation knob nudges in run 2: the first by name.
    let first_param = vs
        .variables()
        .into_iter()
        .min_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, t)| t);

    let mut out = Outcome {
        configured_iterations: cfg.steps,
        ..Default::default()
    };
    let (mut steps, mut reasons, mut run_ms) = (Vec::new(), Vec::new(), Vec::new());
    for step in 0..cfg.steps {
        let snapshot: Vec<Tensor> = vs
            .trainable_variables()
            .iter()
            .map(|p| p.detach().copy())
            .collect();
        let t0 = Instant::now();
        let r1 = one_run(&model, &vs, &inputs, &labels, cfg.seed);
        device::sync(dev);
        run_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        restore(&vs, &snapshot);
        if let (Some(p), true) = (&first_param, cfg.perturb_second_run != 0.0) {
            let _g = tch::no_grad_guard();
            let mut first = p.reshape([-1]).narrow(0, 0, 1);
            let _ = first.g_mul_scalar_(1.0 + cfg.perturb_second_run);
        }
        let t1 = Instant::now();
        let r2 = one_run(&model, &vs, &inputs, &labels, cfg.seed);
        device::sync(dev);
        run_ms.push(t1.elapsed().as_secs_f64() * 1e3);
        restore(&vs, &snapshot);
        for (name, r) in [("r1", &r1), ("r2", &r2)] {
            if let Some(f) = capture.as_mut() {
                let line = json!({"rank": 0, "step": step, "run": name, "loss_bits": r.loss_bits, "output_bits": r.logits,
                                  "block_pre": r.block_pre, "block_post": r.block_post});
                let _ = writeln!(f, "{line}");
            }
        }
        let step_reasons: Vec<String> = compare(&r1, &r2)
            .into_iter()
            .map(|r| format!("step{step}: {r}"))
            .collect();
        if !step_reasons.is_empty() {
            out.first_failure_iteration.get_or_insert(step);
        }
        steps.push(json!({"step": step, "loss_bits_r1": r1.loss_bits, "loss_bits_r2": r2.loss_bits,
                          "num_blocks_checked": r1.block_post.len(), "global_checksum": global(&r1)}));
        reasons.extend(step_reasons);
        out.executed_iterations = step + 1;
    }
    out.failures = reasons.iter().map(|r| json!({"rank": 0, "reason": r,
        "hint": "bits differ between identical runs: try deterministic: true, the cublas_workspace mitigation, or allow_tf32: false"})).collect();
    let m = &mut out.metrics;
    m.insert("rank".into(), json!(0));
    m.insert("world_size".into(), json!(1));
    m.insert("device".into(), json!(device::device_name(dev)));
    m.insert("num_layers".into(), json!(cfg.model.layers));
    m.insert("num_experts".into(), json!(cfg.model.experts));
    m.insert("dtype".into(), json!(dtype_name(cfg.dtype)));
    m.insert("checksum_mode".into(), json!(cfg.checksum_mode));
    m.insert("capture_dir".into(), json!(cfg.capture_dir));
    m.insert("model_label".into(), json!(cfg.model_label));
    m.insert("deterministic".into(), json!(device::deterministic()));
    m.insert(
        "sdpa_backend".into(),
        json!(if cfg.deterministic { "math" } else { "auto" }),
    );
    m.insert("tf32".into(), json!(tf32));
    m.insert("plant_nondeterminism".into(), json!(cfg.plant));
    m.insert(
        "ranks_with_divergence".into(),
        json!(if reasons.is_empty() { vec![] } else { vec![0] }),
    );
    m.insert("steps".into(), Value::Array(steps));
    m.insert(
        "divergence_reasons".into(),
        json!(reasons.iter().take(32).collect::<Vec<_>>()),
    );
    m.insert("run_times_ms".into(), json!(run_ms));
    Ok(out)
}

/// AORTA's global mode folds loss and output bits together (one rank: nothing to all-reduce).
fn global(r: &RunSums) -> String {
    let p = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or(0);
    format!("{:#018x}", p(&r.loss_bits) ^ p(&r.logits))
}

fn restore(vs: &nn::VarStore, snapshot: &[Tensor]) {
    let _g = tch::no_grad_guard();
    for (mut p, s) in vs.trainable_variables().into_iter().zip(snapshot) {
        p.copy_(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sums() -> RunSums {
        RunSums {
            loss_bits: "0x1".into(),
            logits: "0x2".into(),
            block_pre: vec!["a".into(), "b".into()],
            block_post: vec!["c".into(), "d".into()],
            grads: [("w".to_string(), "g".to_string())].into(),
            params: [("w".to_string(), "p".to_string())].into(),
        }
    }

    #[test]
    fn identical_runs_have_no_reasons() {
        assert!(compare(&sums(), &sums()).is_empty());
    }

    #[test]
    fn reasons_name_blocks_first() {
        let mut b = sums();
        b.block_post[1] = "x".into();
        b.block_pre[1] = "y".into();
        b.loss_bits = "0x9".into();
        b.grads.insert("w".into(), "h".into());
        assert_eq!(
            compare(&sums(), &b),
            vec![
                "block[1].pre b != y",
                "block[1].post d != x",
                "loss_bits 0x1 != 0x9",
                "grad[w] g != h"
            ]
        );
        let mut c = sums();
        c.block_pre.pop();
        assert_eq!(
            compare(&sums(), &c),
            vec!["block pre checksum count 2 != 1"]
        );
    }

    #[test]
    fn aorta_defaults() {
        let t = Trial {
            steps: None,
            config: Default::default(),
            trial_dir: ".".into(),
            cell: String::new(),
            trial_index: 0,
        };
        let c = parse(&t).unwrap();
        assert_eq!(
            (
                c.model.layers,
                c.model.hidden,
                c.model.ffn,
                c.model.heads,
                c.seq_len,
                c.batch_size,
                c.steps
            ),
            (24, 2048, 5632, 16, 512, 1, 1)
        );
        assert_eq!(
            (c.dtype, c.deterministic, c.model.plant),
            (Kind::BFloat16, true, Plant::None)
        );
    }
}
