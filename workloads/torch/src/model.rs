//! The models AORTA's torch workloads train and serve (spec §8.2–8.4), written once for all
//! three: an MLP (embed → [Linear+GELU]×L → vocab head), a pre-LayerNorm decoder transformer
//! (AORTA's `RepeatedBlockModel`) and its top-1 mixture-of-experts variant. The transformer
//! carries a real KV cache so decoding does not recompute the prefix, and an optional planted
//! source of nondeterminism for llm_determinism.

use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    Mlp,
    Transformer,
}

/// A reduction whose CUDA kernel adds with atomics, so its summation order (and the bits of
/// the result) can change between identical runs unless deterministic algorithms are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    None,
    IndexAdd,
    ScatterAdd,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelCfg {
    pub kind: ModelKind,
    pub hidden: i64,
    pub layers: i64,
    pub heads: i64,
    pub ffn: i64,
    pub vocab: i64,
    /// 1 = dense FFN; ≥2 = top-1 routed experts.
    pub experts: i64,
    /// Longest sequence (positions) the model sees.
    pub max_seq: i64,
    pub plant: Plant,
}

struct Ffn {
    up: nn::Linear,
    down: nn::Linear,
}

impl Ffn {
    fn new(p: nn::Path, h: i64, f: i64) -> Self {
        Ffn {
            up: nn::linear(&p / "up", h, f, Default::default()),
            down: nn::linear(&p / "down", f, h, Default::default()),
        }
    }
    fn forward(&self, x: &Tensor) -> Tensor {
        self.down.forward(&self.up.forward(x).gelu("none"))
    }
}

enum Mix {
    Dense(Ffn),
    /// Top-1 routing: each token goes to the expert with the highest router score, scaled by
    /// that score's softmax probability (so the router gets a gradient).
    Moe {
        router: nn::Linear,
        experts: Vec<Ffn>,
    },
}

enum Block {
    Mlp(nn::Linear),
    Tx(Box<TxBlock>),
}

struct TxBlock {
    ln1: nn::LayerNorm,
    qkv: nn::Linear,
    out: nn::Linear,
    ln2: nn::LayerNorm,
    mix: Mix,
}

/// Keys and values of every layer for `slots` sequences of up to `cap` positions.
pub struct KvCache {
    pub k: Vec<Tensor>,
    pub v: Vec<Tensor>,
    pub cap: i64,
}

/// How attention sees the sequence.
pub enum Attend<'a> {
    /// Causal attention over the given tokens only (training, full recompute).
    Full,
    /// Bidirectional attention (encoder models: no generation).
    Encoder,
    /// Prompt of every row starts at position 0 and is written into `slots` of the cache.
    Prefill {
        cache: &'a mut KvCache,
        slots: &'a Tensor,
    },
    /// One new token per row at position `lens[i]` of cache slot `slots[i]`.
    Decode {
        cache: &'a mut KvCache,
        slots: &'a Tensor,
        lens: &'a Tensor,
    },
    /// One new token per row, every row at position `pos`, row i in cache slot i (a static
    /// batch): the cache is written and read as slices, attention needs no mask, so the fused
    /// SDPA kernels apply, where `Decode` gathers every slot's whole cache and masks it.
    DecodeAt { cache: &'a mut KvCache, pos: i64 },
}

pub struct Model {
    pub cfg: ModelCfg,
    embed: nn::Embedding,
    pos: Option<nn::Embedding>,
    blocks: Vec<Block>,
    ln_f: nn::LayerNorm,
    head: nn::Linear,
}

