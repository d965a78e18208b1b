//! The passive checks: each reads what the sources recorded and gives a verdict with the
//! figure, the threshold and the remedy. docs/doctor.md lists them with their sources.

use crate::amd::AmdGpu;
use crate::kernel_log::{pci_matches, xid_weight, Event, Weight};
use crate::nvidia::{EccCounts, NvGpu, NvidiaSmi};
use crate::verdict::{remedy, Check};

const SMI: &str = "nvidia-smi -q -x";

fn gen_width(gen: Option<u32>, width: Option<u32>) -> String {
    let g = gen.map_or("Gen?".to_owned(), |g| format!("Gen{g}"));
    let w = width.map_or("x?".to_owned(), |w| format!("x{w}"));
    format!("{g} {w}")
}

fn unc(c: &EccCounts) -> Option<u64> {
    match (c.sram_uncorrectable, c.dram_uncorrectable) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

fn cor(c: &EccCounts) -> Option<u64> {
    match (c.sram_correctable, c.dram_correctable) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

fn ecc_figure(c: &EccCounts, correctable: bool) -> String {
    let (s, d) = if correctable {
        (c.sram_correctable, c.dram_correctable)
    } else {
        (c.sram_uncorrectable, c.dram_uncorrectable)
    };
    let f = |v: Option<u64>| v.map_or("n/a".to_owned(), |v| v.to_string());
    format!("SRAM {} DRAM {}", f(s), f(d))
}

/// Volatile correctable errors at or above this many since the driver loaded warn: a few are
/// what ECC is for, a stream of them announces a row remap or worse.
pub const CORRECTABLE_WARN: u64 = 100;
/// Retired pages (pre-Ampere) at or above this many: NVIDIA's RMA line (64 pages the most a
/// card can retire; the field guide says RMA at 60 or at any DBE page that failed to retire).
pub const RETIRED_PAGES_FAIL: u64 = 60;

/// ECC mode and counters, the SRAM threshold and pending repairs.
fn ecc(g: &NvGpu, out: &mut Vec<Check>) {
    let gpu = g.label();
    let gpu = Some(gpu.as_str());
    let mode = Check::new("ecc.mode", gpu, &format!("{SMI}: ecc_mode"));
    out.push(match (g.ecc_enabled, g.ecc_pending) {
        (None, _) => mode.not_applicable("the GPU does not report an ECC mode (no ECC memory)"),
        (Some(true), Some(false)) => mode
            .measured("enabled, disable pending")
            .threshold("enabled")
            .warn("ECC will be off after the next reset: nvidia-smi -e 1 keeps it on"),
        (Some(true), _) => mode.measured("enabled").threshold("enabled").pass(),
        (Some(false), _) => mode
            .measured("disabled")
            .threshold("enabled")
            .warn(remedy::ECC_OFF),
    });
    if g.ecc_enabled == Some(false) {
        return;
    }
    let vol = Check::new(
        "ecc.volatile_uncorrectable",
        gpu,
        &format!("{SMI}: ecc_errors/volatile"),
    )
    .threshold("0");
    out.push(match unc(&g.ecc_volatile) {
        None => vol.not_applicable("the GPU does not count uncorrectable ECC errors"),
        Some(0) => vol.measured(ecc_figure(&g.ecc_volatile, false)).pass(),
        Some(_) => vol.measured(ecc_figure(&g.ecc_volatile, false)).fail(format!(
            "uncorrectable ECC errors since the driver loaded: {}; RMA if they recur after the reset",
            remedy::RESET
        )),
    });
    let vc = Check::new(
        "ecc.volatile_correctable",
        gpu,
        &format!("{SMI}: ecc_errors/volatile"),
    )
    .threshold(format!("< {CORRECTABLE_WARN}"));
    out.push(match cor(&g.ecc_volatile) {
        None => vc.not_applicable("the GPU does not count correctable ECC errors"),
        Some(n) if n < CORRECTABLE_WARN => vc.measured(ecc_figure(&g.ecc_volatile, true)).pass(),
        Some(_) => vc.measured(ecc_figure(&g.ecc_volatile, true)).warn(
            "a stream of correctable ECC errors: watch the remapped rows and the kernel log (Xid 63/92); reset the GPU at the next drain",
        ),
    });
    let agg = Check::new(
        "ecc.aggregate_uncorrectable",
        gpu,
        &format!("{SMI}: ecc_errors/aggregate"),
    )
    .threshold("0 over the card's life");
    out.push(match unc(&g.ecc_aggregate) {
        None => agg.not_applicable("the GPU does not keep lifetime ECC counts"),
        Some(0) => agg.measured(ecc_figure(&g.ecc_aggregate, false)).pass(),
        Some(_) => agg.measured(ecc_figure(&g.ecc_aggregate, false)).warn(
            "uncorrectable errors in the card's history: fine if the rows were remapped (rows.* pass) and the volatile count is 0; file an RMA if they keep coming",
        ),
    });
    let sram = Check::new(
        "ecc.sram_threshold",
        gpu,
        &format!("{SMI}: ecc_errors/aggregate/sram_threshold_exceeded"),
    )
    .threshold("No");
    out.push(match g.sram_threshold_exceeded {
        None => sram.not_applicable("not reported by this GPU or driver"),
        Some(false) => sram.measured("No").pass(),
        Some(true) => sram
            .measured("Yes")
            .fail(format!("SRAM error threshold exceeded: {}", remedy::RMA)),
    });
    let rep = Check::new(
        "ecc.repair",
        gpu,
        &format!("{SMI}: ecc_errors/*_repair_pending, unrepairable_memory"),
    )
    .threshold("no repair pending, no unrepairable memory");
    let flags = [
        ("channel repair pending", g.channel_repair_pending),
        ("TPC repair pending", g.tpc_repair_pending),
        ("unrepairable memory", g.unrepairable_memory),
    ];
    out.push(if flags.iter().all(|(_, v)| v.is_none()) {
        rep.not_applicable("not reported by this GPU or driver")
    } else if g.unrepairable_memory == Some(true) {
        rep.measured("unrepairable memory").fail(remedy::RMA)
    } else if let Some((what, _)) = flags.iter().find(|(_, v)| *v == Some(true)) {
        rep.measured(*what)
            .fail(format!("a repair waits for a reset: {}", remedy::RESET))
    } else {
        rep.measured("none").pass()
    });
}

/// Row remapping (Ampere and later) and page retirement (before).
fn memory_repair(g: &NvGpu, out: &mut Vec<Check>) {
    let label = g.label();
    let gpu = Some(label.as_str());
    let src = format!("{SMI}: remapped_rows");
    let pending = Check::new("rows.remap_pending", gpu, &src).threshold("No");
    out.push(match g.remap.pending {
        None => {
            pending.not_applicable("the GPU does not remap rows (before Ampere it retires pages)")
        }
        Some(false) => pending.measured("No").pass(),
        Some(true) => pending
            .measured(format!(
                "Yes ({} uncorrectable, {} correctable remaps)",
                g.remap.uncorrectable.unwrap_or(0),
                g.remap.correctable.unwrap_or(0)
            ))
            .fail(format!(
                "a row remap is pending and the bad row stays in use until the GPU is reset: {}",
                remedy::RESET
            )),
    });
    let failure = Check::new("rows.remap_failure", gpu, &src).threshold("No");
    out.push(match g.remap.failure {
        None => failure.not_applicable("the GPU does not remap rows"),
        Some(false) => failure.measured("No").pass(),
        Some(true) => failure.measured("Yes").fail(format!(
            "row remapping failed (no spare row left): {}",
            remedy::RMA
        )),
    });
    let banks = Check::new(
        "rows.bank_availability",
        gpu,
        &format!("{src}/row_remapper_histogram"),
    )
    .threshold("0 banks with no spare row");
    let [max, high, partial, low, none] = g.remap.histogram;
    out.push(match none {
        None => banks.not_applicable("the GPU does not report its remap histogram"),
        Some(n) => {
            let f = |v: Option<u64>| v.unwrap_or(0);
            let figure = format!(
                "max {} high {} partial {} low {} none {}",
                f(max),
                f(high),
                f(partial),
                f(low),
                n
            );
            if n > 0 {
                banks.measured(figure).warn(
                    "some banks have no spare row left: the next uncorrectable error there cannot be remapped; plan an RMA",
                )
            } else {
                banks.measured(figure).pass()
            }
        }
    });
    let pages = Check::new("pages.retired", gpu, &format!("{SMI}: retired_pages"))
        .threshold(format!("< {RETIRED_PAGES_FAIL} pages, none pending"));
    let r = &g.retired;
    out.push(match (r.single_bit, r.double_bit, r.pending) {
        (None, None, None) => {
            pages.not_applicable("the GPU remaps rows instead of retiring pages (Ampere and later)")
        }
        (s, d, p) => {
            let total = s.unwrap_or(0) + d.unwrap_or(0);
            let pages = pages.measured(format!(
                "{total} retired ({} SBE, {} DBE), pending {}",
                s.unwrap_or(0),
                d.unwrap_or(0),
                if p == Some(true) { "Yes" } else { "No" }
            ));
            if total >= RETIRED_PAGES_FAIL {
                pages.fail(format!(
                    "the page retirement table is nearly full: {}",
                    remedy::RMA
                ))
            } else if p == Some(true) {
                pages.fail(format!(
                    "a page waits to be retired at the next reset: {}",
                    remedy::RESET
                ))
            } else {
                pages.pass()
            }
        }
    });
}

/// What the driver itself asks for (`GPU Recovery Action`, R550 and later).
fn recovery(g: &NvGpu, out: &mut Vec<Check>) {
    let label = g.label();
    let c = Check::new(
        "driver.recovery_action",
        Some(&label),
        &format!("{SMI}: gpu_recovery_action"),
    )
    .threshold("None");
    out.push(match g.recovery_action.as_deref() {
        None => c.not_applicable("not reported by this driver (before R550)"),
        Some("None") => c.measured("None").pass(),
        Some(a) => c.measured(a).fail(format!(
            "the driver asks for \"{a}\": {}",
            match a {
                "Reset" | "GPU Reset" => remedy::RESET,
                "Reboot" | "Node Reboot" => "drain the node and reboot it",
                _ => "drain the node and do what the driver asks (nvidia-smi -q, GPU Recovery Action)",
            }
        )),
    });
}

/// `10`, `1.0`: whole seconds from 10 s up, one decimal below.
fn seconds(s: f64) -> String {
    if s >= 10.0 {
        format!("{s:.0}")
    } else {
        format!("{s:.1}")
    }
}

/// A window between two samples, for the clock-event counters.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    pub after: &'a NvGpu,
    pub seconds: f64,
}

/// Clock event reasons (throttling): active now, and how much of the window they held the
/// clocks, from the driver's microsecond counters.
fn clocks(g: &NvGpu, window: Option<Window<'_>>, out: &mut Vec<Check>) {
    let label = g.label();
    for (id, reason, what, fix, fail) in [
        (
            "clocks.hw_thermal_slowdown",
            "hw_thermal_slowdown",
            "HW thermal slowdown",
            remedy::COOLING,
            true,
        ),
        (
            "clocks.hw_power_brake",
            "hw_power_brake_slowdown",
            "HW power brake",
            remedy::POWER,
            true,
        ),
        (
            "clocks.sw_thermal_slowdown",
            "sw_thermal_slowdown",
            "SW thermal slowdown",
            remedy::COOLING,
            false,
        ),
    ] {
        let c = Check::new(
            id,
            Some(&label),
            &format!("{SMI}: clocks_event_reasons, clocks_event_reasons_counters"),
        )
        .threshold("not active; 0% of the window");
        let Some(r) = g.reason(reason) else {
            out.push(c.not_applicable("not reported by this GPU or driver"));
            continue;
        };
        let after = window.and_then(|w| w.after.reason(reason).map(|a| (a, w.seconds)));
        let share = after.and_then(|(a, secs)| {
            let (b, e) = (r.counter_us?, a.counter_us?);
            (secs > 0.0).then(|| (e.saturating_sub(b) as f64 / (secs * 1e6) * 100.0).min(100.0))
        });
        let active = r.active == Some(true) || after.is_some_and(|(a, _)| a.active == Some(true));
        let figure = match (share, after) {
            (Some(p), Some((_, secs))) => format!(
                "{} now, active {p:.0}% of the last {} s",
                if active { "active" } else { "not active" },
                seconds(secs)
            ),
            _ => format!("{} now", if active { "active" } else { "not active" }),
        };
        let since_boot = r.counter_us.filter(|us| *us > 0);
        let c = c.measured(match since_boot {
            Some(us) => format!("{figure}; {:.1} s since the driver loaded", us as f64 / 1e6),
            None => figure.clone(),
        });
        let bad = active || share.is_some_and(|p| p > 0.0);
        out.push(if bad {
            let msg = match (share, after) {
                (Some(p), Some((_, secs))) => format!("{fix}: {what} active {p:.0}% of the last {} s", seconds(secs)),
                _ => format!("{fix}: {what} active"),
            };
            if fail { c.fail(msg) } else { c.warn(msg) }
        } else if since_boot.is_some() && fail {
            c.warn(format!("{fix}: {what} held the clocks before (not now); a sweep under load may meet it again"))
        } else {
            c.pass()
        });
    }
}

/// PCIe link generation and width, current against the link's maximum.
fn pcie(g: &NvGpu, out: &mut Vec<Check>) {
    let label = g.label();
    let p = &g.pcie;
    let c = Check::new(
        "pcie.link",
        Some(&label),
        &format!("{SMI}: pci/pci_gpu_link_info"),
    );
    out.push(link_verdict(
        c,
        (p.gen_current, p.width_current),
        (p.gen_max, p.width_max),
        p.gen_device_max,
        g.performance_state.as_deref(),
    ));
}

/// The link verdict shared by NVIDIA and AMD. A narrower link fails; a slower generation fails
/// at full performance state (P0, or unknown) and warns otherwise, since idle GPUs downtrain
/// the link to save power.
pub fn link_verdict(
    c: Check,
    (gen, width): (Option<u32>, Option<u32>),
    (gen_max, width_max): (Option<u32>, Option<u32>),
    gen_device_max: Option<u32>,
    pstate: Option<&str>,
) -> Check {
    if gen.is_none() && width.is_none() {
        return c.not_applicable("the link's generation and width are not reported (virtualised?)");
    }
    let cur = gen_width(gen, width);
    let max = gen_width(gen_max, width_max);
    let c = c
        .measured(cur.clone())
        .threshold(format!("{max} (the link's maximum)"));
    let narrow = matches!((width, width_max), (Some(w), Some(m)) if w < m);
    let slow = matches!((gen, gen_max), (Some(g), Some(m)) if g < m);
    let idle = pstate.is_some_and(|p| p != "P0");
    let msg = format!("{}: link trained at {cur}, expected {max}", remedy::RISER);
    if narrow || (slow && !idle) {
        c.fail(msg)
    } else if slow {
        c.warn(format!(
            "link at {cur} in {} (idle GPUs downtrain to save power): the medium level's copy bandwidth measures it under load",
            pstate.unwrap_or("?")
        ))
    } else if matches!((gen_max, gen_device_max), (Some(m), Some(d)) if m < d) {
        c.warn(format!(
            "the slot or riser caps the link at Gen{} while the GPU supports Gen{}: check the slot's BIOS setting and the riser",
            gen_max.unwrap_or(0),
            gen_device_max.unwrap_or(0)
        ))
    } else {
        c.pass()
    }
}

fn modes(g: &NvGpu, out: &mut Vec<Check>) {
    let label = g.label();
    let gpu = Some(label.as_str());
    let p = Check::new("mode.persistence", gpu, &format!("{SMI}: persistence_mode"))
        .threshold("Enabled");
    out.push(match g.persistence_mode {
        None => p.not_applicable("not reported (Windows drivers have none)"),
        Some(true) => p.measured("Enabled").pass(),
        Some(false) => p.measured("Disabled").warn(remedy::PERSISTENCE),
    });
    let m = Check::new("mode.mig", gpu, &format!("{SMI}: mig_mode"))
        .threshold("Disabled, nothing pending");
    out.push(match (g.mig_current, g.mig_pending) {
        (None, _) => m.not_applicable("the GPU does not support MIG"),
        (Some(c), Some(p)) if c != p => m
            .measured(format!("current {}, pending {}", on(c), on(p)))
            .fail(format!(
                "a MIG mode change waits for a reset: {}",
                remedy::RESET
            )),
        (Some(true), _) => m.measured("Enabled").warn(remedy::MIG_ON),
        (Some(false), _) => m.measured("Disabled").pass(),
    });
}

fn on(b: bool) -> &'static str {
    if b {
        "Enabled"
    } else {
        "Disabled"
    }
}

