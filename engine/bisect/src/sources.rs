//! What `aorta bisect` reads: GOOD and BAD as env files (`KEY=VALUE` lines), environment
//! snapshots (`aorta env probe -o`) or AORTA's own env.json (read by the probe's importer, as
//! `aorta env diff` reads it), their differences, and `bisect range`'s list of points.
//! Bad input is a usage error (exit 2) naming the file and line (or field), with a hint.

use aorta_engine::{EngineError, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One side of `bisect env`.
#[derive(Debug, Clone)]
pub struct EnvSide {
    pub path: PathBuf,
    /// Variable → value; `None`: recorded as unset (a snapshot's `null`).
    pub vars: BTreeMap<String, Option<String>>,
    /// A snapshot's other fields as dotted leaves (driver, GPU, libraries): not appliable.
    /// For AORTA's env.json, aorta's fields the import filled (the rest it does not record).
    pub fixed: BTreeMap<String, String>,
    /// Set when the file is AORTA's env.json.
    pub aorta: Option<AortaOrigin>,
}

/// Where an AORTA env.json came from, and what of it has no counterpart in aorta's snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AortaOrigin {
    /// `AORTA 0.3.0`.
    pub from: String,
    /// AORTA's field path → a digest of its value (equal digests, equal values).
    pub not_compared: BTreeMap<String, String>,
}

/// What neither list of differences can hold: a field only one kind of file records.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NotCompared {
    /// AORTA's field path, or aorta's section (`cuda.libraries`) the AORTA side does not record.
    pub field: String,
    pub why: String,
}

/// A difference that a run can apply: one variable's value on each side.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Difference {
    pub var: String,
    pub good: Option<String>,
    pub bad: Option<String>,
}

/// A difference no run here can apply (a driver version, a GPU model).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Untestable {
    pub field: String,
    pub good: String,
    pub bad: String,
}

const SIDE_HINT: &str = "GOOD and BAD are env files (KEY=VALUE lines, # comments, `export ` allowed), snapshots written by `aorta env probe -o FILE`, or AORTA's env.json (0.2.1, 0.3.0)";

fn read(path: &Path, hint: &str) -> Result<String, EngineError> {
    std::fs::read_to_string(path)
        .map_err(|e| EngineError::usage(format!("cannot read {}: {e}", path.display()), hint))
}

/// Reads an env file or a snapshot (a file whose first non-blank character is `{`).
pub fn load_side(path: &Path) -> Result<EnvSide, EngineError> {
    let text = read(path, SIDE_HINT)?;
    if text.trim_start().starts_with('{') {
        snapshot(path, &text)
    } else {
        let vars = env_lines(path, &text)?
            .into_iter()
            .map(|(k, v)| (k, Some(v)))
            .collect();
        Ok(EnvSide {
            path: path.to_path_buf(),
            vars,
            fixed: BTreeMap::new(),
            aorta: None,
        })
    }
}

/// `KEY=VALUE` lines: blank lines and `#` comments skipped, an `export ` prefix tolerated,
/// a value in single or double quotes unquoted (`\"` and `\\` inside double quotes).
pub fn env_lines(path: &Path, text: &str) -> Result<BTreeMap<String, String>, EngineError> {
    let mut out = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").map_or(line, str::trim_start);
        let at = |m: String| {
            EngineError::usage(
                format!("{}:{}: {m}", path.display(), i + 1),
                "each line is KEY=VALUE (e.g. NCCL_ALGO=Ring); # starts a comment",
            )
        };
        let Some((k, v)) = line.split_once('=') else {
            return Err(at(format!("'{line}' is not KEY=VALUE")));
        };
        let k = k.trim();
        if !is_env_name(k) {
            return Err(at(format!("'{k}' is not a variable name")));
        }
        out.insert(k.to_string(), unquote(v.trim()).map_err(at)?);
    }
    Ok(out)
}

fn is_env_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f == '_' || f.is_ascii_alphabetic())
        && c.all(|ch| ch == '_' || ch.is_ascii_alphanumeric())
}

fn unquote(v: &str) -> Result<String, String> {
    let quoted = |q: char| v.len() >= 2 && v.starts_with(q) && v.ends_with(q);
    if quoted('\'') {
        return Ok(v[1..v.len() - 1].to_string());
    }
    if quoted('"') {
        let mut out = String::new();
        let mut chars = v[1..v.len() - 1].chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.push(chars.next().unwrap_or('\\')),
                c => out.push(c),
            }
        }
        return Ok(out);
    }
    if v.starts_with(['"', '\'']) {
        return Err(format!("unterminated quote in {v}"));
    }
    Ok(v.to_string())
}