impl Model {
    /// Parameters are created in fp32 (seeded by the caller) and cast by the caller's VarStore.
    pub fn new(p: &nn::Path, cfg: &ModelCfg) -> Self {
        let (h, f) = (cfg.hidden, cfg.ffn);
        let embed = nn::embedding(p / "embed", cfg.vocab, h, Default::default());
        let pos = (cfg.kind == ModelKind::Transformer)
            .then(|| nn::embedding(p / "pos", cfg.max_seq, h, Default::default()));
        let blocks = (0..cfg.layers)
            .map(|i| {
                let b = p / "blocks" / i;
                match cfg.kind {
                    ModelKind::Mlp => Block::Mlp(nn::linear(&b / "fc", h, h, Default::default())),
                    ModelKind::Transformer => Block::Tx(Box::new(TxBlock {
                        ln1: nn::layer_norm(&b / "ln1", vec![h], Default::default()),
                        qkv: nn::linear(&b / "qkv", h, 3 * h, Default::default()),
                        out: nn::linear(&b / "out", h, h, Default::default()),
                        ln2: nn::layer_norm(&b / "ln2", vec![h], Default::default()),
                        mix: if cfg.experts >= 2 {
                            Mix::Moe {
                                router: nn::linear(
                                    &b / "router",
                                    h,
                                    cfg.experts,
                                    Default::default(),
                                ),
                                experts: (0..cfg.experts)
                                    .map(|e| Ffn::new(&b / "experts" / e, h, f))
                                    .collect(),
                            }
                        } else {
                            Mix::Dense(Ffn::new(&b / "ffn", h, f))
                        },
                    })),
                }
            })
            .collect();
        Model {
            cfg: cfg.clone(),
            embed,
            pos,
            blocks,
            ln_f: nn::layer_norm(p / "ln_f", vec![h], Default::default()),
            head: nn::linear(p / "head", h, cfg.vocab, Default::default()),
        }
    }

    pub fn new_cache(&self, slots: i64, cap: i64, kind: Kind, device: Device) -> KvCache {
        let dh = self.cfg.hidden / self.cfg.heads;
        let z = || Tensor::zeros([slots, self.cfg.heads, cap, dh], (kind, device));
        KvCache {
            k: (0..self.cfg.layers).map(|_| z()).collect(),
            v: (0..self.cfg.layers).map(|_| z()).collect(),
            cap,
        }
    }

    /// Logits `[B, T, vocab]` for tokens `[B, T]`. `hook(i, input, output)` sees every block.
    pub fn forward(
        &self,
        tokens: &Tensor,
        mut attend: Attend,
        hook: &mut dyn FnMut(usize, &Tensor, &Tensor),
    ) -> Tensor {
        let (b, t) = tokens.size2().expect("tokens must be [batch, seq]");
        let mut x = self.embed.forward(tokens);
        if let Some(pos) = &self.pos {
            let positions = match &attend {
                Attend::Decode { lens, .. } => lens.view([b, 1]),
                Attend::DecodeAt { pos, .. } => {
                    Tensor::arange_start(*pos, *pos + t, (Kind::Int64, tokens.device()))
                        .view([1, t])
                }
                _ => Tensor::arange(t, (Kind::Int64, tokens.device())).view([1, t]),
            };
            x += pos.forward(&positions);
        }
        for (i, block) in self.blocks.iter().enumerate() {
            let y = match block {
                Block::Mlp(fc) => fc.forward(&x).gelu("none"),
                Block::Tx(tx) => {
                    let TxBlock {
                        ln1,
                        qkv,
                        out,
                        ln2,
                        mix,
                    } = tx.as_ref();
                    let a = self.attention(i, &qkv.forward(&ln1.forward(&x)), &mut attend);
                    let x1 = &x + out.forward(&a);
                    let m = ln2.forward(&x1);
                    let y = x1
                        + match mix {
                            Mix::Dense(ffn) => ffn.forward(&m),
                            Mix::Moe { router, experts } => moe(&m, router, experts),
                        };
                    plant(y, self.cfg.plant)
                }
            };
            hook(i, &x, &y);
            x = y;
        }
        self.head.forward(&self.ln_f.forward(&x))
    }

