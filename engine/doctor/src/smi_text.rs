//! `nvidia-smi -q` (the text report) read into `Section/Sub/Key → value`, and the table of
//! every field doctor reads from the XML beside its place in the text. doctor judges the XML;
//! the table is how the recording's two reports are compared field by field (a test), and how
//! docs/doctor.md names each field as people see it.

use std::collections::BTreeMap;

/// `(XML path under <gpu> or the root, text path)` for each passive field doctor judges.
pub const FIELDS: &[(&str, &str)] = &[
    ("driver_version", "Driver Version"),
    ("cuda_version", "CUDA Version"),
    ("product_name", "GPU/Product Name"),
    ("persistence_mode", "GPU/Persistence Mode"),
    ("mig_mode/current_mig", "GPU/MIG Mode/Current"),
    ("mig_mode/pending_mig", "GPU/MIG Mode/Pending"),
    ("gpu_recovery_action", "GPU/GPU Recovery Action"),
    ("gsp_firmware_version", "GPU/GSP Firmware Version"),
    ("vbios_version", "GPU/VBIOS Version"),
    ("pci/pci_bus_id", "GPU/PCI/Bus Id"),
    (
        "pci/pci_gpu_link_info/pcie_gen/max_link_gen",
        "GPU/PCI/GPU Link Info/PCIe Generation/Max",
    ),
    (
        "pci/pci_gpu_link_info/pcie_gen/current_link_gen",
        "GPU/PCI/GPU Link Info/PCIe Generation/Current",
    ),
    (
        "pci/pci_gpu_link_info/pcie_gen/max_device_link_gen",
        "GPU/PCI/GPU Link Info/PCIe Generation/Device Max",
    ),
    (
        "pci/pci_gpu_link_info/link_widths/max_link_width",
        "GPU/PCI/GPU Link Info/Link Width/Max",
    ),
    (
        "pci/pci_gpu_link_info/link_widths/current_link_width",
        "GPU/PCI/GPU Link Info/Link Width/Current",
    ),
    ("pci/replay_counter", "GPU/PCI/Replays Since Reset"),
    ("performance_state", "GPU/Performance State"),
    (
        "clocks_event_reasons/clocks_event_reason_sw_power_cap",
        "GPU/Clocks Event Reasons/SW Power Cap",
    ),
    (
        "clocks_event_reasons/clocks_event_reason_hw_slowdown",
        "GPU/Clocks Event Reasons/HW Slowdown",
    ),
    (
        "clocks_event_reasons/clocks_event_reason_hw_thermal_slowdown",
        "GPU/Clocks Event Reasons/HW Slowdown/HW Thermal Slowdown",
    ),
    (
        "clocks_event_reasons/clocks_event_reason_hw_power_brake_slowdown",
        "GPU/Clocks Event Reasons/HW Slowdown/HW Power Brake Slowdown",
    ),
    (
        "clocks_event_reasons/clocks_event_reason_sw_thermal_slowdown",
        "GPU/Clocks Event Reasons/SW Thermal Slowdown",
    ),
    (
        "clocks_event_reasons_counters/clocks_event_reasons_counters_sw_power_cap",
        "GPU/Clocks Event Reasons Counters/SW Power Capping",
    ),
    (
        "clocks_event_reasons_counters/clocks_event_reasons_counters_sw_therm_slowdown",
        "GPU/Clocks Event Reasons Counters/SW Thermal Slowdown",
    ),
    (
        "clocks_event_reasons_counters/clocks_event_reasons_counters_hw_therm_slowdown",
        "GPU/Clocks Event Reasons Counters/HW Thermal Slowdown",
    ),
    (
        "clocks_event_reasons_counters/clocks_event_reasons_counters_hw_power_brake",
        "GPU/Clocks Event Reasons Counters/HW Power Braking",
    ),
    ("fb_memory_usage/total", "GPU/FB Memory Usage/Total"),
    ("ecc_mode/current_ecc", "GPU/ECC Mode/Current"),
    ("ecc_mode/pending_ecc", "GPU/ECC Mode/Pending"),
    (
        "ecc_errors/volatile/sram_correctable",
        "GPU/ECC Errors/Volatile/SRAM Correctable",
    ),
    (
        "ecc_errors/volatile/sram_uncorrectable_parity",
        "GPU/ECC Errors/Volatile/SRAM Uncorrectable Parity",
    ),
    (
        "ecc_errors/volatile/sram_uncorrectable_secded",
        "GPU/ECC Errors/Volatile/SRAM Uncorrectable SEC-DED",
    ),
    (
        "ecc_errors/volatile/dram_correctable",
        "GPU/ECC Errors/Volatile/DRAM Correctable",
    ),
    (
        "ecc_errors/volatile/dram_uncorrectable",
        "GPU/ECC Errors/Volatile/DRAM Uncorrectable",
    ),
    (
        "ecc_errors/aggregate/sram_correctable",
        "GPU/ECC Errors/Aggregate/SRAM Correctable",
    ),
    (
        "ecc_errors/aggregate/sram_uncorrectable_parity",
        "GPU/ECC Errors/Aggregate/SRAM Uncorrectable Parity",
    ),
    (
        "ecc_errors/aggregate/sram_uncorrectable_secded",
        "GPU/ECC Errors/Aggregate/SRAM Uncorrectable SEC-DED",
    ),
    (
        "ecc_errors/aggregate/dram_correctable",
        "GPU/ECC Errors/Aggregate/DRAM Correctable",
    ),
    (
        "ecc_errors/aggregate/dram_uncorrectable",
        "GPU/ECC Errors/Aggregate/DRAM Uncorrectable",
    ),
    (
        "ecc_errors/aggregate/sram_threshold_exceeded",
        "GPU/ECC Errors/Aggregate/SRAM Threshold Exceeded",
    ),
    (
        "ecc_errors/channel_repair_pending",
        "GPU/ECC Errors/Channel Repair Pending",
    ),
    (
        "ecc_errors/tpc_repair_pending",
        "GPU/ECC Errors/TPC Repair Pending",
    ),
    (
        "ecc_errors/unrepairable_memory",
        "GPU/ECC Errors/Unrepairable Memory",
    ),
    (
        "retired_pages/multiple_single_bit_retirement/retired_count",
        "GPU/Retired Pages/Single Bit ECC",
    ),
    (
        "retired_pages/double_bit_retirement/retired_count",
        "GPU/Retired Pages/Double Bit ECC",
    ),
    (
        "retired_pages/pending_blacklist",
        "GPU/Retired Pages/Pending Page Blacklist",
    ),
    (
        "remapped_rows/remapped_row_corr",
        "GPU/Remapped Rows/Correctable Error",
    ),
    (
        "remapped_rows/remapped_row_unc",
        "GPU/Remapped Rows/Uncorrectable Error",
    ),
    (
        "remapped_rows/remapped_row_pending",
        "GPU/Remapped Rows/Pending",
    ),
    (
        "remapped_rows/remapped_row_failure",
        "GPU/Remapped Rows/Remapping Failure Occurred",
    ),
    (
        "remapped_rows/row_remapper_histogram/row_remapper_histogram_max",
        "GPU/Remapped Rows/Bank Remap Availability Histogram/Max",
    ),
    (
        "remapped_rows/row_remapper_histogram/row_remapper_histogram_high",
        "GPU/Remapped Rows/Bank Remap Availability Histogram/High",
    ),
    (
        "remapped_rows/row_remapper_histogram/row_remapper_histogram_partial",
        "GPU/Remapped Rows/Bank Remap Availability Histogram/Partial",
    ),
    (
        "remapped_rows/row_remapper_histogram/row_remapper_histogram_low",
        "GPU/Remapped Rows/Bank Remap Availability Histogram/Low",
    ),
    (
        "remapped_rows/row_remapper_histogram/row_remapper_histogram_none",
        "GPU/Remapped Rows/Bank Remap Availability Histogram/None",
    ),
    ("fabric/state", "GPU/Fabric/State"),
];

