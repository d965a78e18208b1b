//! RocJITsu's combined Waitcheck + ConSan hook (`librocjitsu_dbi_hooks.so`, loaded through
//! `HSA_TOOLS_LIB`) read as AORTA 0.3.0 reads it: the hook prints into the instrumented
//! process's own stdout and stderr, which are read as one stream
//! (`rocjitsu_sanitizers/consan.py::evaluate_record_replay`).
//!
//! - ConSan (`[rocjitsu-dbi-hooks] ConSan …` anywhere in a line): `auto replay diagnostic`
//!   lines are races; `auto replay … diagnostics=N conflict=…` summaries add the conflicts no
//!   detail line names, per reader (`parse_record_replay_output`); `coverage`,
//!   `coverage_site` and `analysis verdict` lines are the coverage evidence, cross-checked
//!   strictly (`consan_coverage.py::parse_coverage_decision`): evidence that is missing or
//!   contradicts itself, or coverage that is incomplete, is a gap and never a pass.
//! - Waitcheck (`rocjitsu-waitcheck: …`): `missing s_wait`/`hazard` lines are hazards, the
//!   `producer`/`consumer` lines after one its context; `reason=wait-hazard` is a summary
//!   that counts only when no detail line came; `reason=analysis-failed` is a gap
//!   (`consan.py::_parse_waitcheck`).
//!
//! Fixtures reconstructed from those parsers: tests/fixtures/rocm/rocjitsu/README.md.

use super::Groups;
use aorta_trial::{Hazard, SanitizerReport};
use regex::Regex;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::LazyLock;

/// Bumped when the parser reads the same hook output differently: part of a RocJITsu
/// cell's key (compute-sanitizer cells keep theirs).
pub const ROCJITSU_PARSER_VERSION: u32 = 1;

const CONSAN: &str = "[rocjitsu-dbi-hooks] ConSan";
const WAITCHECK: &str = "rocjitsu-waitcheck:";
const SITE_KINDS: [&str; 4] = ["access", "barrier", "atomic", "fence"];
const CATEGORIES: [&str; 8] = [
    "discovered",
    "supported",
    "selected",
    "patched",
    "unsupported",
    "resource_failed",
    "placement_or_lowering_failed",
    "expert_limit_omitted",
];
const VERDICT_COUNTS: [&str; 7] = [
    "applicable_code_objects",
    "incomplete_code_objects",
    "dynamic_incomplete",
    "replay_unsupported_access",
    "replay_unsupported_atomics",
    "replay_unsupported_fences",
    "replay_metadata_full",
];
const SITE_FIELDS: [&str; 11] = [
    "reader",
    "kind",
    "disposition",
    "reason",
    "outcome",
    "lowering_reason",
    "resource_reason",
    "container",
    "scope",
    "text",
    "mnemonic",
];

static KV: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(\w+)=(\S+)").unwrap());
static AUTO_REPLAY_DIAGNOSTIC: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bauto\s+replay\s+diagnostic(?:\s|$)").unwrap());
static WAIT_HAZARD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)missing\s+s_wait|hazard").unwrap());
static WAIT_CONTEXT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^(producer|consumer)\b").unwrap());
/// A Waitcheck site at the head of its message: `.text+0x40: missing s_wait_loadcnt <= 0`.
static WAIT_SITE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(\.text\+0x[0-9a-fA-F]+):\s*(.*)$").unwrap());
static KEY: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*$").unwrap());
static COUNT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^(?:0|[1-9][0-9]*)$").unwrap());
static PAIR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(0|[1-9][0-9]*)/(0|[1-9][0-9]*)$").unwrap());