/// Versions the environment snapshot sees beside the driver: the CUDA the driver supports
/// against the toolkit's and torch's, the GSP firmware against the driver.
#[derive(Debug, Default, Clone)]
pub struct EnvFacts {
    pub toolkit_cuda: Option<String>,
    pub torch_cuda: Option<String>,
}

impl EnvFacts {
    /// From an environment snapshot (`aorta env probe`'s env.json): `cuda.toolkit.version`
    /// and `pytorch.cuda_version`.
    pub fn from_snapshot(v: &serde_json::Value) -> EnvFacts {
        let s = |p: &str| v.pointer(p).and_then(|x| x.as_str()).map(str::to_owned);
        EnvFacts {
            toolkit_cuda: s("/cuda/toolkit/version"),
            torch_cuda: s("/pytorch/cuda_version"),
        }
    }
}

fn major_minor(v: &str) -> Option<(u32, u32)> {
    let mut it = v.trim().split('.');
    let a = it.next()?.parse().ok()?;
    let b = it.next().and_then(|b| b.parse().ok()).unwrap_or(0);
    Some((a, b))
}

pub fn versions(smi: &NvidiaSmi, env: &EnvFacts, out: &mut Vec<Check>) {
    for g in &smi.gpus {
        let label = g.label();
        let c = Check::new(
            "driver.firmware",
            Some(&label),
            &format!("{SMI}: driver_version, gsp_firmware_version"),
        )
        .threshold("GSP firmware = driver version");
        out.push(match (&g.gsp_firmware, &smi.driver_version) {
            (Some(fw), Some(d)) if fw == d => c.measured(fw.clone()).pass(),
            (Some(fw), Some(d)) => c.measured(format!("firmware {fw}, driver {d}")).fail(
                "the GSP firmware does not match the driver (a partial driver upgrade): reinstall the driver and reboot",
            ),
            _ => c.not_applicable("no GSP firmware reported (GSP off, or a driver before R510)"),
        });
    }
    let c = Check::new(
        "driver.cuda",
        None,
        "nvidia-smi cuda_version; environment snapshot (toolkit, torch)",
    );
    let Some(driver) = smi.cuda_version.as_deref().and_then(major_minor) else {
        out.push(c.not_applicable("the driver does not report its CUDA version"));
        return;
    };
    let wants: Vec<(&str, (u32, u32), &str)> =
        [("toolkit", &env.toolkit_cuda), ("torch", &env.torch_cuda)]
            .into_iter()
            .filter_map(|(who, v)| {
                v.as_deref()
                    .and_then(|s| major_minor(s).map(|mm| (who, mm, s)))
            })
            .collect();
    let c = c.threshold(format!(
        "toolkit and torch CUDA major ≤ the driver's {}.{}",
        driver.0, driver.1
    ));
    if wants.is_empty() {
        out.push(c.not_applicable("no CUDA toolkit or torch build seen beside the driver"));
        return;
    }
    let figure = wants
        .iter()
        .map(|(w, _, s)| format!("{w} {s}"))
        .collect::<Vec<_>>()
        .join(", ");
    let c = c.measured(format!("driver {}.{}; {figure}", driver.0, driver.1));
    // Minor-version compatibility: a newer minor runs (PTX JIT aside); a newer major does not.
    out.push(match wants.iter().find(|(_, mm, _)| mm.0 > driver.0) {
        Some((who, _, s)) => c.fail(format!(
            "{who} is built for CUDA {s}, newer than the driver supports: upgrade the driver or use a {who} for CUDA {}.x",
            driver.0
        )),
        None => match wants.iter().find(|(_, mm, _)| *mm > driver) {
            Some((who, _, s)) => c.warn(format!(
                "{who} CUDA {s} is newer than the driver's {}.{}: runs under minor-version compatibility, but PTX JIT and new APIs fail; upgrade the driver",
                driver.0, driver.1
            )),
            None => c.pass(),
        },
    });
}

