//! `aorta env diff A B`: a semantic diff by leaf, grouped by section, each difference marked
//! when it feeds the environment key, so "why did my trials re-run?" is one command (and exit
//! status 1 exactly when [`Diff::key_changed`]). `captured_at` and `probe.*` (timings, cache
//! state) differ on every run and are left out.

use crate::key::{flatten, EnvKey, KeyRules};
use crate::schema::{Imported, Snapshot};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// In both, different (`~`).
    Changed,
    /// Only in A (`-`).
    OnlyA,
    /// Only in B (`+`).
    OnlyB,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffEntry {
    pub path: String,
    pub change: Change,
    pub a: Option<Value>,
    pub b: Option<Value>,
    /// The leaf feeds the key under the rules the diff was made with.
    pub key_relevant: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffSection {
    pub name: String,
    pub entries: Vec<DiffEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub key_a: String,
    pub key_b: String,
    /// Side A was imported from AORTA's env.json: from which release, and what of it was not
    /// compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported_a: Option<Imported>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported_b: Option<Imported>,
    /// What was left out because a side is imported.
    #[serde(skip_serializing_if = "Unlisted::is_empty")]
    pub unlisted: Unlisted,
    pub sections: Vec<DiffSection>,
}

/// Compares two snapshots under `rules`.
///
/// The walk follows the schema's field order. Objects recurse key by key, arrays of objects
/// element by element; a subtree present on one side only (a seventh GPU, a library found on
/// one machine) is one entry, not one per leaf, and so is a value whose shape changed.
pub fn diff(a: &Snapshot, b: &Snapshot, rules: &KeyRules) -> Diff {
    diff_prepared(&Prepared::new(a, rules), &Prepared::new(b, rules), rules)
}

/// A snapshot readied for diffing: its JSON and its key under the rules, computed once when
/// many snapshots are compared with one (a report's cells against the baseline).
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    value: Value,
    key: String,
    /// The keyed fields the key hashes.
    fields: BTreeMap<String, Value>,
    imported: Option<Imported>,
}

impl Prepared {
    /// [`Prepared::new`] for a snapshot whose key under the rules is known already (a build
    /// computed it to key its trials): deriving it again walks every field against the rules.
    pub fn keyed(s: &Snapshot, key: EnvKey) -> Prepared {
        Prepared {
            value: serde_json::to_value(s).unwrap_or(Value::Null),
            key: key.hash,
            fields: key.fields,
            imported: s.probe.imported.clone(),
        }
    }

    pub fn new(s: &Snapshot, rules: &KeyRules) -> Prepared {
        let value = serde_json::to_value(s).unwrap_or(Value::Null);
        let k = crate::key::key_of_value(&value, rules);
        Prepared {
            value,
            key: k.hash,
            fields: k.fields,
            imported: s.probe.imported.clone(),
        }
    }

    /// What [`Prepared::new`] gives for this snapshot with `vars` set in its `env_vars`, derived
    /// from this one: the whole snapshot, the oracle that [`diff_env_vars_sides`] is checked
    /// against.
    #[cfg(test)]
    fn with_env_vars(&self, vars: &BTreeMap<String, String>, rules: &KeyRules) -> Prepared {
        if vars.is_empty() {
            return self.clone();
        }
        let mut value = self.value.clone();
        if let Some(env) = value.get_mut("env_vars") {
            *env = env_vars_with(env, vars);
        }
        let fields = self.fields_with(vars, rules);
        Prepared {
            value,
            key: crate::key::hash_fields(&fields),
            fields,
            imported: self.imported.clone(),
        }
    }

    /// This snapshot's `env_vars` with `vars` set, and the key it would then have: one side of
    /// [`diff_env_vars_sides`].
    pub fn env_vars_side(&self, vars: &BTreeMap<String, String>, rules: &KeyRules) -> EnvVarsSide {
        let env = self.value.get("env_vars");
        match vars.is_empty() {
            true => EnvVarsSide {
                env: env.cloned(),
                key: self.key.clone(),
            },
            false => EnvVarsSide {
                env: env.map(|e| env_vars_with(e, vars)),
                key: crate::key::hash_fields(&self.fields_with(vars, rules)),
            },
        }
    }