    fn attention(&self, layer: usize, qkv: &Tensor, attend: &mut Attend) -> Tensor {
        let (b, t, _) = qkv.size3().expect("qkv is [B, T, 3H]");
        let (nh, dh) = (self.cfg.heads, self.cfg.hidden / self.cfg.heads);
        let qkv = qkv.view([b, t, 3, nh, dh]).permute([2, 0, 3, 1, 4]);
        let (q, k, v) = (qkv.get(0), qkv.get(1), qkv.get(2));
        let o = match attend {
            Attend::Full => Tensor::scaled_dot_product_attention(
                &q,
                &k,
                &v,
                None::<Tensor>,
                0.0,
                true,
                None,
                false,
            ),
            Attend::Encoder => Tensor::scaled_dot_product_attention(
                &q,
                &k,
                &v,
                None::<Tensor>,
                0.0,
                false,
                None,
                false,
            ),
            Attend::Prefill { cache, slots } => {
                let _ = cache.k[layer].narrow(2, 0, t).index_copy_(0, slots, &k);
                let _ = cache.v[layer].narrow(2, 0, t).index_copy_(0, slots, &v);
                Tensor::scaled_dot_product_attention(
                    &q,
                    &k,
                    &v,
                    None::<Tensor>,
                    0.0,
                    true,
                    None,
                    false,
                )
            }
            Attend::DecodeAt { cache, pos } => {
                let pos = *pos;
                cache.k[layer].narrow(0, 0, b).narrow(2, pos, t).copy_(&k);
                cache.v[layer].narrow(0, 0, b).narrow(2, pos, t).copy_(&v);
                let keys = cache.k[layer].narrow(0, 0, b).narrow(2, 0, pos + t);
                let vals = cache.v[layer].narrow(0, 0, b).narrow(2, 0, pos + t);
                Tensor::scaled_dot_product_attention(
                    &q,
                    &keys,
                    &vals,
                    None::<Tensor>,
                    0.0,
                    false,
                    None,
                    false,
                )
            }
            Attend::Decode { cache, slots, lens } => {
                let idx = [
                    Some(slots.shallow_clone()),
                    None,
                    Some(lens.shallow_clone()),
                ];
                let _ = cache.k[layer].index_put_(&idx, &k.squeeze_dim(2), false);
                let _ = cache.v[layer].index_put_(&idx, &v.squeeze_dim(2), false);
                let keys = cache.k[layer].index_select(0, slots);
                let vals = cache.v[layer].index_select(0, slots);
                let cap = cache.cap;
                let mask = Tensor::arange(cap, (Kind::Int64, q.device()))
                    .view([1, cap])
                    .le_tensor(&lens.view([b, 1]))
                    .view([b, 1, 1, cap]);
                Tensor::scaled_dot_product_attention(
                    &q,
                    &keys,
                    &vals,
                    Some(mask),
                    0.0,
                    false,
                    None,
                    false,
                )
            }
        };
        o.transpose(1, 2).reshape([b, t, nh * dh])
    }
}

fn moe(x: &Tensor, router: &nn::Linear, experts: &[Ffn]) -> Tensor {
    let size = x.size();
    let h = *size.last().expect("hidden dim");
    let flat = x.reshape([-1, h]);
    let probs = router.forward(&flat).softmax(-1, Kind::Float);
    let (gate, choice) = probs.max_dim(-1, false);
    let mut out = flat.zeros_like();
    for (e, ffn) in experts.iter().enumerate() {
        let idx = choice.eq(e as i64).nonzero().squeeze_dim(1);
        if idx.numel() == 0 {
            continue;
        }
        let y = ffn.forward(&flat.index_select(0, &idx))
            * gate.index_select(0, &idx).unsqueeze(1).to_kind(flat.kind());
        out = out.index_add(0, &idx, &y);
    }
    out.view(size.as_slice())
}

/// Mixes a per-bucket sum of the activations back in: every bucket receives many rows, so
/// on CUDA the atomic adds race and the sum's rounding depends on their order.
fn plant(y: Tensor, plant: Plant) -> Tensor {
    if plant == Plant::None {
        return y;
    }
    let size = y.size();
    let h = *size.last().expect("hidden dim");
    let flat = y.reshape([-1, h]);
    let n = flat.size()[0];
    let buckets = 4.min(n);
    let bucket = Tensor::arange(n, (Kind::Int64, y.device())).remainder(buckets);
    let zeros = Tensor::zeros([buckets, h], (y.kind(), y.device()));
    let pooled = match plant {
        Plant::IndexAdd => zeros.index_add(0, &bucket, &flat),
        _ => zeros.scatter_add(0, &bucket.unsqueeze(1).expand([n, h], false), &flat),
    };
    (flat + pooled.index_select(0, &bucket) * (1.0 / n as f64)).view(size.as_slice())
}