/// The kernel log's events for one GPU (`gpu`: its label and bus id; its Xids, matched by PCI
/// address, weighed by the catalogue) or, with `gpu` None, for the node: Xids naming none of
/// `known_buses`, SXids, fatal AER and amdgpu events.
pub fn kernel_events(
    events: &[Event],
    gpu: Option<(&str, &str)>,
    known_buses: &[String],
    source: &str,
    out: &mut Vec<Check>,
) {
    let id = if gpu.is_some() {
        "kernel.xid"
    } else {
        "kernel.events"
    };
    let c = Check::new(
        id,
        gpu.map(|g| g.0),
        &format!("kernel log since boot ({source}); classifier Tier 3 patterns"),
    )
    .threshold("no hardware Xid/SXid, no amdgpu reset or RAS event, no fatal AER");
    let known = |pci: &str| known_buses.iter().any(|b| pci_matches(pci, b));
    let mut worst: Option<(Weight, String)> = None;
    let mut seen: Vec<String> = Vec::new();
    let mut note = |w: Weight, what: String, remedy: String| {
        if !seen.contains(&what) {
            seen.push(what);
        }
        if worst.as_ref().is_none_or(|(x, _)| w > *x) {
            worst = Some((w, remedy));
        }
    };
    let mut xids: std::collections::BTreeMap<(u32, String), usize> = Default::default();
    for e in events {
        match (e.detector.as_str(), gpu) {
            ("tier3:nvidia_xid", Some((_, bus))) => {
                if e.pci.as_deref().is_some_and(|p| pci_matches(p, bus)) {
                    *xids.entry((e.xid.unwrap_or(0), String::new())).or_default() += 1;
                }
            }
            (_, Some(_)) => {}
            // On an Xid line the ECC pattern repeats what the Xid pattern found; the driver's
            // other ECC / row-remap lines are worth a look (the counters are judged per GPU).
            ("tier3:nvidia_ecc", None) if e.line.contains("Xid") => {}
            ("tier3:nvidia_ecc", None) => note(
                Weight::Warn,
                "NVRM ECC/row-remap message".into(),
                "the driver logged an ECC or row-remap event: see the ecc.* and rows.* checks; reset the GPU at the next drain".into(),
            ),
            ("tier3:nvidia_xid", None) => {
                let pci = e.pci.clone().unwrap_or_default();
                if !known(&pci) {
                    *xids.entry((e.xid.unwrap_or(0), pci)).or_default() += 1;
                }
            }
            ("sxid", None) => {
                let fatal = e.line.contains("Fatal") && !e.line.contains("Non-fatal");
                note(
                    if fatal { Weight::Fail } else { Weight::Warn },
                    format!("SXid {}", e.xid.unwrap_or(0)),
                    "NVSwitch error: check the fabric manager's log; a fatal SXid needs the NVSwitch tray reset".into(),
                );
            }
            ("tier3:pcie_aer_fatal", None) => note(
                Weight::Fail,
                "fatal PCIe AER".into(),
                format!("a fatal PCIe error was reported: {}", remedy::RISER),
            ),
            (other, None) => {
                let what = other.trim_start_matches("tier3:").to_owned();
                note(
                    Weight::Fail,
                    what.clone(),
                    format!("amdgpu reported {what}: drain the node, reset the GPU (amd-smi reset -G) and check amd-smi metric --ecc; RMA if it recurs"),
                );
            }
        }
    }
    for ((x, pci), n) in xids {
        let (w, r) = xid_weight(x);
        let on = if pci.is_empty() {
            String::new()
        } else {
            format!(" on {pci}")
        };
        note(w, format!("Xid {x}{on} ×{n}"), format!("Xid {x}: {r}"));
    }
    out.push(match worst {
        None => c.measured("none").pass(),
        Some((w, r)) => {
            let c = c.measured(seen.join(", "));
            match w {
                Weight::Fail => c.fail(r),
                Weight::Warn => c.warn(r),
                Weight::Application => c.pass(),
            }
        }
    });
}

