//! What `aorta bisect` reads: GOOD and BAD as env files (`KEY=VALUE` lines) or environment
//! snapshots (`aorta env probe -o`), their differences, and `bisect range`'s list of points.
//! Bad input is a usage error (exit 2) naming the file and line, with a hint.

use aorta_engine::EngineError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One side of `bisect env`.
#[derive(Debug, Clone)]
pub struct EnvSide {
    pub path: PathBuf,
    /// Variable → value; `None`: recorded as unset (a snapshot's `null`).
    pub vars: BTreeMap<String, Option<String>>,
    /// A snapshot's other fields as dotted leaves (driver, GPU, libraries): not appliable.
    pub fixed: BTreeMap<String, String>,
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

const SIDE_HINT: &str = "GOOD and BAD are env files (KEY=VALUE lines, # comments, `export ` allowed) or snapshots written by `aorta env probe -o FILE`";

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

/// The appliable differences (variables, in name order) and the rest.
pub fn differences(good: &EnvSide, bad: &EnvSide) -> (Vec<Difference>, Vec<Untestable>) {
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
    let untestable = fields
        .into_iter()
        .filter_map(|f| {
            let g = good.fixed.get(f).cloned().unwrap_or_else(absent);
            let b = bad.fixed.get(f).cloned().unwrap_or_else(absent);
            (g != b).then(|| Untestable {
                field: f.clone(),
                good: g,
                bad: b,
            })
        })
        .collect();
    (diffs, untestable)
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

    #[test]
    fn differences_cover_changed_added_and_removed() {
        let side = |pairs: &[(&str, Option<&str>)]| EnvSide {
            path: "x".into(),
            vars: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect(),
            fixed: BTreeMap::from([("gpu.driver_version".to_string(), "1".to_string())]),
        };
        let g = side(&[("A", Some("0")), ("B", Some("1")), ("C", None)]);
        let mut b = side(&[("A", Some("1")), ("B", Some("1")), ("D", Some("4"))]);
        b.fixed.insert("gpu.driver_version".into(), "2".into());
        let (d, u) = differences(&g, &b);
        let vars: Vec<&str> = d.iter().map(|d| d.var.as_str()).collect();
        assert_eq!(vars, ["A", "D"]);
        assert_eq!(u.len(), 1);
        assert_eq!(apply(&g, &d, &[0])["A"], "1");
        assert!(!apply(&g, &d, &[]).contains_key("D"));
    }
}