/// Reads the logs of one RocJITsu cell (the trial's stdout.log and stderr.log) for `tool`
/// (`consan` or `waitcheck`). The report's `logs` are those that carry the hook's lines: none
/// means the hook never spoke (not loaded).
pub fn parse_rocjitsu_logs<'a>(
    tool: &str,
    logs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> SanitizerReport {
    let mut names = Vec::new();
    let mut stream = String::new();
    for (name, text) in logs {
        if text
            .lines()
            .any(|l| l.contains(CONSAN) || l.trim_start().starts_with(WAITCHECK))
        {
            names.push(name.to_string());
        }
        stream.push_str(text);
        stream.push('\n');
    }
    let mut groups = Groups::default();
    let mut gaps = Vec::new();
    // Unreadable coverage evidence fails both checks (AORTA parses it before judging either);
    // coverage that reads well but is incomplete fails ConSan only.
    match coverage_decision(&stream) {
        Err(e) => gaps.push(format!("ConSan evidence unreadable: {e}")),
        Ok(reasons) if tool == "consan" => {
            gaps.extend(reasons.into_iter().map(|r| format!("coverage: {r}")))
        }
        Ok(_) => {}
    }
    if tool == "consan" {
        match consan_hazards(&stream) {
            Ok(hs) => hs.into_iter().for_each(|h| groups.add(h)),
            Err(e) => gaps.push(format!("ConSan evidence unreadable: {e}")),
        }
    } else {
        let (hs, failed) = waitcheck_hazards(&stream);
        hs.into_iter().for_each(|h| groups.add(h));
        gaps.extend(
            failed
                .into_iter()
                .map(|l| format!("Waitcheck analysis failed: {l}")),
        );
    }
    if names.is_empty() {
        // Nothing from the hook at all: the caller reports "no report", not these gaps.
        gaps.clear();
    }
    let complete = !names.is_empty() && gaps.is_empty();
    groups.into_report(tool, None, names, complete, gaps)
}

fn fields(line: &str) -> Vec<(String, String)> {
    KV.captures_iter(line)
        .map(|c| (c[1].to_string(), c[2].to_string()))
        .collect()
}

fn field<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    // AORTA builds a dict from the pairs: the last one of a name wins.
    fields
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The races: `parse_record_replay_output`'s detail lines (identical lines once) and, per
/// reader, the conflicts a summary counts beyond its detail lines.
fn consan_hazards(stream: &str) -> Result<Vec<Hazard>, String> {
    let mut details: Vec<Vec<(String, String)>> = Vec::new();
    let mut seen = HashSet::new();
    let mut summaries = Vec::new();
    for raw in stream.lines() {
        let line = raw.trim();
        if !line.contains(CONSAN) {
            continue;
        }
        let fs = fields(line);
        if AUTO_REPLAY_DIAGNOSTIC.is_match(line) {
            if seen.insert(line.to_string()) {
                details.push(fs);
            }
        } else if line.to_lowercase().contains("auto replay") {
            summaries.push(fs);
        }
    }
    let mut by_reader: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    for fs in &details {
        *by_reader
            .entry(field(fs, "reader").unwrap_or("").to_string())
            .or_default() += 1;
        let detail: Vec<String> = fs
            .iter()
            .filter(|(k, _)| k != "kind" && k != "kernel")
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out.push(Hazard {
            kind: match field(fs, "kind") {
                Some(k) => format!("ConSan Record/Replay conflict (kind={k})"),
                None => "ConSan Record/Replay conflict".into(),
            },
            kernel: field(fs, "kernel").map(str::to_string),
            location: None,
            count: 1,
            detail: (!detail.is_empty()).then(|| detail.join(" ")),
        });
    }
    for fs in &summaries {
        let diagnostics = match field(fs, "diagnostics") {
            None => 0,
            Some(v) => v
                .parse::<u64>()
                .map_err(|_| format!("ConSan field diagnostics must be an integer, got '{v}'"))?,
        };
        let conflict = field(fs, "conflict").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let reader = field(fs, "reader").unwrap_or("");
        let detailed = by_reader.get(reader).copied().unwrap_or(0);
        if (conflict || diagnostics > 0) && detailed < diagnostics {
            out.push(Hazard {
                kind: "ConSan Record/Replay conflicts reported only in a summary".into(),
                kernel: None,
                location: None,
                count: diagnostics - detailed,
                detail: (!reader.is_empty()).then(|| format!("reader={reader}")),
            });
        }
    }
    Ok(out)
}