/// Snapshot fields that change from one probe of the same machine to the next: never a cause.
const VOLATILE: [&str; 6] = [
    "captured_at",
    "probe.",
    "partial",
    "host.memory_available_bytes",
    "pytorch.import_seconds",
    "python.distributions",
];

fn snapshot(path: &Path, text: &str) -> Result<EnvSide, EngineError> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        EngineError::usage(
            format!("{}:{}: not a JSON snapshot: {e}", path.display(), e.line()),
            SIDE_HINT,
        )
    })?;
    if v.get("schema_version")
        .and_then(|s| s.as_str())
        .is_some_and(Snapshot::is_aorta_schema)
    {
        return aorta_env_json(path, text);
    }
    let Some(env) = v.get("env_vars").and_then(|e| e.as_object()) else {
        return Err(EngineError::usage(
            format!(
                "{}: a JSON file without an env_vars object is not an environment snapshot",
                path.display()
            ),
            SIDE_HINT,
        ));
    };
    let mut vars = BTreeMap::new();
    for (k, val) in env {
        let val = match val {
            serde_json::Value::Null => None,
            serde_json::Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        };
        vars.insert(k.clone(), val);
    }
    let mut fixed = BTreeMap::new();
    if let Some(obj) = v.as_object() {
        for (k, val) in obj.iter().filter(|(k, _)| *k != "env_vars") {
            flatten(k, val, &mut fixed);
        }
    }
    fixed.retain(|k, _| !VOLATILE.iter().any(|p| k.starts_with(p)));
    Ok(EnvSide {
        path: path.to_path_buf(),
        vars,
        fixed,
        aorta: None,
    })
}

/// AORTA's env.json through the probe's importer (what `aorta env diff` reads): its env vars
/// are the variables, and aorta's fields the import filled are `fixed`, flattened as an aorta
/// snapshot's, so the two kinds of file compare field by field. A field left at the empty
/// snapshot's value, or `null`, is one AORTA does not record, not a value; AORTA's fields with no
/// counterpart are kept for the not-compared list.
fn aorta_env_json(path: &Path, text: &str) -> Result<EnvSide, EngineError> {
    let bad = |e: &dyn std::fmt::Display| {
        EngineError::usage(
            format!("{}: {e}", path.display()),
            "an AORTA env.json is read as `aorta env probe` of AORTA 0.2.1 or 0.3.0 writes it; `aorta env diff FILE FILE` reads it the same way",
        )
    };
    let snap = Snapshot::from_json_or_aorta(text).map_err(|e| bad(&e))?;
    let Some(imported) = snap.probe.imported.clone() else {
        return Err(bad(&"not read as AORTA's env.json"));
    };
    let leaves = |s: &Snapshot| -> Result<BTreeMap<String, String>, EngineError> {
        let v = serde_json::to_value(s).map_err(|e| bad(&e))?;
        let mut out = BTreeMap::new();
        if let Some(obj) = v.as_object() {
            for (k, val) in obj.iter().filter(|(k, _)| *k != "env_vars") {
                flatten(k, val, &mut out);
            }
        }
        out.retain(|k, _| !VOLATILE.iter().any(|p| k.starts_with(p)));
        Ok(out)
    };
    let empty = leaves(&Snapshot::default())?;
    let mut fixed = leaves(&snap)?;
    // `null` is a field AORTA left unknown. `schema_version` is the import's (aorta's
    // current), compared as any snapshot's.
    fixed.retain(|k, v| k == "schema_version" || (v != "null" && empty.get(k) != Some(v)));
    Ok(EnvSide {
        path: path.to_path_buf(),
        vars: snap.env_vars.clone(),
        fixed,
        aorta: Some(AortaOrigin {
            from: imported.from,
            not_compared: imported
                .not_compared
                .into_iter()
                .map(|n| (n.field, n.digest))
                .collect(),
        }),
    })
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                flatten(&format!("{prefix}.{k}"), x, out);
            }
        }
        serde_json::Value::Array(a) if a.iter().any(|x| x.is_object()) => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{prefix}.{i}"), x, out);
            }
        }
        serde_json::Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// What differs between GOOD and BAD.