/// Fp32 cross-entropy of logits `[B, T, V]` against next tokens `[B, T]`.
pub fn loss(logits: &Tensor, targets: &Tensor) -> Tensor {
    let v = *logits.size().last().expect("vocab dim");
    logits
        .to_kind(Kind::Float)
        .reshape([-1, v])
        .cross_entropy_for_logits(&targets.reshape([-1]))
}

/// Weights in matrix multiplies, counting one expert per token for MoE (the FLOPs formula's N).
pub fn active_matmul_params(c: &ModelCfg) -> i64 {
    let (h, f) = (c.hidden, c.ffn);
    let per_layer = match c.kind {
        ModelKind::Mlp => h * h,
        ModelKind::Transformer => {
            4 * h * h + 2 * h * f + if c.experts >= 2 { h * c.experts } else { 0 }
        }
    };
    c.layers * per_layer + h * c.vocab
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(kind: ModelKind, experts: i64) -> ModelCfg {
        ModelCfg {
            kind,
            hidden: 32,
            layers: 2,
            heads: 4,
            ffn: 64,
            vocab: 50,
            experts,
            max_seq: 16,
            plant: Plant::None,
        }
    }

    /// Decoding token by token with the cache gives the logits a full recompute gives.
    #[test]
    fn kv_cache_matches_full_recompute() {
        tch::manual_seed(0);
        for experts in [1, 3] {
            let vs = nn::VarStore::new(Device::Cpu);
            let m = Model::new(&vs.root(), &cfg(ModelKind::Transformer, experts));
            let tokens = Tensor::randint(50, [2, 10], (Kind::Int64, Device::Cpu));
            let _g = tch::no_grad_guard();
            let full = m.forward(&tokens, Attend::Full, &mut |_, _, _| {});
            let mut cache = m.new_cache(2, 16, Kind::Float, Device::Cpu);
            let slots = Tensor::arange(2, (Kind::Int64, Device::Cpu));
            let pre = m.forward(
                &tokens.narrow(1, 0, 6),
                Attend::Prefill {
                    cache: &mut cache,
                    slots: &slots,
                },
                &mut |_, _, _| {},
            );
            assert!(pre.allclose(&full.narrow(1, 0, 6), 1e-5, 1e-5, false));
            for p in 6..10 {
                let lens = Tensor::full([2], p, (Kind::Int64, Device::Cpu));
                let step = m.forward(
                    &tokens.narrow(1, p, 1),
                    Attend::Decode {
                        cache: &mut cache,
                        slots: &slots,
                        lens: &lens,
                    },
                    &mut |_, _, _| {},
                );
                let want = full.narrow(1, p, 1);
                let diff = (&step - &want).abs().max().double_value(&[]);
                assert!(
                    diff < 1e-4,
                    "experts {experts} position {p}: max diff {diff}"
                );
            }
        }
    }

    #[test]
    fn shapes_and_hooks() {
        for kind in [ModelKind::Mlp, ModelKind::Transformer] {
            let vs = nn::VarStore::new(Device::Cpu);
            let m = Model::new(&vs.root(), &cfg(kind, 1));
            let tokens = Tensor::randint(50, [3, 5], (Kind::Int64, Device::Cpu));
            let mut seen = Vec::new();
            let logits = m.forward(&tokens, Attend::Full, &mut |i, _, y| {
                seen.push((i, y.size()))
            });
            assert_eq!(logits.size(), vec![3, 5, 50]);
            assert_eq!(seen, vec![(0, vec![3, 5, 32]), (1, vec![3, 5, 32])]);
            let l = loss(&logits, &tokens).double_value(&[]);
            assert!(l.is_finite() && l > 0.0);
        }
    }

    #[test]
    fn active_params_formula() {
        let c = cfg(ModelKind::Transformer, 1);
        assert_eq!(
            active_matmul_params(&c),
            2 * (4 * 32 * 32 + 2 * 32 * 64) + 32 * 50
        );
        let m = cfg(ModelKind::Transformer, 4);
        assert_eq!(
            active_matmul_params(&m) - active_matmul_params(&c),
            2 * 32 * 4
        );
        assert_eq!(
            active_matmul_params(&cfg(ModelKind::Mlp, 1)),
            2 * 32 * 32 + 32 * 50
        );
    }
}
