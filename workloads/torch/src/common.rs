//! What the three workloads share: reading the model block, building a seeded model in a
//! dtype on a device, and synthetic token batches.

use tch::{nn, Device, Kind, Tensor};

use crate::config::Reader;
use crate::model::{Model, ModelCfg, ModelKind, Plant};

/// Defaults of one workload's `model` block (they differ between AORTA's workloads).
pub struct ModelDefaults {
    pub kind: &'static str,
    pub hidden: u64,
    pub layers: u64,
    pub heads: u64,
    pub ffn: u64,
    pub experts: u64,
}

/// Reads `kind`, `hidden_size`, `num_layers`, `num_heads`, `ffn_size`, `vocab_size`,
/// `num_experts` (and `moe.num_experts`) from `r`, with `kinds` the accepted spellings.
pub fn read_model(
    r: &mut Reader,
    d: &ModelDefaults,
    kinds: &[&str],
    max_seq: i64,
) -> (ModelCfg, String) {
    let kind_name = r.choice("kind", d.kind, kinds);
    let hidden = r.uint("hidden_size", d.hidden, 1) as i64;
    let layers = r.uint("num_layers", d.layers, 1) as i64;
    let heads = r.uint("num_heads", d.heads, 1) as i64;
    let ffn = r.uint("ffn_size", d.ffn, 1) as i64;
    let vocab = r.uint("vocab_size", 32000, 2) as i64;
    let mut experts = r.uint("num_experts", d.experts, 1) as i64;
    let mut moe = r.sub("moe");
    if let Some(n) = moe.take("num_experts") {
        match n.as_u64().filter(|&n| n >= 1) {
            Some(n) => experts = n as i64,
            None => moe.invalid("num_experts", format!("{n} is not an integer >= 1")),
        }
    }
    moe.ignore("enabled");
    moe.done();
    let kind = if kind_name == "mlp" {
        ModelKind::Mlp
    } else {
        ModelKind::Transformer
    };
    let experts = match kind_name.as_str() {
        "moe_transformer" => {
            if experts < 2 {
                r.invalid(
                    "num_experts",
                    format!("moe_transformer needs num_experts >= 2, got {experts}"),
                );
            }
            experts
        }
        "mlp" => 1,
        _ => experts,
    };
    if kind == ModelKind::Transformer && hidden % heads != 0 {
        r.invalid(
            "hidden_size",
            format!("{hidden} is not divisible by num_heads {heads}"),
        );
    }
    let cfg = ModelCfg {
        kind,
        hidden,
        layers,
        heads,
        ffn,
        vocab,
        experts,
        max_seq,
        plant: Plant::None,
    };
    (cfg, kind_name)
}

/// A model with parameters drawn from `seed`, cast to `kind`, on `device`.
pub fn build(cfg: &ModelCfg, seed: u64, kind: Kind, device: Device) -> (nn::VarStore, Model) {
    crate::device::seed(seed);
    let mut vs = nn::VarStore::new(device);
    let m = Model::new(&vs.root(), cfg);
    vs.set_kind(kind);
    (vs, m)
}

pub fn parameter_count(vs: &nn::VarStore) -> i64 {
    vs.trainable_variables()
        .iter()
        .map(Tensor::numel)
        .map(|n| n as i64)
        .sum()
}

/// `[batch, seq + 1]` uniform tokens from libtorch's CPU generator (same on every device),
/// split into inputs and next-token targets.
pub fn token_batch(batch: i64, seq: i64, vocab: i64, device: Device) -> (Tensor, Tensor) {
    let t = Tensor::randint(vocab, [batch, seq + 1], (Kind::Int64, Device::Cpu)).to_device(device);
    (t.narrow(1, 0, seq), t.narrow(1, 1, seq))
}
