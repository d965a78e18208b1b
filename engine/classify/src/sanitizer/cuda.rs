//! compute-sanitizer's text reports (memcheck, racecheck, synccheck, initcheck; CUDA 12 and
//! 13) read into grouped hazards, with the kernel, the source line and the allocation.
//!
//! A report is a sequence of records, each a header line (`========= Invalid __global__ write
//! of size 4 bytes`) and indented detail lines (`=========     at oob(float *, int)+0xa0 in
//! oob.cu:5`), closed by a summary (`ERROR SUMMARY: 129 errors`, `RACECHECK SUMMARY: …`).
//! Fixtures recorded on the H100: tests/fixtures/gpu/h100-cuda13/.

use super::Groups;
use aorta_trial::{Hazard, SanitizerReport};
use regex::Regex;
use std::sync::LazyLock;

/// Bumped when the parser reads the same report differently: part of a compute-sanitizer
/// cell's key.
pub const SANITIZER_PARSER_VERSION: u32 = 1;

const PREFIX: &str = "=========";

static AT_IN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^at (.+?)\+0x[0-9a-fA-F]+ in (\S+:\d+)$").unwrap());
static AT_BARE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^at (.+?)\+0x[0-9a-fA-F]+$").unwrap());
/// CUDA 11/12: `at 0x70 in /path/oob.cu:5:oob(float*, int)`.
static AT_OLD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^at 0x[0-9a-fA-F]+ in (?:.*/)?([^/:]+:\d+):(.+)$").unwrap());
static RACE_HEAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:Error|Warning): Race reported between (\w+) access at (.+?)\+0x[0-9a-fA-F]+(?: in (\S+:\d+))?$").unwrap()
});
static RACE_AND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^and (\w+) access at (.+?)\+0x[0-9a-fA-F]+(?: in (\S+:\d+))? \[(\d+) hazards?\]$")
        .unwrap()
});
static HAZARD_HEAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:Error|Warning): Potential (\w+) hazard detected at (__\w+__) ").unwrap()
});
static THREAD_AT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\w+ Thread \([\d,]+\) at (.+?)\+0x[0-9a-fA-F]+(?: in (\S+:\d+))?$").unwrap()
});
static ERROR_SUMMARY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^ERROR SUMMARY: (\d+) errors?$").unwrap());
static RACE_SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)$")
        .unwrap()
});
static ADDRESS_DETAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(Access to 0x|and is \d+ bytes (before|after)|Address 0x)").unwrap()
});

/// One record while it is read.
#[derive(Default)]
struct Record {
    kind: String,
    kernel: Option<String>,
    locations: Vec<String>,
    detail: Vec<String>,
    /// Race pairs of racecheck's analysis mode, each a hazard of its own.
    pairs: Vec<Hazard>,
}

/// Reads one or more logs of one tool (one per process) into a report.
pub fn parse_sanitizer_logs<'a>(
    tool: &str,
    logs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> SanitizerReport {
    let mut groups = Groups::default();
    let mut summarised: Option<u64> = None;
    let mut names = Vec::new();
    let mut add = |h: Hazard| groups.add(h);
    for (name, text) in logs {
        names.push(name.to_string());
        let mut current: Option<Record> = None;
        for raw in text.lines() {
            let Some(rest) = raw.strip_prefix(PREFIX) else {
                continue;
            };
            let body = rest.trim();
            let indented = rest.starts_with("  ");
            if body.is_empty() {
                if let Some(r) = current.take() {
                    finish(r, &mut add);
                }
                continue;
            }
            if !indented {
                if let Some(r) = current.take() {
                    finish(r, &mut add);
                }
                // Saturating: a hostile or garbled log must not overflow the total.
                let total = ERROR_SUMMARY
                    .captures(body)
                    .or_else(|| RACE_SUMMARY.captures(body))
                    .map(|c| c[1].parse::<u64>().unwrap_or(0));
                if let Some(n) = total {
                    let t = summarised.get_or_insert(0);
                    *t = t.saturating_add(n);
                }
                if total.is_none() && !is_banner(body) {
                    current = Some(header(body));
                }
                continue;
            }
            if let Some(r) = current.as_mut() {
                detail_line(r, body);
            }
        }
        if let Some(r) = current.take() {
            finish(r, &mut add);
        }
    }
    groups.into_report(tool, summarised, names, summarised.is_some(), Vec::new())
}