/// Every passive check of one NVIDIA GPU.
pub fn nvidia_gpu(g: &NvGpu, window: Option<Window<'_>>, out: &mut Vec<Check>) {
    ecc(g, out);
    memory_repair(g, out);
    recovery(g, out);
    clocks(g, window, out);
    pcie(g, out);
    modes(g, out);
}

/// NVLink from `nvidia-smi nvlink --status`: every link up, or none there.
pub fn nvlink(g: &NvGpu, links: Option<&[(u32, Option<f64>)]>, out: &mut Vec<Check>) {
    let label = g.label();
    let c = Check::new("nvlink.state", Some(&label), "nvidia-smi nvlink --status")
        .threshold("every link up");
    out.push(match links {
        None | Some([]) => c.not_applicable("no NVLink on this GPU (a PCIe card, or links not reported)"),
        Some(l) => {
            let down: Vec<String> = l.iter().filter(|(_, s)| s.is_none()).map(|(n, _)| n.to_string()).collect();
            let c = c.measured(format!("{} of {} links up", l.len() - down.len(), l.len()));
            if down.is_empty() {
                c.pass()
            } else {
                c.fail(format!(
                    "NVLink link(s) {} inactive: drain the node, reset the GPUs; check the NVLink bridge or the baseboard (fabric manager log)",
                    down.join(", ")
                ))
            }
        }
    });
}

