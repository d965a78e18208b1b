//! `training` (spec §8.2), single process: a seeded model trained on synthetic tokens with
//! AdamW and linear warmup; per-step times; NaN/Inf checks on loss, outputs and gradients;
//! final loss, p50/p99 step time, tokens/s and model FLOPs utilisation.

use std::time::Instant;

use serde_json::{json, Value};
use tch::{Kind, Tensor};

use crate::common::{build, parameter_count, read_model, token_batch, ModelDefaults};
use crate::config::{dtype_name, parse_dtype, Reader, DTYPES};
use crate::model::{loss, Attend};
use crate::optim::FusedAdamW;
use crate::protocol::{Outcome, SetupError, Trial};
use crate::stats::{percentile, train_step_flops};
use crate::{device, model::ModelCfg};

pub const NAME: &str = "training";
const HINT: &str = "see docs/workloads.md#training for the keys and their ranges";

#[derive(Debug, Clone)]
pub struct Config {
    pub parallelism: String,
    pub seed: u64,
    pub device: String,
    pub dtype: Kind,
    pub batch_size: i64,
    pub seq_len: i64,
    pub warmup_steps: u64,
    pub steps: u64,
    pub model: ModelCfg,
    pub model_kind: String,
    pub lr: f64,
    pub weight_decay: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub check_loss: bool,
    pub check_grad: bool,
    pub check_output: bool,
    pub allow_tf32: bool,
    pub peak_tflops: Option<f64>,
    /// Keys nobody reads; AORTA warns about them and goes on.
    pub unknown: Vec<String>,
}

pub fn parse(t: &Trial) -> Result<Config, SetupError> {
    let mut r = Reader::new(t.config.clone());
    let parallelism = r.choice("parallelism", "fsdp", &["fsdp", "ddp", "none"]);
    let seed = r.uint("seed", 1234, 0);
    let device = r.choice("device", "auto", &["auto", "cuda", "cpu"]);
    let dtype = parse_dtype(&r.choice("dtype", "bfloat16", DTYPES)).unwrap_or(Kind::BFloat16);
    let batch_size = r.uint("batch_size", 2, 1) as i64;
    let seq_len = r.uint("seq_len", 128, 1) as i64;
    let warmup_steps = r.uint("warmup_steps", 1, 0);
    let steps = t.steps.unwrap_or_else(|| r.uint("steps", 4, 1));
    r.ignore("steps");
    let defaults = ModelDefaults {
        kind: "transformer",
        hidden: 256,
        layers: 2,
        heads: 4,
        ffn: 1024,
        experts: 4,
    };
    let mut m = r.sub("model");
    let (model, model_kind) = read_model(
        &mut m,
        &defaults,
        &["mlp", "transformer", "moe_transformer"],
        seq_len,
    );
    m.done();
    let model = if model_kind == "transformer" {
        ModelCfg {
            experts: 1,
            ..model
        }
    } else {
        model
    };
    let mut o = r.sub("optimizer");
    o.choice("kind", "adamw", &["adamw"]);
    let lr = o.float("lr", 1e-4);
    let weight_decay = o.float("weight_decay", 1e-2);
    let betas = o.pair("betas", (0.9, 0.98));
    let eps = o.float("eps", 1e-8);
    o.done();
    let mut c = r.sub("checks");
    let check_loss = c.boolean("fail_on_nan_loss", true);
    let check_grad = c.boolean("fail_on_nan_grad", true);
    let check_output = c.boolean("fail_on_nonfinite_output", true);
    c.done();
    let allow_tf32 = r.boolean("allow_tf32", false);
    let peak_tflops = r.opt_float("peak_tflops");
    let unknown = r.finish(HINT)?;
    Ok(Config {
        parallelism,
        seed,
        device,
        dtype,
        batch_size,
        seq_len,
        warmup_steps,
        steps,
        model,
        model_kind,
        lr,
        weight_decay,
        betas,
        eps,
        check_loss,
        check_grad,
        check_output,
        allow_tf32,
        peak_tflops,
        unknown,
    })
}