    /// The keyed fields with `vars` (not empty) set in `env_vars`: only those fields change,
    /// so the key is not re-derived from every field.
    fn fields_with(
        &self,
        vars: &BTreeMap<String, String>,
        rules: &KeyRules,
    ) -> BTreeMap<String, Value> {
        let mut fields = self.fields.clone();
        // An empty env_vars object is a leaf of its own; with vars set it is not.
        fields.remove("env_vars");
        let matcher = rules.matcher();
        for (k, v) in vars {
            let path = format!("env_vars.{k}");
            if matcher.is_keyed(&path) {
                fields.insert(path, Value::String(v.clone()));
            }
        }
        fields
    }
}

/// One side of an env-vars diff ([`Prepared::env_vars_side`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EnvVarsSide {
    env: Option<Value>,
    key: String,
}

/// [`diff`] of the snapshot with one cell's vars set against it with another's,
/// walking only `env_vars`, the one section that can differ. A report diffs every cell against
/// the baseline this way, each side made once ([`Prepared::env_vars_side`]): cloning and
/// comparing the whole snapshot per cell cost a 20-cell report.html 4–8 ms on a 2-core VM.
pub fn diff_env_vars_sides(a: &EnvVarsSide, b: &EnvVarsSide, rules: &KeyRules) -> Diff {
    let mut raw = Vec::new();
    walk(
        a.env.as_ref(),
        b.env.as_ref(),
        "env_vars".to_string(),
        &mut raw,
    );
    Diff {
        key_a: a.key.clone(),
        key_b: b.key.clone(),
        imported_a: None,
        imported_b: None,
        unlisted: Unlisted::default(),
        sections: sections(raw, rules),
    }
}

/// A snapshot's `env_vars` value with `vars` set, sorted, as a fresh serialisation of the
/// snapshot's map is; anything but an object is left as it is.
fn env_vars_with(env: &Value, vars: &BTreeMap<String, String>) -> Value {
    let Value::Object(obj) = env else {
        return env.clone();
    };
    let mut sorted: BTreeMap<String, Value> =
        obj.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for (k, v) in vars {
        sorted.insert(k.clone(), Value::String(v.clone()));
    }
    Value::Object(sorted.into_iter().collect())
}

/// [`diff`] of two prepared snapshots (`rules` as they were prepared with).
pub fn diff_prepared(a: &Prepared, b: &Prepared, rules: &KeyRules) -> Diff {
    let mut raw = Vec::new();
    let mut unlisted = Unlisted::default();
    match (&a.value, &b.value) {
        // The root's fields in order, as the walk would take them, but `partial_reasons` on
        // its own: the one field compared as a set, or not at all.
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let (x, y) = (x.get(k), y.get(k));
                if k != "partial_reasons" {
                    walk(x, y, k.clone(), &mut raw);
                } else if a.imported.is_some() != b.imported.is_some() {
                    // Two probes' own reasons, in their own words and field paths.
                    let mut theirs = Vec::new();
                    partial_reasons(x, y, &mut theirs);
                    unlisted.partial_reasons = !theirs.is_empty();
                } else {
                    partial_reasons(x, y, &mut raw);
                }
            }
        }
        (x, y) => walk(Some(x), Some(y), String::new(), &mut raw),
    }
    explain_key(&a.fields, &b.fields, &mut raw);
    if a.imported.is_some() || b.imported.is_some() {
        // What an imported file leaves vacant it did not record (AORTA keeps no list of
        // distributions, say): the other side's value is only there, not a change from `{}`.
        for (_, change, x, y) in raw.iter_mut() {
            if *change != Change::Changed {
                continue;
            }
            if a.imported.is_some() && x.as_ref().is_some_and(vacant) {
                (*change, *x) = (Change::OnlyB, None);
            } else if b.imported.is_some() && y.as_ref().is_some_and(vacant) {
                (*change, *y) = (Change::OnlyA, None);
            }
        }
        raw.retain(|(path, change, x, y)| {
            // Each tool tracks its own list of variables: one it does not track is not a value.
            let unset = |v: &Option<Value>| v.as_ref().is_none_or(vacant);
            let one_tool = path.starts_with("env_vars.")
                && matches!(change, Change::OnlyA | Change::OnlyB)
                && unset(x)
                && unset(y);
            unlisted.env_vars += usize::from(one_tool);
            !one_tool
        });
    }
    Diff {
        key_a: a.key.clone(),
        key_b: b.key.clone(),
        imported_a: a.imported.clone(),
        imported_b: b.imported.clone(),
        unlisted,
        sections: sections(raw, rules),
    }
}

