//! `inference` (spec §8.3): greedy generation with a real KV cache. `offline_batch` prefills a
//! batch and decodes token by token; `continuous_batch` runs a deterministic scheduler that
//! admits requests into free cache slots, decodes all active ones together each tick and
//! retires finished ones. Reports prefill and per-token decode latency, tokens/s, and a bit
//! checksum of the logits, compared across the steps of a trial and, when the recipe pins
//! one (`expected_logits_checksum`), across trials.

use std::time::Instant;

use serde_json::json;
use tch::{Device, Kind, Tensor};

use crate::checksum::tensor_checksum;
use crate::common::{build, read_model, ModelDefaults};
use crate::config::{dtype_name, parse_dtype, Reader, DTYPES};
use crate::device;
use crate::model::{Attend, Model, ModelCfg, ModelKind};
use crate::protocol::{Outcome, SetupError, Trial};
use crate::stats::percentile;

pub const NAME: &str = "inference";
const HINT: &str =
    "see docs/workloads.md#inference for the keys (unknown keys are errors here, as in AORTA)";

#[derive(Debug, Clone)]
pub struct Config {
    pub continuous: bool,
    /// Deterministic algorithms, deterministic cuBLAS and the math attention backend, as
    /// llm_determinism's switch: for triaging a logits checksum that moves between steps.
    pub deterministic: bool,
    /// `auto` or one scaled-dot-product attention backend (math, flash, efficient, cudnn).
    pub attention_backend: String,
    pub seed: u64,
    pub device: String,
    pub dtype: Kind,
    pub warmup_steps: u64,
    pub steps: u64,
    pub batch_size: i64,
    pub prompt_len: i64,
    pub generate_tokens: i64,
    pub model: ModelCfg,
    pub encoder: bool,
    pub kv_cache: bool,
    pub max_active: i64,
    pub check_nan: bool,
    pub check_nonfinite: bool,
    pub compare_checksum: bool,
    pub expected_checksum: Option<String>,
}

pub fn parse(t: &Trial) -> Result<Config, SetupError> {
    let mut r = Reader::new(t.config.clone());
    let mode = r.choice(
        "mode",
        "offline_batch",
        &["offline_batch", "continuous_batch"],
    );
    let seed = r.uint("seed", 1234, 0);
    let deterministic = r.boolean("deterministic", false);
    let attention_backend = r.choice(
        "attention_backend",
        "auto",
        crate::device::ATTENTION_BACKENDS,
    );
    let device = r.choice("device", "auto", &["auto", "cuda", "cpu"]);
    let dtype = parse_dtype(&r.choice("dtype", "bfloat16", DTYPES)).unwrap_or(Kind::BFloat16);
    let warmup_steps = r.uint("warmup_steps", 1, 0);
    let steps = t.steps.unwrap_or_else(|| r.uint("steps", 4, 1));
    r.ignore("steps");
    let mut q = r.sub("request");
    let batch_size = q.uint("batch_size", 4, 1) as i64;
    let prompt_len = q.uint("prompt_len", 128, 1) as i64;
    let generate_tokens = q.uint("generate_tokens", 32, 0) as i64;
    q.done();
    let defaults = ModelDefaults {
        kind: "decoder_transformer",
        hidden: 512,
        layers: 4,
        heads: 8,
        ffn: 2048,
        experts: 1,
    };
    let mut m = r.sub("model");
    let (model, kind) = read_model(
        &mut m,
        &defaults,
        &["mlp", "encoder_transformer", "decoder_transformer"],
        prompt_len + generate_tokens.max(1),
    );
    m.done();
    let mut s = r.sub("serving");
    let kv_cache = s.boolean("kv_cache", true);
    let mut cb = s.sub("continuous_batch");
    let cb_enabled = cb.boolean("enabled", false);
    let max_active = cb.uint("max_active_requests", 8, 1) as i64;
    cb.choice("arrival_pattern", "fixed", &["fixed"]);
    cb.done();
    s.done();
    let mut c = r.sub("checks");
    let check_nan = c.boolean("fail_on_nan_logits", true);
    let check_nonfinite = c.boolean("fail_on_nonfinite_output", true);
    let compare_checksum = c.boolean("compare_logits_checksum", true);
    c.done();
    let expected_checksum = r.opt_str("expected_logits_checksum");
    let continuous = mode == "continuous_batch" || cb_enabled;
    if continuous && generate_tokens < 1 {
        r.invalid(
            "request.generate_tokens",
            "continuous_batch needs generate_tokens >= 1",
        );
    }
    if continuous && kind == "encoder_transformer" {
        r.invalid(
            "model.kind",
            "continuous_batch needs an autoregressive model (mlp or decoder_transformer)",
        );
    }
    let unknown = r.finish(HINT)?;
    if !unknown.is_empty() {
        return Err(SetupError::config(
            format!("unknown workload_config keys: {}", unknown.join(", ")),
            HINT,
        ));
    }
    Ok(Config {
        continuous,
        deterministic,
        attention_backend,
        seed,
        device,
        dtype,
        warmup_steps,
        steps,
        batch_size,
        prompt_len,
        generate_tokens,
        model,
        encoder: kind == "encoder_transformer",
        kv_cache,
        max_active,
        check_nan,
        check_nonfinite,
        compare_checksum,
        expected_checksum,
    })
}

