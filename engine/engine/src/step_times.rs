//! `step_time_regex` (probe recipes): per-step times read from the trial's own logs, so the
//! confound detector compares the user's step times rather than whole-process wall clocks,
//! which include start-up. AORTA 0.2.1 validates the regex and then ignores it.

use fancy_regex::Regex;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// Samples kept per trial; a log printing millions of steps keeps the first ones.
const MAX_SAMPLES: usize = 1_000_000;

/// Every step time the regex finds, line by line, stdout's before stderr's. The value is the
/// group named `ms` if there is one, else group 1, else the whole match; it must parse as a
/// finite, non-negative number of milliseconds (other matches are skipped).
pub fn from_logs(re: &Regex, logs: &[&Path]) -> Vec<f64> {
    let mut out = Vec::new();
    for log in logs {
        let Ok(f) = std::fs::File::open(log) else {
            continue;
        };
        // Lines as bytes: a log is not always UTF-8, and one bad byte must not hide the rest.
        for line in BufReader::new(f).split(b'\n').map_while(Result::ok) {
            let text = String::from_utf8_lossy(&line);
            for caps in re.captures_iter(text.as_ref()).map_while(Result::ok) {
                let m = caps
                    .name("ms")
                    .or_else(|| caps.get(1))
                    .or_else(|| caps.get(0));
                if let Some(v) = m
                    .and_then(|m| m.as_str().trim().parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v >= 0.0)
                {
                    out.push(v);
                    if out.len() >= MAX_SAMPLES {
                        return out;
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_groups_in_order_and_skips_junk() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("stdout.log");
        let err = d.path().join("stderr.log");
        std::fs::write(&out, b"start\nstep 1 took 12.5 ms\nstep 2 took 13 ms\nstep 3 took nan ms\n\xff\xfe step 4 took 11.0 ms\n").unwrap();
        std::fs::write(&err, "step 5 took 14.25 ms\n").unwrap();
        let re = Regex::new(r"took (\S+) ms").unwrap();
        assert_eq!(from_logs(&re, &[&out, &err]), vec![12.5, 13.0, 11.0, 14.25]);
        let named = Regex::new(r"step (\d+) took (?P<ms>[\d.]+)").unwrap();
        assert_eq!(from_logs(&named, &[&out]), vec![12.5, 13.0, 11.0]);
        let whole = Regex::new(r"\d+\.\d+(?= ms)").unwrap();
        assert_eq!(from_logs(&whole, &[&out]), vec![12.5, 11.0]);
        assert!(from_logs(&re, &[&d.path().join("missing.log")]).is_empty());
    }
}