/// Adds every keyed leaf that differs and no entry covers yet, so a changed key is always
/// explained: the walk takes `null` and a missing value for the same thing, the key does not
/// (an unset variable one snapshot tracks and the other does not).
fn explain_key(a: &BTreeMap<String, Value>, b: &BTreeMap<String, Value>, raw: &mut Vec<Raw>) {
    let covered = |raw: &[Raw], path: &str| {
        raw.iter().any(|(p, ..)| {
            path == p
                || path
                    .strip_prefix(p.as_str())
                    .is_some_and(|r| r.starts_with('.'))
        })
    };
    let mut paths: Vec<&String> = a
        .keys()
        .chain(b.keys().filter(|k| !a.contains_key(*k)))
        .collect();
    paths.sort();
    for path in paths {
        let (x, y) = (a.get(path), b.get(path));
        if x == y || covered(raw, path) {
            continue;
        }
        let change = match (x, y) {
            (Some(_), Some(_)) => Change::Changed,
            (Some(_), None) => Change::OnlyA,
            _ => Change::OnlyB,
        };
        raw.push((path.clone(), change, x.cloned(), y.cloned()));
    }
}

/// [`Diff::uncompared_differences`]: AORTA field paths, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Uncompared {
    pub different: Vec<String>,
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
}

impl Uncompared {
    pub fn is_empty(&self) -> bool {
        self.different.is_empty() && self.only_a.is_empty() && self.only_b.is_empty()
    }
}

/// What a diff against an imported AORTA file leaves out, counted so the report says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Unlisted {
    /// Variables one tool tracks and the other does not, unset where tracked.
    pub env_vars: usize,
    /// One side is AORTA's: the two probes' partial reasons are not compared.
    pub partial_reasons: bool,
}

impl Unlisted {
    fn is_empty(&self) -> bool {
        *self == Unlisted::default()
    }
}

/// The walk's differences grouped by section, in the order first met, each marked when it
/// feeds the key.
fn sections(raw: Vec<Raw>, rules: &KeyRules) -> Vec<DiffSection> {
    let mut sections: Vec<DiffSection> = Vec::new();
    for (path, change, x, y) in raw {
        let top = path.split('.').next().unwrap_or("").to_string();
        if top == "captured_at" || top == "probe" {
            continue;
        }
        let name = if matches!(
            top.as_str(),
            "schema_version" | "partial" | "partial_reasons"
        ) {
            "status"
        } else {
            top.as_str()
        };
        let key_relevant =
            keyed_under(&path, x.as_ref(), rules) || keyed_under(&path, y.as_ref(), rules);
        let entry = DiffEntry {
            path,
            change,
            a: x,
            b: y,
            key_relevant,
        };
        match sections.iter_mut().find(|s| s.name == name) {
            Some(s) => s.entries.push(entry),
            None => sections.push(DiffSection {
                name: name.to_string(),
                entries: vec![entry],
            }),
        }
    }
    sections
}

type Raw = (String, Change, Option<Value>, Option<Value>);

fn is_container_array(v: &[Value]) -> bool {
    v.iter().any(|e| e.is_object() || e.is_array())
}

