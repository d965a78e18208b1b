//! The known patterns every buffer carries, and their verification. Values are small integers,
//! exact in bf16/fp16/fp32, and change from one iteration to the next, so a consumer that read
//! a buffer before its producer wrote it sees last iteration's value (or zero) and is caught.
//! Tolerance as AORTA: |actual − expected| ≤ atol + rtol·|expected|, rtol = atol = 1e-3.

use serde::Serialize;
use serde_json::{json, Value};

pub const RTOL: f64 = 1e-3;
pub const ATOL: f64 = 1e-3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    Bf16,
    F16,
    F32,
}

impl Dtype {
    pub fn parse(s: &str) -> Option<Dtype> {
        Some(match s {
            "bfloat16" | "bf16" => Dtype::Bf16,
            "float16" | "fp16" | "half" => Dtype::F16,
            "float32" | "fp32" | "float" => Dtype::F32,
            _ => return None,
        })
    }

    pub fn bytes(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::Bf16 | Dtype::F16 => 2,
        }
    }

    /// The element's bit pattern (little-endian in memory), rounded to nearest even.
    pub fn encode(self, x: f32) -> u32 {
        match self {
            Dtype::F32 => x.to_bits(),
            Dtype::Bf16 => {
                let b = x.to_bits();
                if x.is_nan() {
                    return 0x7fc0;
                }
                (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) & 0xffff
            }
            Dtype::F16 => f32_to_f16(x) as u32,
        }
    }

    pub fn decode(self, bits: u32) -> f32 {
        match self {
            Dtype::F32 => f32::from_bits(bits),
            Dtype::Bf16 => f32::from_bits((bits & 0xffff) << 16),
            Dtype::F16 => f16_to_f32(bits as u16),
        }
    }

    /// `x` as the dtype stores it.
    pub fn round(self, x: f32) -> f32 {
        self.decode(self.encode(x))
    }

    /// Element `i` of a raw buffer.
    pub fn get(self, bytes: &[u8], i: usize) -> f32 {
        let w = self.bytes();
        let s = &bytes[i * w..i * w + w];
        let bits = if w == 4 {
            u32::from_le_bytes([s[0], s[1], s[2], s[3]])
        } else {
            u16::from_le_bytes([s[0], s[1]]) as u32
        };
        self.decode(bits)
    }

    /// A buffer of `n` elements all equal to `x`.
    pub fn fill(self, n: usize, x: f32) -> Vec<u8> {
        let bits = self.encode(x);
        let one: Vec<u8> = if self.bytes() == 4 {
            bits.to_le_bytes().to_vec()
        } else {
            (bits as u16).to_le_bytes().to_vec()
        };
        one.repeat(n)
    }
}

fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let r = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let r = if rem > half || (rem == half && r & 1 == 1) {
            r + 1
        } else {
            r
        };
        return sign | r as u16;
    }
    let r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    let r = if rem > 0x1000 || (rem == 0x1000 && r & 1 == 1) {
        r + 1
    } else {
        r
    };
    sign | r as u16
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let man = (h & 0x3ff) as f32;
    match exp {
        0 => sign * man * 2f32.powi(-24),
        0x1f if man == 0.0 => sign * f32::INFINITY,
        0x1f => f32::NAN,
        _ => sign * (1.0 + man / 1024.0) * 2f32.powi(exp - 15),
    }
}

/// Patterns, by buffer role. `salt` separates layers/buckets so a buffer mixed up between two
/// of them is caught too.
pub mod value {
    /// Host-to-device batch on `rank` at `iter` (AORTA: iteration % 1000; kept small so bf16
    /// holds it exactly).
    pub fn h2d(rank: u32, iter: u64) -> f32 {
        (1 + (iter + 7 * rank as u64) % H2D_PERIOD) as f32
    }

    /// Iterations after which `h2d` repeats.
    pub const H2D_PERIOD: u64 = 250;
    /// Iterations (plus salt) after which `reduce_in` / `reduce_out` repeat.
    pub const REDUCE_PERIOD: u64 = 3;