/// Every passive check of one AMD GPU (sysfs RAS and link, amd-smi ECC and XGMI).
pub fn amd_gpu(g: &AmdGpu, out: &mut Vec<Check>) {
    let label = g.label();
    let gpu = Some(label.as_str());
    let ras = Check::new(
        "ecc.uncorrectable",
        gpu,
        "sysfs ras/*_err_count; amd-smi metric ecc",
    )
    .threshold("0");
    out.push(match g.ecc_uncorrectable {
        None => ras.not_applicable("no RAS counters (RAS disabled in the driver, or not supported)"),
        Some(0) => ras.measured("0").pass(),
        Some(n) => {
            let blocks: Vec<String> = g.ras.iter().filter(|(_, ue, _)| *ue > 0).map(|(b, ue, _)| format!("{b} {ue}")).collect();
            ras.measured(if blocks.is_empty() { n.to_string() } else { format!("{n} ({})", blocks.join(", ")) })
                .fail("uncorrectable RAS errors: drain the node, reset the GPU (amd-smi reset -G) and check amd-smi bad-pages; RMA if they recur")
        }
    });
    let ce = Check::new(
        "ecc.correctable",
        gpu,
        "sysfs ras/*_err_count; amd-smi metric ecc",
    )
    .threshold(format!("< {CORRECTABLE_WARN}"));
    out.push(match g.ecc_correctable {
        None => ce.not_applicable("no RAS counters"),
        Some(n) if n < CORRECTABLE_WARN => ce.measured(n.to_string()).pass(),
        Some(n) => ce.measured(n.to_string()).warn(
            "a stream of correctable errors: watch amd-smi bad-pages; reset at the next drain",
        ),
    });
    if let Some(d) = g.ecc_deferred {
        let c = Check::new(
            "ecc.deferred",
            gpu,
            "amd-smi metric ecc/total_deferred_count",
        )
        .threshold("0")
        .measured(d.to_string());
        out.push(if d == 0 {
            c.pass()
        } else {
            c.warn("deferred (poisoned) errors were consumed: reset the GPU at the next drain")
        });
    }
    let x = Check::new("xgmi.errors", gpu, "amd-smi metric xgmi_err").threshold("0");
    out.push(match g.xgmi_errors {
        None => x.not_applicable("XGMI errors not reported (amd-smi not installed, or no XGMI)"),
        Some(0) => x.measured("0").pass(),
        Some(n) => x
            .measured(n.to_string())
            .fail("XGMI link errors: drain the node, reset the hive; check the OAM seating"),
    });
    out.push(link_verdict(
        Check::new(
            "pcie.link",
            gpu,
            "sysfs current_link_speed/width, max_link_speed/width",
        ),
        (g.gen_current, g.width_current),
        (g.gen_max, g.width_max),
        None,
        None,
    ));
}