fn is_banner(body: &str) -> bool {
    body == "COMPUTE-SANITIZER"
        || body.starts_with("Target application returned an error")
        || body.starts_with("ERROR SUMMARY:")
        || body.starts_with("LEAK SUMMARY:")
}

fn header(body: &str) -> Record {
    if let Some(c) = RACE_HEAD.captures(body) {
        return Record {
            kind: c[1].to_string(),
            kernel: Some(c[2].to_string()),
            locations: c
                .get(3)
                .map(|m| m.as_str().to_string())
                .into_iter()
                .collect(),
            ..Record::default()
        };
    }
    if let Some(c) = HAZARD_HEAD.captures(body) {
        return Record {
            kind: format!("Potential {} hazard on {} memory", &c[1], &c[2]),
            ..Record::default()
        };
    }
    Record {
        kind: body.to_string(),
        ..Record::default()
    }
}

fn detail_line(r: &mut Record, body: &str) {
    if let Some(c) = RACE_AND.captures(body) {
        let first = r.locations.first().cloned();
        let second = c.get(3).map(|m| m.as_str().to_string());
        r.pairs.push(Hazard {
            kind: format!("Race between {} access and {} access", r.kind, &c[1]),
            kernel: r.kernel.clone(),
            location: match (first, second) {
                (Some(a), Some(b)) => Some(format!("{a} / {b}")),
                (a, b) => a.or(b),
            },
            count: c[4].parse().unwrap_or(1),
            detail: None,
        });
    } else if let Some(c) = THREAD_AT.captures(body) {
        r.kernel.get_or_insert_with(|| c[1].to_string());
        if let Some(l) = c.get(2) {
            if !r.locations.iter().any(|x| x == l.as_str()) {
                r.locations.push(l.as_str().to_string());
            }
        }
    } else if let Some(c) = AT_IN.captures(body) {
        r.kernel.get_or_insert_with(|| c[1].to_string());
        r.locations.push(c[2].to_string());
    } else if let Some(c) = AT_OLD.captures(body) {
        r.kernel.get_or_insert_with(|| c[2].to_string());
        r.locations.push(c[1].to_string());
    } else if let Some(c) = AT_BARE.captures(body) {
        r.kernel.get_or_insert_with(|| c[1].to_string());
    } else if ADDRESS_DETAIL.is_match(body) {
        r.detail.push(body.to_string());
    }
}