/// AORTA's warmup: the learning rate ramps linearly over `warmup` steps, then stays.
pub fn lr_at(lr: f64, warmup: u64, step: u64) -> f64 {
    if warmup == 0 {
        lr
    } else {
        lr * ((step + 1) as f64 / warmup as f64).min(1.0)
    }
}

pub fn run(t: &Trial) -> Result<Outcome, SetupError> {
    let cfg = parse(t)?;
    for k in &cfg.unknown {
        eprintln!("training: WARNING: ignoring unknown workload_config key {k}");
    }
    let dev = device::resolve(&cfg.device)?;
    crate::profile::start(dev);
    let tf32 = device::set_tf32(cfg.allow_tf32).map_err(|e| SetupError {
        kind: "torch_error",
        error: e,
        hint: "see stderr.log".into(),
    })?;
    let (vs, model) = build(&cfg.model, cfg.seed, cfg.dtype, dev);
    let params = vs.trainable_variables();
    let mut opt = FusedAdamW::new(
        params.iter().map(Tensor::shallow_clone).collect(),
        lr_at(cfg.lr, cfg.warmup_steps, 0),
        cfg.betas,
        cfg.weight_decay,
        cfg.eps,
    );
    // Per-rank CPU generator seed as AORTA (rank 0): the token stream is the same on any device.
    device::seed(cfg.seed + 7919);

    let mut out = Outcome {
        configured_iterations: cfg.steps,
        ..Default::default()
    };
    let mut final_loss = None;
    for step in 0..cfg.steps {
        let (inputs, targets) = token_batch(cfg.batch_size, cfg.seq_len, cfg.model.vocab, dev);
        let t0 = Instant::now();
        opt.lr = lr_at(cfg.lr, cfg.warmup_steps, step);
        opt.zero_grad();
        let logits = model.forward(&inputs, Attend::Full, &mut |_, _, _| {});
        let l = loss(&logits, &targets);
        l.backward();
        if let Err(e) = opt.step() {
            out.fail(Some(step), json!({"step": step, "rank": 0, "problems": ["optimizer_error"], "error": e, "hint": "libtorch's fused AdamW refused the step: see stderr.log"}));
            break;
        }
        device::sync(dev);
        out.step_times_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        out.executed_iterations = step + 1;

        let mut problems = Vec::new();
        let lv = l.double_value(&[]);
        final_loss = Some(lv);
        if cfg.check_loss && !lv.is_finite() {
            problems.push("non_finite_loss");
        }
        if cfg.check_output && !crate::checksum::all_finite(&logits) {
            problems.push("non_finite_output");
        }
        if cfg.check_grad && !grads_finite(&params) {
            problems.push("non_finite_grad");
        }
        if !problems.is_empty() {
            out.fail(Some(step), json!({"step": step, "rank": 0, "problems": problems, "loss": lv,
                "hint": "non-finite numbers: try dtype float32, a lower lr, or the tf32_off mitigation"}));
        }
    }
    let timed: Vec<f64> = out
        .step_times_ms
        .iter()
        .skip(cfg.warmup_steps as usize)
        .copied()
        .collect();
    let timed = if timed.is_empty() {
        out.step_times_ms.clone()
    } else {
        timed
    };
    let mean_s = timed.iter().sum::<f64>() / timed.len().max(1) as f64 / 1e3;
    let tokens = (cfg.batch_size * cfg.seq_len) as f64;
    let flops = train_step_flops(&cfg.model, cfg.batch_size, cfg.seq_len);
    let achieved = (mean_s > 0.0).then(|| flops / mean_s / 1e12);
    let gpu = device::gpu_model(dev);
    let peak = cfg.peak_tflops.or_else(|| {
        gpu.as_deref()
            .and_then(|g| device::peak_tflops(g, cfg.dtype, tf32))
    });
    let m = &mut out.metrics;
    m.insert("parallelism".into(), json!(cfg.parallelism));
    m.insert("rank".into(), json!(0));
    m.insert("world_size".into(), json!(1));
    m.insert("device".into(), json!(device::device_name(dev)));
    m.insert("gpu_model".into(), json!(gpu));
    m.insert("dtype".into(), json!(dtype_name(cfg.dtype)));
    m.insert("tf32".into(), json!(tf32));
    m.insert("model_kind".into(), json!(cfg.model_kind));
    m.insert("parameter_count".into(), json!(parameter_count(&vs)));
    m.insert("final_loss".into(), json!(final_loss));
    m.insert("step_time_p50".into(), json!(percentile(&timed, 50.0)));
    m.insert("step_time_p99".into(), json!(percentile(&timed, 99.0)));
    m.insert(
        "tokens_per_sec".into(),
        json!((mean_s > 0.0).then(|| tokens / mean_s)),
    );
    m.insert("flops_per_step".into(), json!(flops));
    m.insert("achieved_tflops".into(), json!(achieved));
    m.insert("peak_tflops".into(), json!(peak));
    m.insert(
        "mfu".into(),
        achieved
            .zip(peak)
            .map(|(a, p)| json!(a / p))
            .unwrap_or(Value::Null),
    );
    m.insert("ignored_keys".into(), json!(cfg.unknown));
    Ok(out)
}