fn walk(a: Option<&Value>, b: Option<&Value>, path: String, out: &mut Vec<Raw>) {
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    // What the probe did not find is "vacant" (null, empty, all-null object) on that side:
    // report it like a missing value, `+`/`-`. Below the second level (a library, one GPU's
    // volatile readings) the whole subtree is one entry; sections and their direct children
    // are still walked, so a CUDA-vs-ROCm diff lists the versions each side has.
    let depth = if path.is_empty() {
        0
    } else {
        path.matches('.').count() + 1
    };
    let one_sided =
        |x: &Value, y: &Value| x != y && vacant(x) && !vacant(y) && (depth >= 3 || !y.is_object());
    let (a, b) = match (a, b) {
        (Some(x), Some(y)) if one_sided(x, y) => (None, b),
        (Some(x), Some(y)) if one_sided(y, x) => (a, None),
        _ => (a, b),
    };
    match (a, b) {
        (Some(x), Some(y)) if x == y => {}
        // `null`, `{}` and an object of nulls all say "nothing found".
        (Some(x), Some(y)) if vacant(x) && vacant(y) => {}
        (Some(Value::Object(x)), Some(Value::Object(y))) if !x.is_empty() && !y.is_empty() => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                walk(x.get(k), y.get(k), join(k), out);
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y)))
            if is_container_array(x) && is_container_array(y) =>
        {
            for i in 0..x.len().max(y.len()) {
                walk(x.get(i), y.get(i), join(&i.to_string()), out);
            }
        }
        (Some(x), Some(y)) => out.push((path, Change::Changed, Some(x.clone()), Some(y.clone()))),
        (Some(x), None) => out.push((path, Change::OnlyA, Some(x.clone()), None)),
        (None, Some(y)) => out.push((path, Change::OnlyB, None, Some(y.clone()))),
        (None, None) => {}
    }
}

/// `partial_reasons`: a set, sorted by field, so one more must not shift every later one. Empty
/// on one side (vacant), the other side's whole list is one entry, as for any field.
fn partial_reasons(a: Option<&Value>, b: Option<&Value>, out: &mut Vec<Raw>) {
    let path = "partial_reasons";
    match (a, b) {
        (Some(Value::Array(x)), Some(Value::Array(y))) if !x.is_empty() && !y.is_empty() => {
            for r in x.iter().filter(|r| !y.contains(r)) {
                out.push((path.into(), Change::OnlyA, Some(r.clone()), None));
            }
            for r in y.iter().filter(|r| !x.contains(r)) {
                out.push((path.into(), Change::OnlyB, None, Some(r.clone())));
            }
        }
        _ => walk(a, b, path.into(), out),
    }
}

/// `null`, empty, or an object of such: what the probe reports for something it did not find.
fn vacant(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.values().all(vacant),
        _ => false,
    }
}

/// A value for one table cell: vacant fields dropped from objects (so a library shows its
/// version first), compact JSON.
fn brief(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !vacant(x))
                .map(|(k, x)| (k.clone(), brief(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(brief).collect()),
        _ => v.clone(),
    }
}

/// Whether any leaf of `v`, placed at `path`, feeds the key.
fn keyed_under(path: &str, v: Option<&Value>, rules: &KeyRules) -> bool {
    let Some(v) = v else { return false };
    let matcher = rules.matcher();
    flatten(v).keys().any(|sub| {
        matcher.is_keyed(&if sub.is_empty() {
            path.to_string()
        } else {
            format!("{path}.{sub}")
        })
    })
}

impl Diff {
    /// The two keys differ: trials keyed on A would re-execute on B.
    pub fn key_changed(&self) -> bool {
        self.key_a != self.key_b
    }

    pub fn is_empty(&self) -> bool {
        self.sections.iter().all(|s| s.entries.is_empty())
    }

    pub fn len(&self) -> usize {
        self.sections.iter().map(|s| s.entries.len()).sum()
    }

    pub fn key_relevant_len(&self) -> usize {
        self.sections
            .iter()
            .flat_map(|s| &s.entries)
            .filter(|e| e.key_relevant)
            .count()
    }