fn finish(r: Record, add: &mut impl FnMut(Hazard)) {
    if !r.pairs.is_empty() {
        r.pairs.into_iter().for_each(add);
        return;
    }
    add(Hazard {
        kind: r.kind,
        kernel: r.kernel,
        location: (!r.locations.is_empty()).then(|| r.locations.join(" / ")),
        count: 1,
        detail: (!r.detail.is_empty()).then(|| r.detail.join("; ")),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/gpu/h100-cuda13/"
        );
        std::fs::read_to_string(format!("{p}{name}")).unwrap()
    }

    fn parse(tool: &str, name: &str) -> SanitizerReport {
        let text = fixture(name);
        parse_sanitizer_logs(tool, [(name, text.as_str())])
    }

    #[test]
    fn memcheck_names_the_write_the_kernel_the_line_and_the_allocation() {
        let r = parse("memcheck", "cs13-memcheck-oob.txt");
        assert_eq!(
            r.errors, 129,
            "the summary counts the errors not printed too"
        );
        assert!(r.complete);
        let h = &r.hazards[0];
        assert_eq!(h.kind, "Invalid __global__ write of size 4 bytes");
        assert_eq!(h.kernel.as_deref(), Some("oob(float *, int)"));
        assert_eq!(h.location.as_deref(), Some("oob.cu:5"));
        assert_eq!(h.count, 100, "--print-limit's 100 printed");
        assert!(h.detail.as_deref().unwrap().contains("of size 512 bytes"));
        assert!(r.summary().starts_with(
            "memcheck: 129 errors; 100 × Invalid __global__ write of size 4 bytes in oob(float *, int) at oob.cu:5 (Access to 0x"
        ), "{}", r.summary());
    }

    #[test]
    fn racecheck_analysis_and_hazard_modes() {
        let r = parse("racecheck", "cs13-racecheck-race.txt");
        assert_eq!(r.errors, 1);
        assert_eq!(r.hazards.len(), 2);
        assert_eq!(
            r.hazards[0].kind,
            "Race between Write access and Write access"
        );
        assert_eq!(r.hazards[0].count, 223);
        assert_eq!(
            r.hazards[0].location.as_deref(),
            Some("race.cu:5 / race.cu:5")
        );
        assert_eq!(
            r.hazards[1].kind,
            "Race between Write access and Read access"
        );
        assert_eq!(
            r.hazards[1].location.as_deref(),
            Some("race.cu:5 / race.cu:6")
        );
        assert_eq!(r.hazards[1].kernel.as_deref(), Some("shared_race(int *)"));
        let r = parse("racecheck", "cs13-racecheck-race-hazard.txt");
        assert_eq!(r.errors, 231);
        assert_eq!(r.hazards.len(), 1);
        assert_eq!(
            r.hazards[0].kind,
            "Potential WAW hazard on __shared__ memory"
        );
        assert_eq!(r.hazards[0].count, 100);
        assert_eq!(r.hazards[0].location.as_deref(), Some("race.cu:5"));
    }

    #[test]
    fn initcheck_and_synccheck() {
        let r = parse("initcheck", "cs13-initcheck-init.txt");
        assert_eq!((r.errors, r.hazards[0].count), (64, 64));
        assert_eq!(
            r.hazards[0].kind,
            "Uninitialized __global__ memory read of size 4 bytes"
        );
        assert_eq!(r.hazards[0].location.as_deref(), Some("init.cu:5"));
        let r = parse("synccheck", "cs13-synccheck-sync.txt");
        assert_eq!((r.errors, r.hazards[0].count), (32, 32));
        assert_eq!(
            r.hazards[0].kind,
            "Barrier error detected. Divergent thread(s) in warp."
        );
        assert_eq!(
            r.hazards[0].kernel.as_deref(),
            Some("divergent_barrier(int *)")
        );
    }

    #[test]
    fn a_clean_program_reports_nothing_under_every_tool() {
        for tool in ["memcheck", "racecheck", "synccheck", "initcheck"] {
            let r = parse(tool, &format!("cs13-{tool}-clean.txt"));
            assert_eq!(
                (r.errors, r.hazards.len(), r.complete),
                (0, 0, true),
                "{tool}"
            );
        }
    }

    #[test]
    fn cuda12_locations_and_a_log_cut_short() {
        let text = "========= COMPUTE-SANITIZER\n\
            ========= Invalid __global__ read of size 4 bytes\n\
            =========     at 0x70 in /src/k.cu:12:gather(float*, int const*)\n\
            =========     by thread (3,0,0) in block (0,0,0)\n\
            =========     Address 0x7f00 is out of bounds\n";
        let r = parse_sanitizer_logs("memcheck", [("a.log", text)]);
        assert!(!r.complete);
        assert_eq!(r.errors, 1);
        assert_eq!(r.hazards[0].location.as_deref(), Some("k.cu:12"));
        assert_eq!(
            r.hazards[0].kernel.as_deref(),
            Some("gather(float*, int const*)")
        );
        assert!(r.summary().ends_with("(log incomplete: no summary line)"));
    }

    #[test]
    fn reports_of_several_processes_add_up() {
        let a = fixture("cs13-initcheck-init.txt");
        let b = fixture("cs13-initcheck-init.txt");
        let r = parse_sanitizer_logs("initcheck", [("1.log", a.as_str()), ("2.log", b.as_str())]);
        assert_eq!((r.errors, r.hazards[0].count, r.logs.len()), (128, 128, 2));
    }
}