    /// Iterations (plus salt) after which `from_src` repeats at this world size (the values
    /// stay at most 256, exact in bf16, up to world size 128).
    pub fn src_period(world: u32) -> u64 {
        (255 / world.max(1) as u64).max(2)
    }

    /// What `src` sends to everyone (all_to_all chunks, all_gather shards): distinct per source
    /// rank and per iteration.
    pub fn from_src(src: u32, world: u32, iter: u64, salt: u64) -> f32 {
        (1 + src as u64 + world as u64 * ((iter + salt) % src_period(world))) as f32
    }

    fn mult(iter: u64, salt: u64) -> f32 {
        (1 + (iter + salt) % REDUCE_PERIOD) as f32
    }

    /// A reduction's input on `rank` (AORTA: rank + 1), scaled by an iteration tag.
    pub fn reduce_in(rank: u32, iter: u64, salt: u64) -> f32 {
        (rank + 1) as f32 * mult(iter, salt)
    }

    /// The reduction's sum over `world` ranks: Σ(rank + 1) · tag.
    pub fn reduce_out(world: u32, iter: u64, salt: u64) -> f32 {
        (world * (world + 1) / 2) as f32 * mult(iter, salt)
    }
}

/// One region of a buffer that must hold `expected` (chunk `src_rank` of a collective).
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    pub offset: usize,
    pub len: usize,
    pub expected: f32,
    pub src_rank: Option<u32>,
}

/// A detected corruption, AORTA's record plus where and how much.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Corruption {
    #[serde(rename = "type")]
    pub kind: String,
    pub rank: u32,
    pub iteration: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src_rank: Option<u32>,
    pub expected: f64,
    pub actual: f64,
    /// The buffer checked and the first bad element's index in it.
    pub buffer: String,
    pub first_index: usize,
    pub mismatches: usize,
    pub elements: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<u32>,
}

impl Corruption {
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or_else(|_| json!({}));
        let hint = format!(
            "{} on rank {} at iteration {}: expected {} got {} in {}/{} elements of {}",
            self.kind,
            self.rank,
            self.iteration,
            self.expected,
            self.actual,
            self.mismatches,
            self.elements,
            self.buffer
        );
        if let Some(o) = v.as_object_mut() {
            o.insert("hint".into(), hint.into());
        }
        v
    }
}

pub fn close(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() <= ATOL + RTOL * expected.abs()
}

/// Check each region of `bytes`; one record per region that has any bad element.
pub fn verify(
    bytes: &[u8],
    dtype: Dtype,
    regions: &[Region],
    kind: &str,
    buffer: &str,
    rank: u32,
    iteration: u64,
) -> Vec<Corruption> {
    let mut out = Vec::new();
    for r in regions {
        let expected = dtype.round(r.expected) as f64;
        let mut first: Option<(usize, f64)> = None;
        let mut bad = 0;
        for i in r.offset..r.offset + r.len {
            let a = dtype.get(bytes, i) as f64;
            if !close(a, expected) {
                bad += 1;
                first.get_or_insert((i, a));
            }
        }
        if let Some((i, a)) = first {
            out.push(Corruption {
                kind: kind.into(),
                rank,
                iteration,
                src_rank: r.src_rank,
                expected,
                actual: a,
                buffer: buffer.into(),
                first_index: i,
                mismatches: bad,
                elements: r.len,
                layer: None,
            });
        }
    }
    out
}