/// The report's `Key : value` lines by path (the `GPU <bus id>` section is `GPU`; with several
/// GPUs the last one wins, which is enough for a one-GPU recording).
pub fn parse(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    for line in text.lines() {
        let body = line.trim_start();
        if body.is_empty() || body.starts_with("====") {
            continue;
        }
        let indent = line.len() - body.len();
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        let (name, value) = match body.split_once(" : ") {
            Some((k, v)) => (k.trim().to_owned(), Some(v.trim().to_owned())),
            None if indent == 0 && body.starts_with("GPU ") => ("GPU".to_owned(), None),
            None => (body.trim().to_owned(), None),
        };
        let path = stack
            .iter()
            .map(|(_, n)| n.as_str())
            .chain([name.as_str()])
            .collect::<Vec<_>>()
            .join("/");
        if let Some(v) = value {
            out.insert(path, v);
        }
        stack.push((indent, name));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn nested_values_keep_their_parents() {
        let m = super::parse("Driver Version : 1\nGPU 0000:00:06.0\n    A\n        B : x\n            C : y\n    D : z\n");
        assert_eq!(m["Driver Version"], "1");
        assert_eq!(m["GPU/A/B"], "x");
        assert_eq!(m["GPU/A/B/C"], "y");
        assert_eq!(m["GPU/D"], "z");
    }
}