#[derive(Debug, Clone, Default)]
pub struct Differences {
    /// Variables, in name order: what a run can apply.
    pub appliable: Vec<Difference>,
    /// Other fields that differ, listed.
    pub untestable: Vec<Untestable>,
    /// Fields only one kind of file records (AORTA's env.json on one side or both).
    pub not_compared: Vec<NotCompared>,
}

/// The appliable differences (variables, in name order) and the rest.
pub fn differences(good: &EnvSide, bad: &EnvSide) -> Differences {
    let mut names: Vec<&String> = good.vars.keys().chain(bad.vars.keys()).collect();
    names.sort();
    names.dedup();
    let diffs = names
        .into_iter()
        .filter_map(|k| {
            let g = good.vars.get(k).cloned().flatten();
            let b = bad.vars.get(k).cloned().flatten();
            (g != b).then(|| Difference {
                var: k.clone(),
                good: g,
                bad: b,
            })
        })
        .collect();
    let mut fields: Vec<&String> = good.fixed.keys().chain(bad.fixed.keys()).collect();
    fields.sort();
    fields.dedup();
    let absent = || "(absent)".to_string();
    // With one side AORTA's, a field it lacks is one AORTA does not record, not a value: the
    // other side's section is listed as not compared instead.
    let unrecorded = |f: &String| match (&good.aorta, &bad.aorta) {
        (Some(_), None) if !good.fixed.contains_key(f) => Some(("GOOD", "BAD", good, bad)),
        (None, Some(_)) if !bad.fixed.contains_key(f) => Some(("BAD", "GOOD", bad, good)),
        _ => None,
    };
    let mut only_aorta_side: BTreeMap<String, String> = BTreeMap::new();
    let untestable = fields
        .into_iter()
        .filter_map(|f| {
            if let Some((lacks, has, aorta, other)) = unrecorded(f) {
                let v = other.fixed.get(f).map_or("null", String::as_str);
                if !matches!(v, "null" | "[]") {
                    let section = f.split('.').take(2).collect::<Vec<_>>().join(".");
                    let from = aorta.aorta.as_ref().map_or("AORTA", |a| a.from.as_str());
                    only_aorta_side.entry(section).or_insert_with(|| {
                        format!("recorded in {has}'s aorta snapshot only; {lacks} is {from}'s env.json, which does not record it")
                    });
                }
                return None;
            }
            let g = good.fixed.get(f).cloned().unwrap_or_else(absent);
            let b = bad.fixed.get(f).cloned().unwrap_or_else(absent);
            (g != b).then(|| Untestable {
                field: f.clone(),
                good: g,
                bad: b,
            })
        })
        .collect();
    let mut not_compared = aorta_fields(good, bad);
    not_compared.extend(
        only_aorta_side
            .into_iter()
            .map(|(field, why)| NotCompared { field, why }),
    );
    Differences {
        appliable: diffs,
        untestable,
        not_compared,
    }
}

/// AORTA's fields with no counterpart in aorta's snapshot, each with the sides that hold it
/// and, where both do, whether their values agree.
fn aorta_fields(good: &EnvSide, bad: &EnvSide) -> Vec<NotCompared> {
    let empty = BTreeMap::new();
    let (g, b) = (
        good.aorta.as_ref().map_or(&empty, |a| &a.not_compared),
        bad.aorta.as_ref().map_or(&empty, |a| &a.not_compared),
    );
    let from = |s: &EnvSide| s.aorta.as_ref().map_or("", |a| a.from.as_str()).to_string();
    let fields: BTreeSet<&String> = g.keys().chain(b.keys()).collect();
    fields
        .into_iter()
        .map(|f| {
            let why = match (g.get(f), b.get(f)) {
                (Some(x), Some(y)) if x == y => {
                    "AORTA's, no counterpart in aorta's snapshot; the same in GOOD and BAD"
                        .to_string()
                }
                (Some(_), Some(_)) => {
                    "AORTA's, no counterpart in aorta's snapshot; differs between GOOD and BAD"
                        .to_string()
                }
                (Some(_), None) => format!(
                    "{}'s field (GOOD), no counterpart in aorta's snapshot",
                    from(good)
                ),
                _ => format!(
                    "{}'s field (BAD), no counterpart in aorta's snapshot",
                    from(bad)
                ),
            };
            NotCompared {
                field: f.clone(),
                why,
            }
        })
        .collect()
}

