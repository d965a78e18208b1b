//! GPU sanitizer reports read into grouped hazards: what the log-based detectors can only
//! call `illegal_memory_access` or a hang, with the kernel, the place and the count. One
//! parser per vendor ([`cuda`]: compute-sanitizer's text logs; [`rocm`]: RocJITsu's
//! combined Waitcheck + ConSan hook, as AORTA 0.3.0 reads it); the grouping and the report
//! are shared here.

mod cuda;
mod rocm;

pub use cuda::{parse_sanitizer_logs, SANITIZER_PARSER_VERSION};
pub use rocm::{parse_rocjitsu_logs, ROCJITSU_PARSER_VERSION};

use aorta_trial::{Hazard, SanitizerReport};
use std::collections::HashMap;

/// Hazards of one kind at one place (kernel, location) added up, in first-seen order.
#[derive(Default)]
struct Groups {
    hazards: Vec<Hazard>,
    index: HashMap<(String, Option<String>, Option<String>), usize>,
}

impl Groups {
    fn add(&mut self, h: Hazard) {
        let k = (h.kind.clone(), h.kernel.clone(), h.location.clone());
        match self.index.get(&k) {
            Some(&i) => self.hazards[i].count = self.hazards[i].count.saturating_add(h.count),
            None => {
                self.index.insert(k, self.hazards.len());
                self.hazards.push(h);
            }
        }
    }

    /// The report: most frequent first; `errors` is the tool's own total where it printed
    /// one, else the hazards listed.
    fn into_report(
        mut self,
        tool: &str,
        summarised: Option<u64>,
        logs: Vec<String>,
        complete: bool,
        gaps: Vec<String>,
    ) -> SanitizerReport {
        self.hazards.sort_by_key(|h| std::cmp::Reverse(h.count));
        let listed = self
            .hazards
            .iter()
            .fold(0u64, |n, h| n.saturating_add(h.count));
        SanitizerReport {
            tool: tool.to_string(),
            errors: summarised.unwrap_or(listed),
            hazards: self.hazards,
            logs,
            complete,
            gaps,
        }
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Lines near the shapes both parsers read, so the generated text reaches their branches.
    fn line() -> impl Strategy<Value = String> {
        prop_oneof![
            "\\PC{0,40}",
            "========= {0,6}[A-Za-z _:()+0-9x.]{0,40}",
            "=========     at [a-z]{1,5}\\+0x[0-9a-f]{1,3} in [a-z]{1,3}\\.cu:[0-9]{1,3}",
            "========= (ERROR SUMMARY: [0-9]{1,25} errors?|RACECHECK SUMMARY: [0-9]{1,3} hazards displayed \\([0-9]{1,25} errors, [0-9]{1,3} warnings\\))",
            "\\[rocjitsu-dbi-hooks\\] ConSan (MOI auto replay( diagnostic)?|coverage|coverage_site|analysis verdict)( [a-z_]{1,20}=[a-z0-9/\\[\\),]{0,8}){0,12}",
            "rocjitsu-waitcheck: (\\.text\\+0x[0-9a-f]{1,3}: )?(missing s_wait_loadcnt|consumer: v_mov|reason=(wait-hazard|analysis-failed))( [a-z]{1,8}=[0-9a-z]{0,4}){0,3}",
        ]
    }

    proptest! {
        /// A log is whatever a killed or misbehaving process left: reading it never panics.
        #[test]
        fn arbitrary_text_never_panics(lines in proptest::collection::vec(line(), 0..30)) {
            let text = lines.join("\n");
            for tool in ["memcheck", "racecheck"] {
                let r = parse_sanitizer_logs(tool, [("a.log", text.as_str())]);
                prop_assert!(r.hazards.iter().all(|h| h.count > 0));
            }
            for tool in ["consan", "waitcheck"] {
                let r = parse_rocjitsu_logs(tool, [("stderr.log", text.as_str())]);
                prop_assert!(r.hazards.iter().all(|h| h.count > 0));
                prop_assert!(r.errors == 0 || !r.hazards.is_empty());
            }
        }
    }
}