/// The hook's Waitcheck stage: hazards, and the `analysis-failed` lines (gaps).
fn waitcheck_hazards(stream: &str) -> (Vec<Hazard>, Vec<String>) {
    let mut found: Vec<(Hazard, Vec<String>)> = Vec::new();
    let mut summaries: Vec<Vec<(String, String)>> = Vec::new();
    let mut failed = Vec::new();
    for raw in stream.lines() {
        let mut line = raw.trim();
        let prefixed = line.starts_with(WAITCHECK);
        if prefixed {
            line = line[WAITCHECK.len()..].trim();
        }
        if WAIT_CONTEXT.is_match(line) {
            if let Some((_, context)) = found.last_mut() {
                context.push(line.to_string());
            }
            continue;
        }
        if !prefixed {
            continue;
        }
        let fs = fields(line);
        match field(&fs, "reason") {
            Some("analysis-failed") => failed.push(line.to_string()),
            Some("wait-hazard") => summaries.push(fs),
            _ if WAIT_HAZARD.is_match(line) => {
                let (site, message) = match WAIT_SITE.captures(line) {
                    Some(c) => (Some(c[1].to_string()), c[2].to_string()),
                    None => (None, line.to_string()),
                };
                let mut detail: Vec<String> = site.map(|s| format!("at {s}")).into_iter().collect();
                if let Some(o) = field(&fs, "code_object") {
                    detail.push(format!("code_object={o}"));
                }
                found.push((
                    Hazard {
                        kind: message,
                        kernel: field(&fs, "kernel").map(str::to_string),
                        location: None,
                        count: 1,
                        detail: (!detail.is_empty()).then(|| detail.join("; ")),
                    },
                    Vec::new(),
                ));
            }
            _ => {}
        }
    }
    // Identical findings (with their context) once, as AORTA's dedupe does.
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (mut h, context) in found {
        if !context.is_empty() {
            let d = h
                .detail
                .take()
                .into_iter()
                .chain(context)
                .collect::<Vec<_>>();
            h.detail = Some(d.join("; "));
        }
        if seen.insert(format!("{h:?}")) {
            out.push(h);
        }
    }
    if out.is_empty() {
        if let Some(fs) = summaries.first() {
            let detail: Vec<String> = fs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push(Hazard {
                kind: "Waitcheck reported hazards only in a summary".into(),
                kernel: None,
                location: None,
                count: 1,
                detail: (!detail.is_empty()).then(|| detail.join(" ")),
            });
        }
    }
    (out, failed)
}

/// One `coverage` record: per code object (reader, load) the site counts by kind.
struct Coverage {
    reader: u64,
    load: Option<u64>,
    analysis_complete: bool,
    expert_limit: bool,
    counts: BTreeMap<String, u64>,
}

impl Coverage {
    fn applicable(&self) -> bool {
        SITE_KINDS
            .iter()
            .any(|k| self.counts[&format!("{k}_discovered")] != 0)
    }
}

struct Verdict {
    flags: [bool; 4],
    counts: BTreeMap<&'static str, u64>,
    pairs: BTreeMap<&'static str, (u64, u64)>,
}

struct Site {
    id: (u64, Option<u64>),
    kind: String,
    disposition: String,
    outcome: String,
    lowering_reason: String,
    resource_reason: String,
}

type Fields = BTreeMap<String, String>;

