//! NVIDIA's side: `nvidia-smi -q -x`, parsed into what the checks judge.
//!
//! One source, always installed with the driver (docs/doctor.md says why not NVML): the XML
//! holds every passive field of `nvidia-smi -q` under stable element names (nvsmi_device DTD),
//! and a recording of it is a fixture. "N/A" and "Not Supported" read as absent.

use std::time::Duration;

use crate::proc::{run_captured, RunError};
use crate::xml::{self, Element};

/// ECC counters of one scope (volatile: since the driver loaded; aggregate: the card's life).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct EccCounts {
    pub sram_correctable: Option<u64>,
    /// `sram_uncorrectable` on older drivers; `_parity` + `_secded` on newer ones.
    pub sram_uncorrectable: Option<u64>,
    pub dram_correctable: Option<u64>,
    pub dram_uncorrectable: Option<u64>,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct RemappedRows {
    pub correctable: Option<u64>,
    pub uncorrectable: Option<u64>,
    pub pending: Option<bool>,
    pub failure: Option<bool>,
    /// Banks by spare rows left: max, high, partial, low, none.
    pub histogram: [Option<u64>; 5],
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct RetiredPages {
    pub single_bit: Option<u64>,
    pub double_bit: Option<u64>,
    pub pending: Option<bool>,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct PcieLink {
    pub gen_current: Option<u32>,
    pub gen_max: Option<u32>,
    pub gen_device_max: Option<u32>,
    pub width_current: Option<u32>,
    pub width_max: Option<u32>,
    pub replay_counter: Option<u64>,
}

/// A clock event (throttle) reason: whether it is active now and, where the driver counts it,
/// the microseconds it has been active since the driver loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockReason {
    /// The element's suffix: `hw_thermal_slowdown`, `sw_power_cap`, ...
    pub name: String,
    pub active: Option<bool>,
    pub counter_us: Option<u64>,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct NvGpu {
    pub index: usize,
    pub bus_id: String,
    pub product_name: Option<String>,
    pub uuid: Option<String>,
    pub vbios: Option<String>,
    pub gsp_firmware: Option<String>,
    pub persistence_mode: Option<bool>,
    pub mig_current: Option<bool>,
    pub mig_pending: Option<bool>,
    pub ecc_enabled: Option<bool>,
    pub ecc_pending: Option<bool>,
    pub ecc_volatile: EccCounts,
    pub ecc_aggregate: EccCounts,
    pub sram_threshold_exceeded: Option<bool>,
    pub channel_repair_pending: Option<bool>,
    pub tpc_repair_pending: Option<bool>,
    pub unrepairable_memory: Option<bool>,
    pub retired: RetiredPages,
    pub remap: RemappedRows,
    pub pcie: PcieLink,
    pub performance_state: Option<String>,
    pub clock_reasons: Vec<ClockReason>,
    pub gpu_temp_c: Option<i64>,
    pub memory_temp_c: Option<i64>,
    pub recovery_action: Option<String>,
    pub fabric_state: Option<String>,
    pub fb_total_mib: Option<u64>,
    pub fb_free_mib: Option<u64>,
}

impl NvGpu {
    /// `"0 00000000:00:06.0"`: how a check names this GPU.
    pub fn label(&self) -> String {
        format!("{} {}", self.index, self.bus_id)
    }

    pub fn reason(&self, name: &str) -> Option<&ClockReason> {
        self.clock_reasons.iter().find(|r| r.name == name)
    }
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct NvidiaSmi {
    pub driver_version: Option<String>,
    /// The newest CUDA the driver supports.
    pub cuda_version: Option<String>,
    pub gpus: Vec<NvGpu>,
}

/// `None` for "N/A", "Not Supported", "Unknown Error" and the like.
fn present(s: &str) -> Option<&str> {
    let s = s.trim();
    let absent = s.is_empty()
        || s.eq_ignore_ascii_case("N/A")
        || s.starts_with("Not Supported")
        || s.starts_with("Not Available")
        || s.starts_with("Not Applicable")
        || s.starts_with("Unknown")
        || s.starts_with("Requested functionality");
    (!absent).then_some(s)
}

/// The leading number of `"16x"`, `"0 us"`, `"81559 MiB"`, `"40 C"`.
pub fn leading_number(s: &str) -> Option<f64> {
    let s = present(s)?;
    let end = s
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || *c == '.' || (*i == 0 && *c == '-')))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    s[..end].parse().ok()
}

fn yes_no(s: &str) -> Option<bool> {
    match present(s)? {
        "Yes" | "Enabled" | "Active" => Some(true),
        "No" | "Disabled" | "Not Active" => Some(false),
        _ => None,
    }
}

fn text(e: &Element, path: &str) -> Option<String> {
    e.text_at(path).and_then(present).map(str::to_owned)
}

fn uint(e: &Element, path: &str) -> Option<u64> {
    e.text_at(path)
        .and_then(leading_number)
        .filter(|v| *v >= 0.0)
        .map(|v| v as u64)
}

fn int(e: &Element, path: &str) -> Option<i64> {
    e.text_at(path).and_then(leading_number).map(|v| v as i64)
}

fn flag(e: &Element, path: &str) -> Option<bool> {
    e.text_at(path).and_then(yes_no)
}

fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

fn ecc(scope: Option<&Element>) -> EccCounts {
    let Some(s) = scope else {
        return EccCounts::default();
    };
    EccCounts {
        sram_correctable: uint(s, "sram_correctable"),
        sram_uncorrectable: sum(
            uint(s, "sram_uncorrectable"),
            sum(
                uint(s, "sram_uncorrectable_parity"),
                uint(s, "sram_uncorrectable_secded"),
            ),
        ),
        dram_correctable: uint(s, "dram_correctable"),
        dram_uncorrectable: uint(s, "dram_uncorrectable"),
    }
}

fn clock_reasons(g: &Element) -> Vec<ClockReason> {
    // Drivers before 535 call them clocks_throttle_reasons.
    let reasons = g
        .child("clocks_event_reasons")
        .or_else(|| g.child("clocks_throttle_reasons"));
    let counters = g.child("clocks_event_reasons_counters");
    let mut out: Vec<ClockReason> = Vec::new();
    if let Some(r) = reasons {
        for c in &r.children {
            let name = c
                .name
                .trim_start_matches("clocks_event_reason_")
                .trim_start_matches("clocks_throttle_reason_")
                .to_owned();
            out.push(ClockReason {
                name,
                active: yes_no(&c.text),
                counter_us: None,
            });
        }
    }
    if let Some(cs) = counters {
        for c in &cs.children {
            // The counters' names are abbreviated: sw_therm_slowdown, hw_therm_slowdown,
            // hw_power_brake.
            let short = c.name.trim_start_matches("clocks_event_reasons_counters_");
            let name = match short {
                "sw_therm_slowdown" => "sw_thermal_slowdown",
                "hw_therm_slowdown" => "hw_thermal_slowdown",
                "hw_power_brake" => "hw_power_brake_slowdown",
                other => other,
            };
            let v = leading_number(&c.text).map(|v| v as u64);
            match out.iter_mut().find(|r| r.name == name) {
                Some(r) => r.counter_us = v,
                None => out.push(ClockReason {
                    name: name.to_owned(),
                    active: None,
                    counter_us: v,
                }),
            }
        }
    }
    out
}

fn gpu(index: usize, g: &Element) -> NvGpu {
    let hist = |k: &str| {
        uint(
            g,
            &format!("remapped_rows/row_remapper_histogram/row_remapper_histogram_{k}"),
        )
    };
    NvGpu {
        index,
        bus_id: g
            .attr("id")
            .map(str::to_owned)
            .or_else(|| text(g, "pci/pci_bus_id"))
            .unwrap_or_default(),
        product_name: text(g, "product_name"),
        uuid: text(g, "uuid"),
        vbios: text(g, "vbios_version"),
        gsp_firmware: text(g, "gsp_firmware_version"),
        persistence_mode: flag(g, "persistence_mode"),
        mig_current: flag(g, "mig_mode/current_mig"),
        mig_pending: flag(g, "mig_mode/pending_mig"),
        ecc_enabled: flag(g, "ecc_mode/current_ecc"),
        ecc_pending: flag(g, "ecc_mode/pending_ecc"),
        ecc_volatile: ecc(g.at("ecc_errors/volatile")),
        ecc_aggregate: ecc(g.at("ecc_errors/aggregate")),
        sram_threshold_exceeded: flag(g, "ecc_errors/aggregate/sram_threshold_exceeded"),
        channel_repair_pending: flag(g, "ecc_errors/channel_repair_pending"),
        tpc_repair_pending: flag(g, "ecc_errors/tpc_repair_pending"),
        unrepairable_memory: flag(g, "ecc_errors/unrepairable_memory"),
        retired: RetiredPages {
            single_bit: uint(
                g,
                "retired_pages/multiple_single_bit_retirement/retired_count",
            ),
            double_bit: uint(g, "retired_pages/double_bit_retirement/retired_count"),
            pending: flag(g, "retired_pages/pending_retirement")
                .or_else(|| flag(g, "retired_pages/pending_blacklist")),
        },
        remap: RemappedRows {
            correctable: uint(g, "remapped_rows/remapped_row_corr"),
            uncorrectable: uint(g, "remapped_rows/remapped_row_unc"),
            pending: flag(g, "remapped_rows/remapped_row_pending"),
            failure: flag(g, "remapped_rows/remapped_row_failure"),
            histogram: [
                hist("max"),
                hist("high"),
                hist("partial"),
                hist("low"),
                hist("none"),
            ],
        },
        pcie: PcieLink {
            gen_current: uint(g, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")
                .map(|v| v as u32),
            gen_max: uint(g, "pci/pci_gpu_link_info/pcie_gen/max_link_gen").map(|v| v as u32),
            gen_device_max: uint(g, "pci/pci_gpu_link_info/pcie_gen/max_device_link_gen")
                .map(|v| v as u32),
            width_current: uint(g, "pci/pci_gpu_link_info/link_widths/current_link_width")
                .map(|v| v as u32),
            width_max: uint(g, "pci/pci_gpu_link_info/link_widths/max_link_width")
                .map(|v| v as u32),
            replay_counter: uint(g, "pci/replay_counter"),
        },
        performance_state: text(g, "performance_state"),
        clock_reasons: clock_reasons(g),
        gpu_temp_c: int(g, "temperature/gpu_temp"),
        memory_temp_c: int(g, "temperature/memory_temp"),
        recovery_action: text(g, "gpu_recovery_action"),
        fabric_state: text(g, "fabric/state"),
        fb_total_mib: uint(g, "fb_memory_usage/total"),
        fb_free_mib: uint(g, "fb_memory_usage/free"),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NvidiaError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("nvidia-smi -q -x printed invalid XML: {0}")]
    Xml(#[from] xml::XmlError),
    #[error("nvidia-smi -q -x printed no <nvidia_smi_log> (root element <{0}>)")]
    NotALog(String),
}

/// Parses the output of `nvidia-smi -q -x` (whole, or one `-d` section of it).
pub fn parse(text: &str) -> Result<NvidiaSmi, NvidiaError> {
    let root = xml::parse(text)?;
    if root.name != "nvidia_smi_log" {
        return Err(NvidiaError::NotALog(root.name));
    }
    Ok(NvidiaSmi {
        driver_version: self::text(&root, "driver_version"),
        cuda_version: self::text(&root, "cuda_version"),
        gpus: root
            .children_named("gpu")
            .enumerate()
            .map(|(i, g)| gpu(i, g))
            .collect(),
    })
}

/// How long one `nvidia-smi` may take (a hung driver makes it hang; that is a verdict too).
pub const NVIDIA_SMI_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs `nvidia-smi -q -x [args]`: `Ok(None)` when nvidia-smi is not installed.
pub fn query(nvidia_smi: &str, args: &[&str]) -> Result<Option<NvidiaSmi>, NvidiaError> {
    let mut all = vec!["-q", "-x"];
    all.extend_from_slice(args);
    match run_captured(nvidia_smi, &all, NVIDIA_SMI_TIMEOUT) {
        Ok(out) => Ok(Some(parse(&out)?)),
        Err(RunError::NotFound(_)) => Ok(None),
        // Installed without a device (exit 6): nothing to judge, not a broken driver.
        Err(RunError::Failed { stderr, .. }) if stderr.contains("No devices were found") => {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// One GPU's NVLinks: (link number, GB/s; `None` for `<inactive>`).
pub type Links = Vec<(u32, Option<f64>)>;

/// `nvidia-smi nvlink --status`: per GPU index, its links.
pub fn parse_nvlink_status(text: &str) -> Vec<(usize, Links)> {
    let mut out: Vec<(usize, Links)> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("GPU ") {
            if let Some(idx) = rest.split(':').next().and_then(|i| i.trim().parse().ok()) {
                out.push((idx, Vec::new()));
            }
        } else if let Some(rest) = t.strip_prefix("Link ") {
            let Some((n, v)) = rest.split_once(':') else {
                continue;
            };
            let Ok(n) = n.trim().parse() else { continue };
            let speed = leading_number(v.trim());
            if let Some((_, links)) = out.last_mut() {
                links.push((n, speed));
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn fixture(name: &str) -> String {
        let p = format!(
            "{}/../../tests/fixtures/gpu/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    /// Every field the checks read, against the recording's `nvidia-smi -q` text.
    #[test]
    fn the_h100_recording_parses_field_by_field() {
        let smi = parse(&fixture("h100-cuda13/nvidia-smi-q.xml")).unwrap();
        assert_eq!(smi.driver_version.as_deref(), Some("580.159.04"));
        assert_eq!(smi.cuda_version.as_deref(), Some("13.0"));
        assert_eq!(smi.gpus.len(), 1);
        let g = &smi.gpus[0];
        assert_eq!(g.label(), "0 00000000:00:06.0");
        assert_eq!(g.product_name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(g.gsp_firmware.as_deref(), Some("580.159.04"));
        assert_eq!(g.persistence_mode, Some(true));
        assert_eq!((g.mig_current, g.mig_pending), (Some(false), Some(false)));
        assert_eq!((g.ecc_enabled, g.ecc_pending), (Some(true), Some(true)));
        let zero = EccCounts {
            sram_correctable: Some(0),
            sram_uncorrectable: Some(0),
            dram_correctable: Some(0),
            dram_uncorrectable: Some(0),
        };
        assert_eq!(g.ecc_volatile, zero);
        assert_eq!(g.ecc_aggregate, zero);
        assert_eq!(g.sram_threshold_exceeded, Some(false));
        assert_eq!(g.unrepairable_memory, Some(false));
        assert_eq!(g.retired, RetiredPages::default(), "N/A on Hopper");
        assert_eq!(g.remap.pending, Some(false));
        assert_eq!(g.remap.failure, Some(false));
        assert_eq!(
            g.remap.histogram,
            [Some(2560), Some(0), Some(0), Some(0), Some(0)]
        );
        assert_eq!(
            g.pcie,
            PcieLink {
                gen_current: Some(5),
                gen_max: Some(5),
                gen_device_max: Some(5),
                width_current: Some(16),
                width_max: Some(16),
                replay_counter: Some(0)
            }
        );
        assert_eq!(g.performance_state.as_deref(), Some("P0"));
        let hw = g.reason("hw_thermal_slowdown").unwrap();
        assert_eq!((hw.active, hw.counter_us), (Some(false), Some(0)));
        assert_eq!(
            g.reason("hw_power_brake_slowdown").unwrap().counter_us,
            Some(0)
        );
        assert_eq!(g.reason("gpu_idle").unwrap().counter_us, None);
        assert_eq!((g.gpu_temp_c, g.memory_temp_c), (Some(40), Some(48)));
        assert_eq!(g.recovery_action.as_deref(), Some("None"));
        assert_eq!(g.fabric_state, None);
        assert_eq!((g.fb_total_mib, g.fb_free_mib), (Some(81559), Some(81079)));
    }

    /// Every field the checks read, XML path beside `nvidia-smi -q`'s text path: the two
    /// reports of the recording agree on each (docs/doctor.md's comparison table).
    #[test]
    fn the_text_report_agrees_with_the_xml_on_every_field_read() {
        // $AORTA_DOCTOR_COMPARE_DIR: another recording (bench/doctor/run-on-gpu.sh's $OUT).
        let read = |name: &str| match std::env::var_os("AORTA_DOCTOR_COMPARE_DIR") {
            Some(d) => std::fs::read_to_string(std::path::Path::new(&d).join(name)).unwrap(),
            None => fixture(&format!("h100-cuda13/{name}")),
        };
        let xml = crate::xml::parse(&read("nvidia-smi-q.xml")).unwrap();
        let gpu = xml.child("gpu").unwrap();
        let txt = crate::smi_text::parse(&read("nvidia-smi-q.txt"));
        let norm = |s: &str| s.trim().trim_end_matches(" bank(s)").to_string();
        for (xml_path, text_path) in crate::smi_text::FIELDS {
            let x = gpu
                .text_at(xml_path)
                .or_else(|| xml.text_at(xml_path))
                .unwrap_or_else(|| panic!("XML lacks {xml_path}"));
            let t = txt
                .get(*text_path)
                .unwrap_or_else(|| panic!("nvidia-smi -q lacks {text_path}"));
            // Volatile readings (power, utilisation) are not among the fields: both
            // recordings were taken a second apart.
            assert_eq!(norm(x), norm(t), "{xml_path} vs {text_path}");
        }
    }

    #[test]
    fn numbers_and_absent_values() {
        assert_eq!(leading_number("16x"), Some(16.0));
        assert_eq!(leading_number("0 us"), Some(0.0));
        assert_eq!(leading_number("-8 C"), Some(-8.0));
        assert_eq!(leading_number("124.36 W"), Some(124.36));
        assert_eq!(leading_number("N/A"), None);
        assert_eq!(leading_number("Not Supported"), None);
        assert!(matches!(parse("<other/>"), Err(NvidiaError::NotALog(_))));
    }

    #[test]
    fn nvlink_status_lines() {
        let s = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n\t Link 0: 26.562 GB/s\n";
        let v = parse_nvlink_status(s);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].1, vec![(0, Some(26.562)), (1, None)]);
        assert_eq!(v[1].1, vec![(0, Some(26.562))]);
        assert!(parse_nvlink_status("").is_empty());
    }
}