/// Times and flags gathered while serving.
#[derive(Default)]
struct Tally {
    prefill_ms: Vec<f64>,
    decode_ms: Vec<f64>,
    decoded: i64,
    /// Running max of |logit| over every forward: NaN if any logit was NaN (max propagates
    /// it), else infinite if any was ±inf. Two kernels a forward instead of isnan + isinf +
    /// two any + two or.
    worst: Option<Tensor>,
}

impl Tally {
    fn watch(&mut self, logits: &Tensor) {
        let m = logits.abs().amax(&[] as &[i64], false);
        self.worst = Some(match self.worst.take() {
            Some(w) => w.maximum(&m),
            None => m,
        });
    }
    /// (any NaN, any ±inf); when both occurred only the NaN is certain, which is all the
    /// checks need (a NaN fails both `fail_on_nan_logits` and `fail_on_nonfinite`).
    fn flags(&self) -> (bool, bool) {
        let w = self.worst.as_ref().map_or(0.0, |t| t.double_value(&[]));
        (w.is_nan(), w.is_infinite())
    }
}

fn timed<T>(dev: Device, f: impl FnOnce() -> T) -> (T, f64) {
    let t0 = Instant::now();
    let r = f();
    device::sync(dev);
    (r, t0.elapsed().as_secs_f64() * 1e3)
}

/// Logits of the newest position of every row.
fn last(logits: &Tensor) -> Tensor {
    let t = logits.size()[1];
    logits.narrow(1, t - 1, 1).squeeze_dim(1)
}

/// One offline step: prefill the prompt, then decode `generate_tokens − 1` tokens greedily.
/// Returns the final logits `[B, vocab]`.
fn offline_step(c: &Config, m: &Model, prompt: &Tensor, dev: Device, tally: &mut Tally) -> Tensor {
    let b = c.batch_size;
    let slots = Tensor::arange(b, (Kind::Int64, dev));
    let transformer = m.cfg.kind == ModelKind::Transformer;
    let mut cache = (c.kv_cache && transformer && !c.encoder)
        .then(|| m.new_cache(b, c.prompt_len + c.generate_tokens, c.dtype, dev));
    let (logits, ms) = timed(dev, || match cache.as_mut() {
        Some(kv) => m.forward(
            prompt,
            Attend::Prefill {
                cache: kv,
                slots: &slots,
            },
            &mut |_, _, _| {},
        ),
        None if c.encoder => m.forward(prompt, Attend::Encoder, &mut |_, _, _| {}),
        None => m.forward(prompt, Attend::Full, &mut |_, _, _| {}),
    });
    tally.prefill_ms.push(ms);
    tally.watch(&logits);
    let mut logits = last(&logits);
    if c.encoder {
        return logits;
    }
    let mut seq = prompt.shallow_clone();
    for pos in c.prompt_len..c.prompt_len + c.generate_tokens - 1 {
        let next = logits.argmax(-1, true);
        let recompute = cache.is_none() && (transformer || !c.kv_cache);
        if recompute {
            seq = Tensor::cat(&[&seq, &next], 1);
        }
        let (l, ms) = timed(dev, || match cache.as_mut() {
            // Every row of a static batch is at the same position, in its own slot.
            Some(kv) => m.forward(
                &next,
                Attend::DecodeAt { cache: kv, pos },
                &mut |_, _, _| {},
            ),
            // The MLP sees one token at a time anyway; without a cache the transformer recomputes.
            None if !transformer && c.kv_cache => m.forward(&next, Attend::Full, &mut |_, _, _| {}),
            None => m.forward(&seq, Attend::Full, &mut |_, _, _| {}),
        });
        tally.decode_ms.push(ms);
        tally.decoded += b;
        tally.watch(&l);
        logits = last(&l);
    }
    logits
}