/// AORTA's per-layer kernel checksum: the sum of the buffer's elements viewed as same-width
/// integers (wrapping).
pub fn checksum(bytes: &[u8], dtype: Dtype) -> u64 {
    let w = dtype.bytes();
    bytes.chunks_exact(w).fold(0u64, |acc, c| {
        let v = if w == 4 {
            u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u64
        } else {
            u16::from_le_bytes([c[0], c[1]]) as u64
        };
        acc.wrapping_add(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_integers_round_trip_in_every_dtype() {
        for d in [Dtype::Bf16, Dtype::F16, Dtype::F32] {
            for x in 0..=256 {
                assert_eq!(d.round(x as f32), x as f32, "{d:?} {x}");
            }
            assert_eq!(d.round(-3.0), -3.0);
        }
        assert_eq!(Dtype::Bf16.encode(1.0), 0x3f80);
        assert_eq!(Dtype::F16.encode(1.0), 0x3c00);
        assert_eq!(Dtype::F16.encode(65504.0), 0x7bff);
        assert_eq!(Dtype::F16.decode(0x0001), 2f32.powi(-24));
        // bf16 keeps 8 significant bits: 257 rounds to even (256).
        assert_eq!(Dtype::Bf16.round(257.0), 256.0);
    }

    #[test]
    fn patterns_change_every_iteration_and_separate_ranks() {
        for world in [1, 2, 8, 64] {
            for it in 0..1000u64 {
                for src in 0..world {
                    let v = value::from_src(src, world, it, 0);
                    assert_ne!(v, value::from_src(src, world, it + 1, 0));
                    assert!(v >= 1.0 && Dtype::Bf16.round(v) == v || world > 8);
                    if src > 0 {
                        assert_ne!(v, value::from_src(src - 1, world, it, 0));
                    }
                }
                assert_ne!(value::h2d(0, it), value::h2d(0, it + 1));
                assert_ne!(
                    value::reduce_out(world, it, 0),
                    value::reduce_out(world, it + 1, 0)
                );
            }
        }
        let sum: f32 = (0..4).map(|r| value::reduce_in(r, 5, 1)).sum();
        assert_eq!(sum, value::reduce_out(4, 5, 1));
    }

    #[test]
    fn verify_reports_type_rank_source_expected_and_actual() {
        let d = Dtype::Bf16;
        let mut b = d.fill(8, 3.0);
        b.extend(d.fill(8, 4.0));
        let regions = [
            Region {
                offset: 0,
                len: 8,
                expected: 3.0,
                src_rank: Some(0),
            },
            Region {
                offset: 8,
                len: 8,
                expected: 5.0,
                src_rank: Some(1),
            },
        ];
        let c = verify(&b, d, &regions, "all_to_all", "a2a_recv", 1, 42);
        assert_eq!(c.len(), 1);
        let c = &c[0];
        assert_eq!(
            (c.kind.as_str(), c.rank, c.iteration, c.src_rank),
            ("all_to_all", 1, 42, Some(1))
        );
        assert_eq!(
            (c.expected, c.actual, c.first_index, c.mismatches),
            (5.0, 4.0, 8, 8)
        );
        let j = c.to_json();
        assert_eq!(j["type"], "all_to_all");
        assert!(j["hint"].as_str().unwrap().contains("expected 5 got 4"));
        assert!(verify(&b, d, &regions[..1], "x", "y", 0, 0).is_empty());
    }

    #[test]
    fn tolerance_is_relative_and_absolute() {
        assert!(close(1000.9, 1000.0));
        assert!(!close(1001.5, 1000.0));
        assert!(close(0.0009, 0.0));
        assert!(!close(0.002, 0.0));
        let mut b = Dtype::F32.fill(4, 100.0);
        b[4..8].copy_from_slice(&100.05f32.to_le_bytes());
        let r = [Region {
            offset: 0,
            len: 4,
            expected: 100.0,
            src_rank: None,
        }];
        assert!(verify(&b, Dtype::F32, &r, "t", "b", 0, 0).is_empty());
        b[4..8].copy_from_slice(&100.5f32.to_le_bytes());
        assert_eq!(verify(&b, Dtype::F32, &r, "t", "b", 0, 0)[0].first_index, 1);
    }

    #[test]
    fn checksum_sums_integer_views() {
        assert_eq!(checksum(&Dtype::Bf16.fill(3, 1.0), Dtype::Bf16), 3 * 0x3f80);
        assert_eq!(
            checksum(&Dtype::F32.fill(2, 1.0), Dtype::F32),
            2 * 0x3f80_0000
        );
    }
}