    /// Only the differences that feed the key (`aorta env diff --key-only`).
    pub fn key_only(&self) -> Diff {
        let sections = self
            .sections
            .iter()
            .map(|s| DiffSection {
                name: s.name.clone(),
                entries: s
                    .entries
                    .iter()
                    .filter(|e| e.key_relevant)
                    .cloned()
                    .collect(),
            })
            .filter(|s| !s.entries.is_empty())
            .collect();
        Diff {
            key_a: self.key_a.clone(),
            key_b: self.key_b.clone(),
            imported_a: self.imported_a.clone(),
            imported_b: self.imported_b.clone(),
            unlisted: self.unlisted,
            sections,
        }
    }

    /// AORTA fields neither side compared that differ between two imported files: in both
    /// with different values, in A only, in B only. Empty unless both sides were imported.
    pub fn uncompared_differences(&self) -> Uncompared {
        let (Some(a), Some(b)) = (&self.imported_a, &self.imported_b) else {
            return Uncompared::default();
        };
        let digests = |i: &Imported| -> BTreeMap<String, String> {
            i.not_compared
                .iter()
                .map(|n| (n.field.clone(), n.digest.clone()))
                .collect()
        };
        let (da, db) = (digests(a), digests(b));
        let mut u = Uncompared::default();
        for (f, d) in &da {
            match db.get(f) {
                Some(e) if e == d => {}
                Some(_) => u.different.push(f.clone()),
                None => u.only_a.push(f.clone()),
            }
        }
        u.only_b = db
            .keys()
            .filter(|f| !da.contains_key(*f))
            .cloned()
            .collect();
        u
    }

