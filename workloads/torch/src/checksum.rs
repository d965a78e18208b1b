//! Bit-level tensor checksums: two runs agree only if every bit of every element agrees
//! (so -0.0 ≠ 0.0 and NaN payloads count). Integer sums wrap identically in any order, so the
//! checksum itself is deterministic on every device.

use tch::{Kind, Tensor};

/// A 64-bit checksum of the tensor's raw bits, as `0x%016x`.
pub fn tensor_checksum(t: &Tensor) -> String {
    format!("{:#018x}", checksum_u64(t))
}

pub fn checksum_u64(t: &Tensor) -> u64 {
    let _g = tch::no_grad_guard();
    let t = t.detach().contiguous().reshape([-1]);
    let bits = match t.kind() {
        Kind::BFloat16 | Kind::Half | Kind::Int16 => t.view_dtype(Kind::Int16),
        Kind::Float | Kind::Int => t.view_dtype(Kind::Int),
        Kind::Double | Kind::Int64 => t.view_dtype(Kind::Int64),
        _ => t.to_kind(Kind::Int64),
    }
    .to_kind(Kind::Int64);
    let n = bits.size()[0];
    // Position weights make a swap of two elements visible; plain sum catches the rest.
    let w = Tensor::arange(n, (Kind::Int64, bits.device())).remainder(65521) + 1;
    let weighted = (&bits * w).sum(Kind::Int64).int64_value(&[]) as u64;
    let plain = bits.sum(Kind::Int64).int64_value(&[]) as u64;
    weighted ^ plain.rotate_left(32) ^ (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Bits of a scalar tensor's value, for `loss_bits`-style reporting.
pub fn scalar_bits(t: &Tensor) -> String {
    format!(
        "{:#010x}",
        (t.to_kind(Kind::Float).double_value(&[]) as f32).to_bits()
    )
}

/// True when every element is finite.
pub fn all_finite(t: &Tensor) -> bool {
    t.isfinite().all().int64_value(&[]) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    #[test]
    fn equal_tensors_equal_checksums() {
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
        assert_eq!(tensor_checksum(&a), tensor_checksum(&a.copy()));
        assert_eq!(tensor_checksum(&a).len(), 18);
    }

    #[test]
    fn single_bit_and_sign_of_zero_change_it() {
        let a = Tensor::from_slice(&[1.0f32, 0.0, 3.0]);
        let b = Tensor::from_slice(&[f32::from_bits(1.0f32.to_bits() + 1), 0.0, 3.0]);
        let c = Tensor::from_slice(&[1.0f32, -0.0, 3.0]);
        assert_ne!(tensor_checksum(&a), tensor_checksum(&b));
        assert_ne!(tensor_checksum(&a), tensor_checksum(&c));
    }

    #[test]
    fn order_matters_and_dtypes_work() {
        let a = Tensor::from_slice(&[1.0f32, 2.0]);
        let b = Tensor::from_slice(&[2.0f32, 1.0]);
        assert_ne!(tensor_checksum(&a), tensor_checksum(&b));
        for k in [Kind::BFloat16, Kind::Half, Kind::Double, Kind::Int64] {
            let t = Tensor::arange(10, (k, Device::Cpu));
            assert_eq!(tensor_checksum(&t), tensor_checksum(&t.copy()), "{k:?}");
        }
    }

    #[test]
    fn finiteness() {
        assert!(all_finite(&Tensor::from_slice(&[1.0f32, 2.0])));
        assert!(!all_finite(&Tensor::from_slice(&[1.0f32, f32::NAN])));
        assert!(!all_finite(&Tensor::from_slice(&[f32::INFINITY])));
        assert_eq!(scalar_bits(&Tensor::from(1.0f32)), "0x3f800000");
    }
}