/// Continuous batching over `batch_size` requests, at most `max_active` at once, for at most
/// `ticks` ticks. Returns per-tick times, the number of unfinished requests, and the final
/// logits of every finished request in request order.
fn continuous(
    c: &Config,
    m: &Model,
    prompts: &Tensor,
    dev: Device,
    ticks: u64,
    tally: &mut Tally,
) -> (Vec<f64>, i64, Tensor) {
    let total = c.batch_size;
    let transformer = m.cfg.kind == ModelKind::Transformer;
    let mut cache = transformer
        .then(|| m.new_cache(c.max_active, c.prompt_len + c.generate_tokens, c.dtype, dev));
    let mut queue: std::collections::VecDeque<i64> = (0..total).collect();
    // (request, slot, length so far, tokens generated, newest token [1,1], newest logits [vocab])
    let mut active: Vec<(i64, i64, i64, i64, Tensor, Tensor)> = Vec::new();
    let mut finished: Vec<(i64, Tensor)> = Vec::new();
    let mut tick_ms = Vec::new();
    for _ in 0..ticks {
        if queue.is_empty() && active.is_empty() {
            break;
        }
        let t0 = Instant::now();
        let free: Vec<i64> = (0..c.max_active)
            .filter(|s| !active.iter().any(|a| a.1 == *s))
            .collect();
        let admit: Vec<(i64, i64)> = free
            .iter()
            .filter_map(|&s| queue.pop_front().map(|r| (r, s)))
            .collect();
        if !admit.is_empty() {
            let reqs =
                Tensor::from_slice(&admit.iter().map(|a| a.0).collect::<Vec<_>>()).to_device(dev);
            let slots =
                Tensor::from_slice(&admit.iter().map(|a| a.1).collect::<Vec<_>>()).to_device(dev);
            let p = prompts.index_select(0, &reqs);
            let (l, ms) = timed(dev, || match cache.as_mut() {
                Some(kv) => m.forward(
                    &p,
                    Attend::Prefill {
                        cache: kv,
                        slots: &slots,
                    },
                    &mut |_, _, _| {},
                ),
                None => m.forward(&p, Attend::Full, &mut |_, _, _| {}),
            });
            tally.prefill_ms.push(ms);
            tally.watch(&l);
            let l = last(&l);
            for (i, &(r, s)) in admit.iter().enumerate() {
                let li = l.get(i as i64);
                active.push((r, s, c.prompt_len, 1, li.argmax(-1, false).view([1, 1]), li));
            }
        }
        let decoding: Vec<usize> = (0..active.len())
            .filter(|&i| active[i].3 < c.generate_tokens)
            .collect();
        if !decoding.is_empty() {
            let toks = Tensor::cat(
                &decoding.iter().map(|&i| &active[i].4).collect::<Vec<_>>(),
                0,
            );
            let slots =
                Tensor::from_slice(&decoding.iter().map(|&i| active[i].1).collect::<Vec<_>>())
                    .to_device(dev);
            let lens =
                Tensor::from_slice(&decoding.iter().map(|&i| active[i].2).collect::<Vec<_>>())
                    .to_device(dev);
            let (l, ms) = timed(dev, || match cache.as_mut() {
                Some(kv) => m.forward(
                    &toks,
                    Attend::Decode {
                        cache: kv,
                        slots: &slots,
                        lens: &lens,
                    },
                    &mut |_, _, _| {},
                ),
                None => m.forward(&toks, Attend::Full, &mut |_, _, _| {}),
            });
            tally.decode_ms.push(ms);
            tally.decoded += decoding.len() as i64;
            tally.watch(&l);
            let l = last(&l);
            for (j, &i) in decoding.iter().enumerate() {
                let li = l.get(j as i64);
                let a = &mut active[i];
                a.2 += 1;
                a.3 += 1;
                a.4 = li.argmax(-1, false).view([1, 1]);
                a.5 = li;
            }
        }
        let (done, still): (Vec<_>, Vec<_>) =
            active.into_iter().partition(|a| a.3 >= c.generate_tokens);
        finished.extend(done.into_iter().map(|a| (a.0, a.5)));
        active = still;
        tick_ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    finished.sort_by_key(|f| f.0);
    let unfinished = queue.len() as i64 + active.len() as i64;
    let logits = if finished.is_empty() {
        Tensor::zeros([0], (Kind::Float, dev))
    } else {
        Tensor::stack(&finished.iter().map(|f| &f.1).collect::<Vec<_>>(), 0)
    };
    (tick_ms, unfinished, logits)
}

pub fn run(t: &Trial) -> Result<Outcome, SetupError> {
    let c = parse(t)?;
    let dev = device::resolve(&c.device)?;
    crate::profile::start(dev);
    let torch_err = |e: String| SetupError {
        kind: "torch_error",
        error: e,
        hint: "see stderr.log".into(),
    };
    device::set_tf32(false).map_err(torch_err)?;
    if c.deterministic {
        device::set_deterministic(true).map_err(torch_err)?;
        device::sdpa_math_only().map_err(torch_err)?;
    }
    if c.attention_backend != "auto" {
        device::pin_attention(&c.attention_backend).map_err(torch_err)?;
    }
    let (_vs, m) = build(&c.model, c.seed, c.dtype, dev);
    let _g = tch::no_grad_guard();
    device::seed(c.seed);
    let prompts = Tensor::randint(
        c.model.vocab,
        [c.batch_size, c.prompt_len],
        (Kind::Int64, Device::Cpu),
    )
    .to_device(dev);
    let mut out = Outcome {
        configured_iterations: c.steps,
        ..Default::default()
    };
    let mut checksums = Vec::new();
    let mut tally = Tally::default();
    if c.continuous {
        let mut warm = Tally::default();
        let _ = continuous(&c, &m, &prompts, dev, c.warmup_steps, &mut warm);
        let (ticks, unfinished, logits) = continuous(&c, &m, &prompts, dev, c.steps, &mut tally);
        out.executed_iterations = ticks.len() as u64;
        out.step_times_ms = ticks;
        out.step_times_ms.resize(c.steps as usize, 0.0); // idle ticks, as AORTA records them
        if unfinished > 0 {
            out.fail(None, json!({"type": "incomplete_requests", "count": unfinished,
                "hint": format!("{unfinished} request(s) unfinished after {} ticks: raise steps or max_active_requests", c.steps)}));
        }
        checksums.push(tensor_checksum(&logits));
    } else {
        for _ in 0..c.warmup_steps {
            let _ = offline_step(&c, &m, &prompts, dev, &mut Tally::default());
        }
        for step in 0..c.steps {
            let (logits, ms) = timed(dev, || offline_step(&c, &m, &prompts, dev, &mut tally));
            out.step_times_ms.push(ms);
            checksums.push(tensor_checksum(&logits));
            out.executed_iterations = step + 1;
        }
    }
    let (nan, inf) = tally.flags();
    let mut problems = Vec::new();
    if c.check_nan && nan {
        problems.push("nan_logits");
    }
    if c.check_nonfinite && (nan || inf) {
        problems.push("non_finite_output");
    }
    if !problems.is_empty() {
        out.fail(None, json!({"type": "numeric", "problems": problems, "hint": "non-finite logits: try dtype float32 or the tf32_off mitigation"}));
    }
    if c.compare_checksum {
        if let Some(i) = checksums.iter().position(|s| s != &checksums[0]) {
            out.fail(Some(i as u64), json!({"type": "logits_checksum_mismatch", "step": i, "expected": checksums[0], "actual": checksums[i],
                "hint": "the same prompts gave different logits bits: nondeterministic kernels"}));
        }
    }
    if let (Some(want), Some(got)) = (&c.expected_checksum, checksums.first()) {
        if want != got {
            out.fail(
                None,
                json!({"type": "logits_checksum_mismatch", "expected": want, "actual": got,
                "hint": "logits differ from the recipe's expected_logits_checksum"}),
            );
        }
    }
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let decode_s = tally.decode_ms.iter().sum::<f64>() / 1e3;
    let prefill_s = tally.prefill_ms.iter().sum::<f64>() / 1e3;
    let prompt_tokens =
        (c.batch_size * c.prompt_len) as f64 * if c.continuous { 1.0 } else { c.steps as f64 };
    let tps = if tally.decoded > 0 && decode_s > 0.0 {
        Some(tally.decoded as f64 / decode_s)
    } else {
        (prefill_s > 0.0).then(|| prompt_tokens / prefill_s)
    };
    let timed_steps: Vec<f64> = out
        .step_times_ms
        .iter()
        .copied()
        .filter(|&x| x > 0.0)
        .collect();
    let mm = &mut out.metrics;
    mm.insert(
        "mode".into(),
        json!(if c.continuous {
            "continuous_batch"
        } else {
            "offline_batch"
        }),
    );
    mm.insert("device".into(), json!(device::device_name(dev)));
    mm.insert("dtype".into(), json!(dtype_name(c.dtype)));
    mm.insert("kv_cache".into(), json!(c.kv_cache));
    mm.insert(
        "prefill_latency_ms".into(),
        json!(if c.continuous {
            None
        } else {
            mean(&tally.prefill_ms)
        }),
    );
    mm.insert("decode_latency_ms".into(), json!(mean(&tally.decode_ms)));
    mm.insert("tokens_per_sec".into(), json!(tps));
    mm.insert("decoded_tokens".into(), json!(tally.decoded));
    mm.insert(
        "step_time_p50".into(),
        json!(percentile(&timed_steps, 50.0)),
    );
    mm.insert(
        "step_time_p99".into(),
        json!(percentile(&timed_steps, 99.0)),
    );
    mm.insert("logits_checksum".into(), json!(checksums.first()));
    mm.insert("deterministic".into(), json!(c.deterministic));
    mm.insert(
        "attention_backend".into(),
        json!(if c.deterministic && c.attention_backend == "auto" {
            "math"
        } else {
            c.attention_backend.as_str()
        }),
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn trial(v: Value) -> Trial {
        Trial {
            steps: None,
            config: v.as_object().unwrap().clone(),
            trial_dir: ".".into(),
            cell: String::new(),
            trial_index: 0,
        }
    }

    #[test]
    fn defaults_and_mode_reconciliation() {
        let c = parse(&trial(json!({}))).unwrap();
        assert_eq!(
            (
                c.batch_size,
                c.prompt_len,
                c.generate_tokens,
                c.max_active,
                c.continuous
            ),
            (4, 128, 32, 8, false)
        );
        assert_eq!((c.model.hidden, c.model.layers, c.model.heads), (512, 4, 8));
        let c = parse(&trial(
            json!({"serving": {"continuous_batch": {"enabled": true}}}),
        ))
        .unwrap();
        assert!(c.continuous);
    }

    #[test]
    fn unknown_keys_are_errors() {
        let e = parse(&trial(
            json!({"scheduler": "offline_batch", "request": {"max_new_tokens": 3}}),
        ))
        .unwrap_err();
        assert!(
            e.error.contains("request.max_new_tokens") && e.error.contains("scheduler"),
            "{}",
            e.error
        );
        let e = parse(&trial(
            json!({"mode": "continuous_batch", "request": {"generate_tokens": 0}}),
        ))
        .unwrap_err();
        assert!(e.error.contains("generate_tokens >= 1"), "{}", e.error);
    }

    /// The scheduler finishes every request, and its logits equal an offline batch's.
    #[test]
    fn continuous_matches_offline() {
        let base = json!({"dtype": "fp32", "device": "cpu", "request": {"batch_size": 3, "prompt_len": 5, "generate_tokens": 4},
            "model": {"hidden_size": 32, "num_layers": 2, "num_heads": 4, "ffn_size": 64, "vocab_size": 40}});
        let off = parse(&trial(base.clone())).unwrap();
        let mut cb = base.clone();
        cb["mode"] = json!("continuous_batch");
        cb["serving"] = json!({"continuous_batch": {"max_active_requests": 2}});
        let on = parse(&trial(cb)).unwrap();
        let (_vs, m) = build(&off.model, 1, Kind::Float, Device::Cpu);
        let _g = tch::no_grad_guard();
        let prompts = Tensor::randint(40, [3, 5], (Kind::Int64, Device::Cpu));
        let a = offline_step(&off, &m, &prompts, Device::Cpu, &mut Tally::default());
        let (ticks, unfinished, b) =
            continuous(&on, &m, &prompts, Device::Cpu, 20, &mut Tally::default());
        assert_eq!(unfinished, 0);
        assert!(ticks.len() < 20);
        assert!(
            a.allclose(&b, 1e-4, 1e-4, false),
            "offline and continuous logits differ"
        );
        let (_, unfinished, _) =
            continuous(&on, &m, &prompts, Device::Cpu, 2, &mut Tally::default());
        assert!(unfinished > 0);
    }
}
