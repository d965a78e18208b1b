//! Percentiles and FLOPs formulas for the metrics.

use crate::model::{active_matmul_params, ModelCfg, ModelKind};

/// Percentile with linear interpolation between order statistics (numpy's default), as AORTA.
pub fn percentile(xs: &[f64], p: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = (p / 100.0) * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(v[lo] + (v[hi] - v[lo]) * (pos - lo as f64))
}

/// Forward FLOPs per token: 2 per matmul weight (one expert for MoE) plus causal-agnostic
/// attention score and value products, 4·layers·seq·hidden (the PaLM/Megatron convention).
pub fn forward_flops_per_token(c: &ModelCfg, seq: i64) -> f64 {
    let attn = match c.kind {
        ModelKind::Transformer => 4 * c.layers * seq * c.hidden,
        ModelKind::Mlp => 0,
    };
    (2 * active_matmul_params(c) + attn) as f64
}

/// A training step is forward + backward ≈ 3 forwards: 6N + 12·L·s·h per token.
pub fn train_step_flops(c: &ModelCfg, batch: i64, seq: i64) -> f64 {
    3.0 * forward_flops_per_token(c, seq) * (batch * seq) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Plant;

    #[test]
    fn percentiles_interpolate() {
        let xs = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(percentile(&xs, 50.0), Some(2.5));
        assert_eq!(percentile(&xs, 0.0), Some(1.0));
        assert_eq!(percentile(&xs, 100.0), Some(4.0));
        assert!((percentile(&xs, 99.0).unwrap() - 3.97).abs() < 1e-12);
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn flops_match_6n_plus_attention() {
        let c = ModelCfg {
            kind: ModelKind::Transformer,
            hidden: 2048,
            layers: 24,
            heads: 16,
            ffn: 5632,
            vocab: 32000,
            experts: 1,
            max_seq: 512,
            plant: Plant::None,
        };
        let n: i64 = 24 * (4 * 2048 * 2048 + 2 * 2048 * 5632) + 2048 * 32000;
        let want = (6 * n + 12 * 24 * 512 * 2048) as f64 * 512.0;
        assert_eq!(train_step_flops(&c, 1, 512), want);
        let mlp = ModelCfg {
            kind: ModelKind::Mlp,
            ..c
        };
        assert_eq!(
            forward_flops_per_token(&mlp, 512),
            (2 * (24 * 2048 * 2048 + 2048 * 32000_i64)) as f64
        );
    }
}
