//! Expected figures per GPU model, from the vendors' public datasheets, and the fractions of
//! them a healthy card must reach in the active checks.
//!
//! Peaks are *dense* (no structured sparsity) BF16 tensor throughput. A large cuBLAS GEMM
//! reaches well below the datasheet peak on a healthy card (an H100 SXM: about 600-750 of
//! 989 TFLOP/s at 8192³), so the warn line is [`GEMM_WARN_FRACTION`] of the peak and the fail
//! line [`GEMM_FAIL_FRACTION`]: under it the clocks are pinned low or the card is not the one
//! the name says.

/// Below this fraction of the dense BF16 peak, the GEMM check warns.
pub const GEMM_WARN_FRACTION: f64 = 0.55;
/// Below this fraction, it fails.
pub const GEMM_FAIL_FRACTION: f64 = 0.30;
/// Pinned host↔device copies below this fraction of the link's limit warn ...
pub const COPY_WARN_FRACTION: f64 = 0.60;
/// ... and below this fraction fail.
pub const COPY_FAIL_FRACTION: f64 = 0.30;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sku {
    /// Our name for it (`H100 SXM5`).
    pub name: &'static str,
    /// Dense BF16 tensor TFLOP/s, datasheet.
    pub bf16_dense_tflops: f64,
    /// Memory bandwidth, TB/s, datasheet.
    pub mem_tbs: f64,
}

/// `(substring of the product name as nvidia-smi / amd-smi print it, the SKU)`, most specific
/// first.
pub const SKUS: &[(&str, Sku)] = &[
    // NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100, 2023): SXM 1,979 TFLOPS BF16
    // with sparsity (989 dense), 3.35 TB/s; PCIe 1,513 sparse (756 dense), 2 TB/s; NVL 1,671
    // sparse (835 dense), 3.9 TB/s.
    (
        "H100 PCIe",
        Sku {
            name: "H100 PCIe",
            bf16_dense_tflops: 756.0,
            mem_tbs: 2.0,
        },
    ),
    (
        "H100 NVL",
        Sku {
            name: "H100 NVL",
            bf16_dense_tflops: 835.0,
            mem_tbs: 3.9,
        },
    ),
    (
        "H100 80GB HBM3",
        Sku {
            name: "H100 SXM5",
            bf16_dense_tflops: 989.0,
            mem_tbs: 3.35,
        },
    ),
    (
        "H100 SXM",
        Sku {
            name: "H100 SXM5",
            bf16_dense_tflops: 989.0,
            mem_tbs: 3.35,
        },
    ),
    // NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200, 2024): SXM 1,979 sparse (989
    // dense), 4.8 TB/s; NVL 1,671 sparse (835 dense), 4.8 TB/s.
    (
        "H200 NVL",
        Sku {
            name: "H200 NVL",
            bf16_dense_tflops: 835.0,
            mem_tbs: 4.8,
        },
    ),
    (
        "H200",
        Sku {
            name: "H200 SXM",
            bf16_dense_tflops: 989.0,
            mem_tbs: 4.8,
        },
    ),
    // NVIDIA A100 datasheet (2021): 312 TFLOPS BF16 dense; 80GB SXM 2,039 GB/s, PCIe 1,935 GB/s.
    (
        "A100-SXM4-80GB",
        Sku {
            name: "A100 SXM4 80GB",
            bf16_dense_tflops: 312.0,
            mem_tbs: 2.039,
        },
    ),
    (
        "A100 80GB PCIe",
        Sku {
            name: "A100 PCIe 80GB",
            bf16_dense_tflops: 312.0,
            mem_tbs: 1.935,
        },
    ),
    (
        "A100",
        Sku {
            name: "A100",
            bf16_dense_tflops: 312.0,
            mem_tbs: 1.555,
        },
    ),
    // NVIDIA L40S datasheet (2023): 733 TFLOPS BF16 with sparsity (366 dense), 864 GB/s.
    (
        "L40S",
        Sku {
            name: "L40S",
            bf16_dense_tflops: 366.0,
            mem_tbs: 0.864,
        },
    ),
    // AMD Instinct MI300X data sheet (2023): 1,307.4 TFLOPS BF16 dense, 5.3 TB/s.
    (
        "MI300X",
        Sku {
            name: "MI300X",
            bf16_dense_tflops: 1307.4,
            mem_tbs: 5.3,
        },
    ),
    // AMD Instinct MI250X data sheet (2021): 383 TFLOPS BF16, 3.2 TB/s.
    (
        "MI250X",
        Sku {
            name: "MI250X",
            bf16_dense_tflops: 383.0,
            mem_tbs: 3.2,
        },
    ),
];

/// The SKU whose key the product name contains.
pub fn lookup(product_name: &str) -> Option<Sku> {
    SKUS.iter()
        .find(|(k, _)| product_name.contains(k))
        .map(|(_, s)| *s)
}

/// A PCIe link's per-direction limit in GB/s: lanes × rate × line-code efficiency / 8
/// (Gen1-2 8b/10b, Gen3-5 128b/130b; Gen6's FLIT mode taken as 242/256).
pub fn pcie_limit_gbs(gen: u32, width: u32) -> Option<f64> {
    let (gts, eff) = match gen {
        1 => (2.5, 0.8),
        2 => (5.0, 0.8),
        3 => (8.0, 128.0 / 130.0),
        4 => (16.0, 128.0 / 130.0),
        5 => (32.0, 128.0 / 130.0),
        6 => (64.0, 242.0 / 256.0),
        _ => return None,
    };
    Some(gts * eff * f64::from(width) / 8.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_find_their_sku() {
        assert_eq!(lookup("NVIDIA H100 80GB HBM3").unwrap().name, "H100 SXM5");
        assert_eq!(lookup("NVIDIA H100 PCIe").unwrap().name, "H100 PCIe");
        assert_eq!(lookup("NVIDIA H200").unwrap().name, "H200 SXM");
        assert_eq!(lookup("NVIDIA H200 NVL").unwrap().name, "H200 NVL");
        assert_eq!(
            lookup("NVIDIA A100-SXM4-80GB").unwrap().name,
            "A100 SXM4 80GB"
        );
        assert_eq!(lookup("AMD Instinct MI300X").unwrap().name, "MI300X");
        assert!(lookup("NVIDIA GeForce RTX 4090").is_none());
        let g5 = pcie_limit_gbs(5, 16).unwrap();
        assert!((g5 - 63.0).abs() < 0.1, "{g5}");
        assert!((pcie_limit_gbs(3, 8).unwrap() - 7.88).abs() < 0.01);
    }
}