/// The env of GOOD with the differences `applied` (indices into `diffs`) taken from BAD.
pub fn apply(good: &EnvSide, diffs: &[Difference], applied: &[usize]) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = good
        .vars
        .iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
        .collect();
    for &i in applied {
        let d = &diffs[i];
        match &d.bad {
            Some(v) => env.insert(d.var.clone(), v.clone()),
            None => env.remove(&d.var),
        };
    }
    env
}

/// The variable a point that is not `KEY=VALUE` assignments is exported as.
pub const POINT_VAR: &str = "AORTA_BISECT_POINT";

/// One point of `bisect range`: its line as written and the env it sets.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Point {
    pub line: usize,
    pub text: String,
    pub env: BTreeMap<String, String>,
}

/// `bisect range --list FILE`: one point per non-blank, non-`#` line, in order. Every line is
/// exported whole as `AORTA_BISECT_POINT` (what `--template`'s `{point}` reads); a line of
/// whitespace-separated `KEY=VALUE` assignments also sets those variables.
pub fn range_list(path: &Path) -> Result<Vec<Point>, EngineError> {
    let hint = "one point per line: KEY=VALUE assignments (e.g. IMAGE_TAG=2024.06 TORCH=2.4.0), or a value the command reads from $AORTA_BISECT_POINT";
    let text = read(path, hint)?;
    let mut points = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let assignments: Option<BTreeMap<String, String>> = tokens
            .iter()
            .map(|t| {
                t.split_once('=')
                    .filter(|(k, _)| is_env_name(k))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .collect();
        let mut env = assignments.unwrap_or_default();
        env.insert(POINT_VAR.to_string(), line.to_string());
        if points.iter().any(|p: &Point| p.env == env) {
            return Err(EngineError::usage(
                format!(
                    "{}:{}: '{line}' repeats an earlier point",
                    path.display(),
                    i + 1
                ),
                hint,
            ));
        }
        points.push(Point {
            line: i + 1,
            text: line.to_string(),
            env,
        });
    }
    if points.len() < 2 {
        return Err(EngineError::usage(
            format!(
                "{}: {} point(s); a range needs at least a good and a bad one",
                path.display(),
                points.len()
            ),
            hint,
        ));
    }
    Ok(points)
}

/// `bisect range --rev A..B`: A and every commit after it up to B, oldest first
/// (`git rev-list --reverse A..B` in the current directory), each exported as
/// `AORTA_BISECT_POINT`.
pub fn range_revs(spec: &str) -> Result<Vec<Point>, EngineError> {
    let hint = "--rev A..B names two commits of the git repository in the current directory, A good and B bad";
    let Some((a, b)) = spec
        .split_once("..")
        .filter(|(a, b)| !a.is_empty() && !b.is_empty())
    else {
        return Err(EngineError::usage(
            format!("--rev {spec:?} is not A..B"),
            hint,
        ));
    };
    let git = |args: &[&str]| -> Result<Vec<String>, EngineError> {
        let out = std::process::Command::new("git")
            .args(args)
            .output()
            .map_err(|e| EngineError::usage(format!("cannot run git: {e}"), hint))?;
        if !out.status.success() {
            return Err(EngineError::usage(
                format!(
                    "git {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                hint,
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect())
    };
    let mut revs = git(&["rev-parse", "--verify", &format!("{a}^{{commit}}")])?;
    revs.extend(git(&["rev-list", "--reverse", &format!("{a}..{b}")])?);
    if revs.len() < 2 {
        return Err(EngineError::usage(
            format!("--rev {spec}: no commit after {a}"),
            hint,
        ));
    }
    Ok(revs
        .into_iter()
        .enumerate()
        .map(|(i, rev)| Point {
            line: i + 1,
            env: BTreeMap::from([(POINT_VAR.to_string(), rev.clone())]),
            text: rev,
        })
        .collect())
}

/// `--template`'s command: `bash -c TEMPLATE` with each `{point}` reading the point's value.
pub fn template_argv(template: &str) -> Vec<String> {
    vec![
        "bash".into(),
        "-c".into(),
        template.replace("{point}", &format!("\"${POINT_VAR}\"")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_files_take_comments_exports_and_quotes() {
        let p = Path::new("g.env");
        let m = env_lines(p, "# c\n\nexport A=1\nB=\"x y\"\nC='z'\nD=\n").unwrap();
        assert_eq!(m["A"], "1");
        assert_eq!(m["B"], "x y");
        assert_eq!(m["C"], "z");
        assert_eq!(m["D"], "");
        let e = env_lines(p, "A=1\nnot a line\n").unwrap_err().to_string();
        assert!(e.contains("g.env:2"), "{e}");
        let e = env_lines(p, "1A=2\n").unwrap_err().to_string();
        assert!(
            e.contains("g.env:1") && e.contains("not a variable name"),
            "{e}"
        );
    }

    fn aorta_fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../probe/tests/fixtures/aorta")
            .join(name)
    }

    /// AORTA 0.3.0's env.json and aorta's snapshot of the same machine, the same minute: read
    /// through the importer, they compare in aorta's fields; what only one records is listed
    /// as not compared, and a variable set on one side is a difference as between two
    /// snapshots.
    #[test]
    fn aorta_env_json_compares_through_the_importer() {
        let aorta = load_side(&aorta_fixture("aorta-0.3.0-cpu.json")).unwrap();
        assert_eq!(aorta.aorta.as_ref().unwrap().from, "AORTA 0.3.0");
        assert_eq!(aorta.fixed["host.machine"], "x86_64");
        assert!(!aorta.fixed.keys().any(|k| k.starts_with("runtime_context")));
        let mut ours = load_side(&aorta_fixture("aorta-cpu.json")).unwrap();
        ours.vars.insert("NCCL_ALGO".into(), Some("Ring".into()));
        let d = differences(&aorta, &ours);
        let vars: Vec<&str> = d.appliable.iter().map(|d| d.var.as_str()).collect();
        assert_eq!(vars, ["NCCL_ALGO"]);
        let fields: Vec<&str> = d.not_compared.iter().map(|n| n.field.as_str()).collect();
        assert!(fields.contains(&"therock"), "{fields:?}");
        assert!(fields.contains(&"host.cpu"), "{fields:?}");
        // The same machine and minute: every field both record agrees.
        assert_eq!(d.untestable, [], "{:#?}", d.untestable);
        ours.fixed
            .insert("host.kernel_release".into(), "7.0.0".into());
        let d = differences(&aorta, &ours);
        let fields: Vec<&str> = d.untestable.iter().map(|u| u.field.as_str()).collect();
        assert_eq!(fields, ["host.kernel_release"]);
        assert_eq!(d.untestable[0].good, "6.18.44-fc-v1300");
        // Two AORTA files of two releases: AORTA's own fields are compared by digest.
        let old = load_side(&aorta_fixture("aorta-0.2.1-cpu.json")).unwrap();
        let d = differences(&old, &aorta);
        assert!(d
            .not_compared
            .iter()
            .any(|n| n.field == "therock" && n.why.contains("(BAD)")));
    }

    #[test]
    fn a_malformed_aorta_env_json_names_the_file_and_field() {
        let d = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(aorta_fixture("aorta-0.3.0-cpu.json")).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["host"]["machine"] = 7.into();
        let f = d.path().join("aorta.json");
        std::fs::write(&f, v.to_string()).unwrap();
        let e = load_side(&f).unwrap_err().to_string();
        assert!(
            e.contains("aorta.json") && e.contains("field host.machine"),
            "{e}"
        );
    }

    #[test]
    fn differences_cover_changed_added_and_removed() {
        let side = |pairs: &[(&str, Option<&str>)]| EnvSide {
            path: "x".into(),
            vars: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect(),
            fixed: BTreeMap::from([("gpu.driver_version".to_string(), "1".to_string())]),
            aorta: None,
        };
        let g = side(&[("A", Some("0")), ("B", Some("1")), ("C", None)]);
        let mut b = side(&[("A", Some("1")), ("B", Some("1")), ("D", Some("4"))]);
        b.fixed.insert("gpu.driver_version".into(), "2".into());
        let Differences {
            appliable: d,
            untestable: u,
            not_compared,
        } = differences(&g, &b);
        assert!(not_compared.is_empty());
        let vars: Vec<&str> = d.iter().map(|d| d.var.as_str()).collect();
        assert_eq!(vars, ["A", "D"]);
        assert_eq!(u.len(), 1);
        assert_eq!(apply(&g, &d, &[0])["A"], "1");
        assert!(!apply(&g, &d, &[]).contains_key("D"));
    }
}