    /// The aligned text report: `~` changed, `+` only in B, `-` only in A, `[key]` on
    /// differences that feed the key.
    pub fn render(&self, label_a: &str, label_b: &str) -> String {
        const MAX_VALUE: usize = 40;
        let show = |v: &Option<Value>| {
            v.as_ref()
                .map(|v| {
                    truncate(
                        &serde_json::to_string(&brief(v)).unwrap_or_default(),
                        MAX_VALUE,
                    )
                })
                .unwrap_or_default()
        };
        let entries = || self.sections.iter().flat_map(|s| &s.entries);
        let pw = entries()
            .map(|e| e.path.chars().count())
            .max()
            .unwrap_or(0)
            .min(60);
        let aw = entries()
            .map(|e| show(&e.a).chars().count())
            .max()
            .unwrap_or(0);
        let bw = entries()
            .map(|e| show(&e.b).chars().count())
            .max()
            .unwrap_or(0);
        let mut out = format!("A: {label_a}\n{}", import_note(&self.imported_a));
        out.push_str(&format!("B: {label_b}\n{}", import_note(&self.imported_b)));
        if self.imported_a.is_some() && self.imported_b.is_some() {
            let u = self.uncompared_differences();
            if u.is_empty() {
                out.push_str("not compared, and the same in A and B: every field above\n");
            }
            for (head, fields) in [
                ("not compared, and different in A and B:", &u.different),
                ("not compared, only in A:", &u.only_a),
                ("not compared, only in B:", &u.only_b),
            ] {
                if !fields.is_empty() {
                    out.push_str(&wrapped(head, &compact(fields)));
                }
            }
        }
        if self.unlisted.env_vars > 0 {
            out.push_str(&format!(
                "not listed: {} env var(s) that one tool tracks and the other does not, unset where tracked\n",
                self.unlisted.env_vars
            ));
        }
        if self.unlisted.partial_reasons {
            out.push_str(
                "not listed: partial_reasons (each probe's own, in its own field paths)\n",
            );
        }
        out.push_str(&format!(
            "key: {} → {} ({})\n",
            short(&self.key_a),
            short(&self.key_b),
            if self.key_changed() {
                "changed"
            } else {
                "unchanged"
            }
        ));
        for s in &self.sections {
            out.push_str(&format!("\n{}\n", s.name));
            for e in &s.entries {
                let (mark, a, arrow, b) = match e.change {
                    Change::Changed => ('~', show(&e.a), "→", show(&e.b)),
                    Change::OnlyA => ('-', show(&e.a), " ", String::new()),
                    Change::OnlyB => ('+', String::new(), "→", show(&e.b)),
                };
                let tag = if e.key_relevant { "[key]" } else { "" };
                let line = format!(
                    "  {mark} {:<pw$}  {}  {arrow} {}  {tag}",
                    e.path,
                    pad(&a, aw),
                    pad(&b, bw)
                );
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
        let n = self.len();
        out.push_str(&if n == 0 {
            "\nno differences\n".to_string()
        } else {
            format!(
                "\n{n} difference(s), {} key-relevant\n",
                self.key_relevant_len()
            )
        });
        out
    }
}

/// Under a side's label: where an imported side came from and what of it was not compared.
fn import_note(i: &Option<Imported>) -> String {
    let Some(i) = i else {
        return String::new();
    };
    let fields: Vec<String> = i.not_compared.iter().map(|n| n.field.clone()).collect();
    let head = format!(
        "   imported from {}'s env.json (schema {}); {} of its fields have no counterpart in aorta's snapshot and are not compared:",
        i.from,
        i.schema_version,
        fields.len()
    );
    wrapped(&head, &compact(&fields))
}

/// Sorted dotted paths with a common first segment written once: `rccl.{lib_hash, version_code}`.
fn compact(fields: &[String]) -> Vec<String> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for f in fields {
        let (head, rest) = f.split_once('.').unwrap_or((f.as_str(), ""));
        match groups.last_mut() {
            Some((h, rests)) if *h == head && !rest.is_empty() && !rests.contains(&"") => {
                rests.push(rest)
            }
            _ => groups.push((head, vec![rest])),
        }
    }
    groups
        .into_iter()
        .map(|(head, rests)| match rests.as_slice() {
            [""] => head.to_string(),
            [one] => format!("{head}.{one}"),
            many => format!("{head}.{{{}}}", many.join(", ")),
        })
        .collect()
}

/// `head`, then `items` comma-separated on indented lines of at most 100 characters.
fn wrapped(head: &str, items: &[String]) -> String {
    let mut out = format!("{head}\n");
    let mut line = String::from("     ");
    for (i, item) in items.iter().enumerate() {
        let piece = if i + 1 < items.len() {
            format!("{item},")
        } else {
            item.clone()
        };
        if line.trim().is_empty() {
            line.push_str(&piece);
        } else if line.chars().count() + 1 + piece.chars().count() > 100 {
            out.push_str(&line);
            out.push('\n');
            line = format!("     {piece}");
        } else {
            line.push(' ');
            line.push_str(&piece);
        }
    }
    if !line.trim().is_empty() {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn short(h: &str) -> String {
    format!("blake3:{}", &h[..12.min(h.len())])
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(max - 1).collect::<String>())
    }
}

fn pad(s: &str, w: usize) -> String {
    let n = s.chars().count();
    format!("{s}{}", " ".repeat(w.saturating_sub(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_vars_set_on_a_prepared_snapshot_equal_a_fresh_preparation() {
        let rules = KeyRules::default();
        let base_sets: [&[(&str, Option<&str>)]; 2] = [
            &[],
            &[
                ("NCCL_DEBUG", Some("INFO")),
                ("PYTORCH_CUDA_ALLOC_CONF", None),
            ],
        ];
        for base_vars in base_sets {
            let mut s = Snapshot::default();
            for (k, v) in base_vars {
                s.env_vars.insert(k.to_string(), v.map(str::to_string));
            }
            let vars: BTreeMap<String, String> = [
                ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
                ("AMD_LOG_LEVEL", "4"),
                ("NVIDIA_TF32_OVERRIDE", "0"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            let mut with = s.clone();
            for (k, v) in &vars {
                with.env_vars.insert(k.clone(), Some(v.clone()));
            }
            let fresh = Prepared::new(&with, &rules);
            let derived = Prepared::new(&s, &rules).with_env_vars(&vars, &rules);
            assert_eq!(derived, fresh);
            let d = diff_prepared(&Prepared::new(&s, &rules), &derived, &rules);
            assert_eq!(d.render("a", "b"), diff(&s, &with, &rules).render("a", "b"));
            assert!(!d.is_empty());
        }
    }

    /// `null`, `{}` and an object of nulls are one answer ("nothing found"), but where the key
    /// tells them apart (a tracked variable, unset, in one snapshot only) the entry is listed.
    #[test]
    fn vacant_values_are_equal_yet_a_changed_key_is_always_explained() {
        let rules = KeyRules::default();
        let mut a = Snapshot::default();
        let mut b = Snapshot::default();
        a.pytorch.build.flags.insert("USE_CUDA".into(), Value::Null);
        assert!(
            diff(&a, &b, &rules).is_empty(),
            "import-only, vacant on both sides"
        );
        a.env_vars.insert("NCCL_ALGO".into(), None);
        b.env_vars.insert("NCCL_PROTO".into(), None);
        let d = diff(&a, &b, &rules);
        assert!(d.key_changed());
        let entries: Vec<(&str, Change, bool)> = d
            .sections
            .iter()
            .flat_map(|s| &s.entries)
            .map(|e| (e.path.as_str(), e.change, e.key_relevant))
            .collect();
        assert_eq!(
            entries,
            [
                ("env_vars.NCCL_ALGO", Change::OnlyA, true),
                ("env_vars.NCCL_PROTO", Change::OnlyB, true)
            ]
        );
    }

    #[test]
    fn partial_reasons_are_compared_as_a_set() {
        let reason = |f: &str| crate::schema::PartialReason {
            field: f.into(),
            reason: "why".into(),
        };
        let a = Snapshot {
            partial_reasons: vec![reason("cuda.nvcc"), reason("pytorch")],
            ..Snapshot::default()
        };
        let mut b = a.clone();
        b.partial_reasons.insert(0, reason("cuda.libraries.cudnn"));
        b.partial_reasons.remove(2);
        let d = diff(&a, &b, &KeyRules::default());
        let entries: Vec<(Change, String)> = d
            .sections
            .iter()
            .flat_map(|s| &s.entries)
            .map(|e| {
                let v = e.a.as_ref().or(e.b.as_ref()).unwrap();
                (e.change, v["field"].as_str().unwrap().to_string())
            })
            .collect();
        assert_eq!(
            entries,
            [
                (Change::OnlyA, "pytorch".to_string()),
                (Change::OnlyB, "cuda.libraries.cudnn".to_string())
            ]
        );
    }

    /// A snapshot with a few env vars and other sections, as the probe fills them.
    fn machine() -> Snapshot {
        let mut s = Snapshot::default();
        s.env_vars.insert("NCCL_DEBUG".into(), Some("INFO".into()));
        s.env_vars.insert("HIP_VISIBLE_DEVICES".into(), None);
        s.gpu.count = Some(2);
        s.host.kernel_release = Some("6.18.44".into());
        s
    }

    fn vars() -> impl proptest::strategy::Strategy<Value = BTreeMap<String, String>> {
        use proptest::prelude::*;
        let name = prop_oneof![
            Just("NCCL_DEBUG"),
            Just("HIP_VISIBLE_DEVICES"),
            Just("AMD_LOG_LEVEL"),
            Just("NVIDIA_TF32_OVERRIDE"),
            Just("AORTA_BENCH_X"),
        ];
        proptest::collection::btree_map(name.prop_map(str::to_string), "[a-c0-2]{0,2}", 0..4)
    }

    proptest::proptest! {
        /// Walking only `env_vars` gives what the whole diff of the two derived snapshots gives.
        #[test]
        fn an_env_vars_diff_equals_the_whole_diff(a in vars(), b in vars(), keyed in proptest::bool::ANY) {
            let rules = match keyed {
                true => KeyRules::default(),
                false => KeyRules { include: vec!["env_vars.*".into()], exclude: vec!["env_vars.NCCL_*".into()] },
            };
            let m = Prepared::new(&machine(), &rules);
            proptest::prop_assert_eq!(&Prepared::keyed(&machine(), machine().key(&rules)), &m);
            let whole = diff_prepared(&m.with_env_vars(&a, &rules), &m.with_env_vars(&b, &rules), &rules);
            let sides = (m.env_vars_side(&a, &rules), m.env_vars_side(&b, &rules));
            proptest::prop_assert_eq!(diff_env_vars_sides(&sides.0, &sides.1, &rules), whole);
        }
    }
}