/// One device sync for all gradients (a sync per parameter would distort nothing timed, but
/// costs seconds on big models). Parameters without a gradient (unrouted experts) are skipped.
fn grads_finite(params: &[Tensor]) -> bool {
    let flags: Vec<Tensor> = params
        .iter()
        .map(Tensor::grad)
        .filter(Tensor::defined)
        .map(|g| g.isfinite().all())
        .collect();
    flags.is_empty() || Tensor::stack(&flags, 0).all().int64_value(&[]) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trial(config: Value, steps: Option<u64>) -> Trial {
        Trial {
            steps,
            config: config.as_object().unwrap().clone(),
            trial_dir: ".".into(),
            cell: "c".into(),
            trial_index: 0,
        }
    }

    #[test]
    fn aorta_defaults() {
        let c = parse(&trial(json!({}), None)).unwrap();
        assert_eq!(
            (c.batch_size, c.seq_len, c.steps, c.warmup_steps, c.seed),
            (2, 128, 4, 1, 1234)
        );
        assert_eq!(
            (
                c.model.hidden,
                c.model.layers,
                c.model.heads,
                c.model.ffn,
                c.model.vocab,
                c.model.experts
            ),
            (256, 2, 4, 1024, 32000, 1)
        );
        assert_eq!(c.dtype, Kind::BFloat16);
        assert_eq!((c.lr, c.betas, c.eps), (1e-4, (0.9, 0.98), 1e-8));
    }

    #[test]
    fn dispatcher_steps_win_and_moe_needs_two_experts() {
        let c = parse(&trial(
            json!({"steps": 9, "model": {"kind": "moe_transformer", "moe": {"num_experts": 3}}}),
            Some(5),
        ))
        .unwrap();
        assert_eq!((c.steps, c.model.experts), (5, 3));
        let e = parse(&trial(
            json!({"model": {"kind": "moe_transformer", "num_experts": 1}}),
            None,
        ))
        .unwrap_err();
        assert!(e.error.contains("model.num_experts"), "{}", e.error);
    }

    #[test]
    fn bad_values_are_config_errors_unknown_keys_warnings() {
        let e = parse(&trial(
            json!({"dtype": "int8", "model": {"hidden_size": 30, "num_heads": 4}}),
            None,
        ))
        .unwrap_err();
        assert!(
            e.error.contains("dtype") && e.error.contains("model.hidden_size: 30 is not divisible"),
            "{}",
            e.error
        );
        let c = parse(&trial(
            json!({"optimizer": {"name": "adamw"}, "checks": {"nan_inf": true}}),
            None,
        ))
        .unwrap();
        assert_eq!(c.unknown, vec!["optimizer.name", "checks.nan_inf"]);
    }

    #[test]
    fn warmup_ramps_linearly() {
        assert_eq!(lr_at(1.0, 0, 0), 1.0);
        assert_eq!(lr_at(1.0, 4, 0), 0.25);
        assert_eq!(lr_at(1.0, 4, 3), 1.0);
        assert_eq!(lr_at(1.0, 4, 10), 1.0);
    }
}