/// `name=value` tokens, each name once, nothing else (`consan_coverage.py::_fields`).
fn strict_fields(payload: &str, context: &str) -> Result<Fields, String> {
    let mut out = Fields::new();
    for token in payload.split_whitespace() {
        let bad = || format!("{context}: malformed field '{token}'");
        let (k, v) = token.split_once('=').ok_or_else(bad)?;
        if !KEY.is_match(k) || v.is_empty() || out.contains_key(k) {
            return Err(bad());
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

fn require(f: &Fields, names: &[&str], context: &str) -> Result<(), String> {
    let missing: Vec<&str> = names
        .iter()
        .filter(|n| !f.contains_key(**n))
        .copied()
        .collect();
    match missing.is_empty() {
        true => Ok(()),
        false => Err(format!("{context}: missing fields: {}", missing.join(", "))),
    }
}

fn count(f: &Fields, name: &str, context: &str) -> Result<u64, String> {
    let v = &f[name];
    match COUNT.is_match(v) {
        true => v
            .parse()
            .map_err(|_| format!("{context}: {name} is out of range: '{v}'")),
        false => Err(format!(
            "{context}: {name} is not an unsigned decimal count: '{v}'"
        )),
    }
}

fn boolean(f: &Fields, name: &str, context: &str) -> Result<bool, String> {
    match f[name].as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        v => Err(format!(
            "{context}: {name} must be true or false, got '{v}'"
        )),
    }
}

fn load(f: &Fields, context: &str) -> Result<Option<u64>, String> {
    if !f.contains_key("load") {
        return Ok(None);
    }
    match count(f, "load", context)? {
        0 => Err(format!("{context}: load must be nonzero")),
        n => Ok(Some(n)),
    }
}

fn parse_coverage(payload: &str, n: usize) -> Result<Coverage, String> {
    let context = format!("coverage line {n}");
    let f = strict_fields(payload, &context)?;
    let names: Vec<String> = SITE_KINDS
        .iter()
        .flat_map(|k| CATEGORIES.iter().map(move |c| format!("{k}_{c}")))
        .collect();
    let mut required = vec![
        "reader",
        "flavor",
        "engine",
        "analysis_complete",
        "expert_limit",
    ];
    required.extend(names.iter().map(String::as_str));
    require(&f, &required, &context)?;
    if !["moi", "supercollider"].contains(&f["flavor"].as_str()) {
        return Err(format!("{context}: unsupported flavor"));
    }
    if !["record_replay", "inline_shadow", "sampled", "supercollider"]
        .contains(&f["engine"].as_str())
    {
        return Err(format!("{context}: unsupported engine"));
    }
    let mut counts = BTreeMap::new();
    for name in &names {
        counts.insert(name.clone(), count(&f, name, &context)?);
    }
    let mut complete = true;
    for k in SITE_KINDS {
        let c = |cat: &str| counts[&format!("{k}_{cat}")];
        if c("discovered") != c("supported") + c("unsupported") {
            return Err(format!(
                "{context}: {k} discovered != supported + unsupported"
            ));
        }
        if c("supported") != c("selected") + c("expert_limit_omitted") {
            return Err(format!(
                "{context}: {k} supported != selected + expert omissions"
            ));
        }
        if c("selected") != c("patched") + c("resource_failed") + c("placement_or_lowering_failed")
        {
            return Err(format!("{context}: {k} selected != patched + failures"));
        }
        complete &= c("unsupported") == 0
            && c("resource_failed") == 0
            && c("placement_or_lowering_failed") == 0
            && c("expert_limit_omitted") == 0;
    }
    let analysis_complete = boolean(&f, "analysis_complete", &context)?;
    if analysis_complete != complete {
        return Err(format!("{context}: analysis_complete contradicts counters"));
    }
    Ok(Coverage {
        reader: count(&f, "reader", &context)?,
        load: load(&f, &context)?,
        analysis_complete,
        expert_limit: boolean(&f, "expert_limit", &context)?,
        counts,
    })
}

const VERDICT_FLAGS: [&str; 4] = [
    "applicable",
    "analysis_complete",
    "static_complete",
    "dynamic_complete",
];

fn parse_verdict(payload: &str, n: usize) -> Result<Verdict, String> {
    let context = format!("analysis verdict line {n}");
    let f = strict_fields(payload, &context)?;
    let mut required: Vec<&str> = VERDICT_FLAGS.to_vec();
    required.extend(SITE_KINDS);
    required.extend(VERDICT_COUNTS);
    require(&f, &required, &context)?;
    let mut counts = BTreeMap::new();
    for name in VERDICT_COUNTS {
        counts.insert(name, count(&f, name, &context)?);
    }
    let mut pairs = BTreeMap::new();
    for k in SITE_KINDS {
        let c = PAIR
            .captures(&f[k])
            .ok_or_else(|| format!("{context}: {k} must be a patched/supported pair"))?;
        let n = |i: usize| {
            c[i].parse::<u64>()
                .map_err(|_| format!("{context}: {k} is out of range"))
        };
        pairs.insert(k, (n(1)?, n(2)?));
    }
    let mut flags = [false; 4];
    for (i, name) in VERDICT_FLAGS.iter().enumerate() {
        flags[i] = boolean(&f, name, &context)?;
    }
    Ok(Verdict {
        flags,
        counts,
        pairs,
    })
}

/// `parse_coverage_decision`: `Err` when the evidence is missing, malformed or contradicts
/// itself; else why the coverage is not complete (empty: accepted).
fn coverage_decision(stream: &str) -> Result<Vec<String>, String> {
    let prefix = format!("{CONSAN} ");
    let mut coverage = Vec::new();
    let mut verdicts = Vec::new();
    let mut sites = Vec::new();
    for (i, line) in stream.lines().enumerate() {
        let n = i + 1;
        let Some(at) = line.find(&prefix) else {
            continue;
        };
        let payload = &line[at + prefix.len()..];
        if let Some(p) = payload.strip_prefix("coverage ") {
            coverage.push(parse_coverage(p, n)?);
        } else if let Some(p) = payload.strip_prefix("coverage_site ") {
            let context = format!("coverage_site line {n}");
            let f = strict_fields(p, &context)?;
            require(&f, &SITE_FIELDS, &context)?;
            if !SITE_KINDS.contains(&f["kind"].as_str()) {
                return Err(format!("{context}: unsupported kind"));
            }
            sites.push(Site {
                id: (count(&f, "reader", &context)?, load(&f, &context)?),
                kind: f["kind"].clone(),
                disposition: f["disposition"].clone(),
                outcome: f["outcome"].clone(),
                lowering_reason: f["lowering_reason"].clone(),
                resource_reason: f["resource_reason"].clone(),
            });
        } else if let Some(p) = payload.strip_prefix("analysis verdict ") {
            verdicts.push(parse_verdict(p, n)?);
        }
    }
    if coverage.is_empty() {
        return Err("missing ConSan coverage record".into());
    }
    if verdicts.is_empty() {
        return Err("missing ConSan analysis verdict".into());
    }
    let ids: HashSet<(u64, Option<u64>)> = coverage.iter().map(|c| (c.reader, c.load)).collect();
    if ids.len() != coverage.len() {
        return Err("ambiguous duplicate coverage identities".into());
    }
    if sites.iter().any(|s| !ids.contains(&s.id)) {
        return Err("coverage_site references an unknown load".into());
    }
    let mut unitemized = Vec::new();
    for c in &coverage {
        for k in SITE_KINDS {
            let kept: Vec<&Site> = sites
                .iter()
                .filter(|s| s.id == (c.reader, c.load) && s.kind == k)
                .collect();
            let cnt = |cat: &str| c.counts[&format!("{k}_{cat}")];
            let discovered = cnt("discovered");
            if discovered > 0 && kept.is_empty() {
                unitemized.push(format!(
                    "reader {} {k} sites not itemized: 0 of {discovered}",
                    c.reader
                ));
                continue;
            }
            let mismatch = |what: &str| format!("reader {} {k} {what} count mismatch", c.reader);
            if kept.len() as u64 != discovered {
                return Err(mismatch("site"));
            }
            for d in ["supported", "unsupported"] {
                if kept.iter().filter(|s| s.disposition == d).count() as u64 != cnt(d) {
                    return Err(mismatch(d));
                }
            }
            if !c.expert_limit {
                for o in ["patched", "resource_failed", "placement_or_lowering_failed"] {
                    if kept.iter().filter(|s| s.outcome == o).count() as u64 != cnt(o) {
                        return Err(mismatch(o));
                    }
                }
            }
        }
    }
    // The verdicts reduced over code objects (`_aggregate`).
    let applicable_verdicts: Vec<&Verdict> = verdicts.iter().filter(|v| v.flags[0]).collect();
    let any = !applicable_verdicts.is_empty();
    let flags = [
        any,
        any && applicable_verdicts.iter().all(|v| v.flags[1]),
        any && applicable_verdicts.iter().all(|v| v.flags[2]),
        verdicts.iter().all(|v| v.flags[3]),
    ];
    let total = |name: &str| verdicts.iter().map(|v| v.counts[name]).sum::<u64>();
    let pair = |k: &str| {
        verdicts.iter().fold((0u64, 0u64), |(p, s), v| {
            (p + v.pairs[k].0, s + v.pairs[k].1)
        })
    };
    let applicable: Vec<&Coverage> = coverage.iter().filter(|c| c.applicable()).collect();
    if applicable.len() as u64 != total("applicable_code_objects") {
        return Err("applicable code-object count disagrees with coverage".into());
    }
    if applicable.iter().filter(|c| !c.analysis_complete).count() as u64
        != total("incomplete_code_objects")
    {
        return Err("incomplete code-object count disagrees with coverage".into());
    }
    for k in SITE_KINDS {
        let sum = applicable.iter().fold((0u64, 0u64), |(p, s), c| {
            (
                p + c.counts[&format!("{k}_patched")],
                s + c.counts[&format!("{k}_supported")],
            )
        });
        if sum != pair(k) {
            return Err(format!("{k} aggregate disagrees with coverage"));
        }
    }
    let mut reasons = Vec::new();
    for (name, ok) in VERDICT_FLAGS.iter().zip(flags) {
        if !ok {
            reasons.push(format!("verdict {name}=false"));
        }
    }
    if total("applicable_code_objects") == 0 {
        reasons.push("no applicable code objects".into());
    }
    for name in &VERDICT_COUNTS[1..] {
        let n = total(name);
        if n != 0 {
            reasons.push(format!("{name}={n}"));
        }
    }
    for k in SITE_KINDS {
        let (p, s) = pair(k);
        if p != s {
            reasons.push(format!("{k} patched/supported mismatch: {p}/{s}"));
        }
    }
    // Why sites failed to lower (`_failure_attributions`), tallied.
    let mut tally: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for s in &sites {
        let reason = match s.outcome.as_str() {
            "placement_or_lowering_failed" => &s.lowering_reason,
            "resource_failed" => &s.resource_reason,
            _ => continue,
        };
        if reason != "none" {
            *tally
                .entry((s.kind.clone(), s.outcome.clone(), reason.clone()))
                .or_default() += 1;
        }
    }
    reasons.extend(
        tally
            .into_iter()
            .map(|((k, o, r), n)| format!("{k} {o}: {n} {r}")),
    );
    reasons.extend(unitemized);
    if coverage.iter().any(|c| c.expert_limit) {
        reasons.push("expert patch limit enabled".into());
    }
    Ok(reasons)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/rocm/rocjitsu/"
        );
        std::fs::read_to_string(format!("{p}{name}")).unwrap()
    }

    fn parse(tool: &str, name: &str) -> SanitizerReport {
        let text = fixture(name);
        parse_rocjitsu_logs(tool, [("stdout.log", ""), ("stderr.log", text.as_str())])
    }

    #[test]
    fn a_clean_run_with_complete_coverage_reports_nothing() {
        for tool in ["consan", "waitcheck"] {
            let r = parse(tool, "consan-clean.txt");
            assert_eq!(
                (r.errors, r.hazards.len(), r.complete),
                (0, 0, true),
                "{tool}: {r:?}"
            );
            assert_eq!(r.logs, ["stderr.log"], "only the log the hook wrote to");
        }
    }

    #[test]
    fn consan_races_with_kernel_object_and_summary_only_conflicts() {
        let r = parse("consan", "consan-race.txt");
        assert!(r.complete, "{r:?}");
        assert_eq!(
            r.errors, 3,
            "one detail (printed twice) and two summary-only"
        );
        let h = &r.hazards[0];
        assert_eq!(
            h.kind,
            "ConSan Record/Replay conflicts reported only in a summary"
        );
        assert_eq!((h.count, h.detail.as_deref()), (2, Some("reader=1")));
        let h = &r.hazards[1];
        assert_eq!(h.kind, "ConSan Record/Replay conflict (kind=1)");
        assert_eq!((h.kernel.as_deref(), h.count), (Some("lds_reduce"), 1));
        assert_eq!(
            h.detail.as_deref(),
            Some("reader=1 index=0 code_object=lds.hsaco first_lds=[0,4) second_lds=[0,4)")
        );
        assert!(r.summary().starts_with(
            "consan: 3 errors; 2 × ConSan Record/Replay conflicts reported only in a summary (reader=1); 1 more kind(s)"
        ), "{}", r.summary());
        // The waitcheck entry reads the same run for its own stage only.
        let w = parse("waitcheck", "consan-race.txt");
        assert_eq!((w.errors, w.complete), (0, true));
    }

    #[test]
    fn a_detail_and_its_summary_count_once_per_reader() {
        let evidence = fixture("consan-clean.txt");
        let text = format!(
            "{CONSAN} MOI auto replay diagnostic kind=1 first_lds=[0,4) second_lds=[0,4) conflict=true diagnostics=1\n\
             {CONSAN} MOI auto replay conflict=true diagnostics=1\n\
             {CONSAN} MOI auto report plan reader=1 diagnostics=2 access_ranges=2\n{evidence}"
        );
        let r = parse_rocjitsu_logs("consan", [("stderr.log", text.as_str())]);
        assert_eq!((r.errors, r.hazards.len()), (1, 1), "{r:?}");
    }

    #[test]
    fn incomplete_coverage_is_a_gap_for_consan_only() {
        let r = parse("consan", "consan-dynamic-incomplete.txt");
        assert_eq!((r.errors, r.complete), (0, false));
        assert_eq!(
            r.gaps,
            [
                "coverage: verdict analysis_complete=false",
                "coverage: verdict dynamic_complete=false",
                "coverage: dynamic_incomplete=1"
            ]
        );
        assert!(r.summary().ends_with(
            "(incomplete: coverage: verdict analysis_complete=false; coverage: verdict dynamic_complete=false; coverage: dynamic_incomplete=1)"
        ), "{}", r.summary());
        assert!(parse("waitcheck", "consan-dynamic-incomplete.txt").complete);
    }

    #[test]
    fn unreadable_or_missing_evidence_fails_both_closed() {
        let clean = fixture("consan-clean.txt");
        let cases = [
            (
                format!("{CONSAN} MOI auto replay diagnostics=0 conflict=false\n"),
                "missing ConSan coverage record",
            ),
            (
                clean.replace("replay_unsupported_access=0", "replay_unsupported_access=x"),
                "not an unsigned decimal count",
            ),
            (
                clean.replace("access=2/2", "access=1/2"),
                "access aggregate disagrees with coverage",
            ),
            (
                clean.replace("text=0x8 mnemonic", "text=0x8 text=0x9 mnemonic"),
                "malformed field 'text=0x9'",
            ),
            (
                clean.replace(
                    "analysis_complete=true expert_limit",
                    "analysis_complete=false expert_limit",
                ),
                "analysis_complete contradicts counters",
            ),
        ];
        for (text, want) in cases {
            for tool in ["consan", "waitcheck"] {
                let r = parse_rocjitsu_logs(tool, [("stderr.log", text.as_str())]);
                assert!(!r.complete, "{tool} {want}");
                assert!(
                    r.gaps.iter().any(|g| g.contains(want)),
                    "{tool}: {want}: {:?}",
                    r.gaps
                );
            }
        }
    }

    #[test]
    fn unitemized_and_failed_sites_are_named() {
        // Barrier sites counted but never itemized (ROCm/aorta#405), one access site that
        // failed to lower: the rest of the evidence is still read.
        let clean = fixture("consan-clean.txt");
        let text = clean
            .replace("barrier_discovered=0 barrier_supported=0 barrier_selected=0 barrier_patched=0", "barrier_discovered=3 barrier_supported=3 barrier_selected=3 barrier_patched=3")
            .replace("barrier=0/0", "barrier=3/3")
            .replace("access_patched=2 access_unsupported=0 access_resource_failed=0 access_placement_or_lowering_failed=0", "access_patched=1 access_unsupported=0 access_resource_failed=0 access_placement_or_lowering_failed=1")
            .replace("analysis_complete=true expert_limit", "analysis_complete=false expert_limit")
            .replace("incomplete_code_objects=0", "incomplete_code_objects=1")
            .replace("access=2/2", "access=1/2")
            .replace("outcome=patched lowering_reason=none resource_reason=none container=k scope=kernel text=0x8", "outcome=placement_or_lowering_failed lowering_reason=no_sgpr resource_reason=none container=k scope=kernel text=0x8");
        let r = parse_rocjitsu_logs("consan", [("stderr.log", text.as_str())]);
        assert!(
            r.gaps
                .contains(&"coverage: reader 1 barrier sites not itemized: 0 of 3".to_string()),
            "{:?}",
            r.gaps
        );
        assert!(
            r.gaps
                .contains(&"coverage: access placement_or_lowering_failed: 1 no_sgpr".into()),
            "{:?}",
            r.gaps
        );
        assert!(r
            .gaps
            .contains(&"coverage: access patched/supported mismatch: 1/2".into()));
    }

    #[test]
    fn waitcheck_hazard_with_context_and_a_summary_counted_once() {
        let r = parse("waitcheck", "waitcheck-hazard.txt");
        assert_eq!((r.errors, r.complete), (1, true), "{r:?}");
        let h = &r.hazards[0];
        assert_eq!(h.kind, "missing s_wait_loadcnt <= 0");
        assert_eq!(
            h.detail.as_deref(),
            Some("at .text+0x40; consumer: v_mov_b32")
        );
        assert_eq!(
            r.summary(),
            "waitcheck: 1 error; 1 × missing s_wait_loadcnt <= 0 (at .text+0x40; consumer: v_mov_b32)"
        );
        // ConSan's own verdict on that run is clean: the stages are judged apart.
        assert_eq!(parse("consan", "waitcheck-hazard.txt").errors, 0);
    }

    #[test]
    fn waitcheck_summary_alone_and_a_failed_analysis() {
        let clean = fixture("consan-clean.txt");
        let text = format!(
            "rocjitsu-waitcheck: ConSan preflight reported reader=1 target=gfx950 reason=wait-hazard diagnostics=1 action=continue\n\
             rocjitsu-waitcheck: reader=2 reason=analysis-failed detail=decode\n{clean}"
        );
        let r = parse_rocjitsu_logs("waitcheck", [("stdout.log", text.as_str())]);
        assert_eq!(r.errors, 1);
        assert_eq!(
            r.hazards[0].kind,
            "Waitcheck reported hazards only in a summary"
        );
        assert_eq!(
            r.gaps,
            ["Waitcheck analysis failed: reader=2 reason=analysis-failed detail=decode"]
        );
    }

    #[test]
    fn without_the_hook_there_is_no_report() {
        let r = parse_rocjitsu_logs(
            "consan",
            [
                ("stdout.log", "hello\n"),
                ("stderr.log", "ConSan is a word\n"),
            ],
        );
        assert!(r.logs.is_empty() && r.gaps.is_empty() && !r.complete);
        assert_eq!(r.errors, 0);
    }
}
