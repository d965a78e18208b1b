//! `gpus_per_trial` and the other per-trial resource keys, at recipe and cell level: how much
//! of a machine one trial takes, which the executors honour (Slurm's `sbatch` flags; the local
//! executor's GPU slots). Placement only: none of them is part of a trial key (docs/slurm.md,
//! "World size").

use crate::check::{Ctx, Res};
use crate::model::Resources;
use aorta_source::{FieldPath, Node, Value};

/// A key list: the given keys, then the resource keys, which are valid at the top of a recipe
/// (both modes) and in a triage cell. The one place they are listed.
macro_rules! with_resource_keys {
    ($($key:literal),* $(,)?) => {
        &[
            $($key,)*
            "gpus_per_trial",
            "cpus_per_trial",
            "mem_per_trial",
            "time_limit",
            "partition",
            "account",
            "constraint",
            "sbatch_args",
        ]
    };
}
pub(crate) use with_resource_keys;

/// The resource keys (see [`with_resource_keys`]).
pub const RESOURCE_KEYS: &[&str] = with_resource_keys!();

/// Flags aorta sets itself on every array it submits; a recipe may not set them.
const OWNED_SBATCH_FLAGS: &[&str] = &[
    "--array",
    "-a",
    "--parsable",
    "--wrap",
    "--output",
    "-o",
    "--error",
    "-e",
    "--gres",
    "--gpus",
    "-G",
    "--job-name",
    "-J",
    "--chdir",
    "-D",
];

/// The resource keys present in the mapping `node` (a recipe's root or a cell), under `path`.
pub(crate) fn resources(cx: &Ctx, node: &Node, path: &FieldPath) -> Res<Resources> {
    let mut r = Resources::default();
    if let Some(n) = node.get("gpus_per_trial") {
        let v = cx.int_at_least(n, &path.key("gpus_per_trial"), 0)?;
        r.gpus_per_trial = Some(small(cx, n, &path.key("gpus_per_trial"), v)?);
    }
    if let Some(n) = node.get("cpus_per_trial") {
        let v = cx.int_at_least(n, &path.key("cpus_per_trial"), 1)?;
        r.cpus_per_trial = Some(small(cx, n, &path.key("cpus_per_trial"), v)?);
    }
    if let Some(n) = node.get("mem_per_trial") {
        r.mem_per_trial = Some(memory(cx, n, &path.key("mem_per_trial"))?);
    }
    if let Some(n) = node.get("time_limit") {
        r.time_limit_secs = Some(time_limit(cx, n, &path.key("time_limit"))?);
    }
    for (key, slot) in [
        ("partition", &mut r.partition),
        ("account", &mut r.account),
        ("constraint", &mut r.constraint),
    ] {
        if let Some(n) = node.get(key) {
            let s = cx.non_empty_string(n, &path.key(key), "a Slurm name, e.g. gpu")?;
            if s.chars().any(char::is_whitespace) {
                return Err(cx.schema(
                    n,
                    &path.key(key),
                    format!("must not contain whitespace, got {}", n.repr()),
                    "one Slurm name (constraints combine with & and |, without spaces)",
                ));
            }
            *slot = Some(s.to_string());
        }
    }
    if let Some(n) = node.get("sbatch_args") {
        let p = path.key("sbatch_args");
        let help = "a list of sbatch flags, e.g. [\"--qos=high\", \"--exclusive\"]";
        let args = cx.string_list(n, &p, help)?;
        let items = n.as_seq().unwrap_or_default();
        for (i, a) in args.iter().enumerate() {
            let at = items.get(i).unwrap_or(n);
            if !a.starts_with('-') {
                return Err(cx.schema(
                    at,
                    &p.index(i),
                    format!("'{a}' is not a flag"),
                    "write each flag with its value in one item: \"--qos=high\"",
                ));
            }
            let flag = a.split('=').next().unwrap_or(a);
            if OWNED_SBATCH_FLAGS.contains(&flag) {
                return Err(cx.schema(
                    at,
                    &p.index(i),
                    format!("aorta sets {flag} itself on every array it submits"),
                    "use gpus_per_trial for GPUs; the array, output and job name are aorta's",
                ));
            }
        }
        r.sbatch_args = Some(args);
    }
    Ok(r)
}

fn small(cx: &Ctx, n: &Node, path: &FieldPath, v: i64) -> Res<u32> {
    if v > 1024 {
        return Err(cx.schema(
            n,
            path,
            format!("{v} is more than one trial can use"),
            "use at most 1024",
        ));
    }
    Ok(v as u32)
}

/// Slurm's `--mem`: megabytes as a number, or a number with K, M, G or T.
fn memory(cx: &Ctx, n: &Node, path: &FieldPath) -> Res<String> {
    let help = "megabytes as a number (4096) or with a unit: 512M, 16G, 1T";
    let text = match &n.value {
        Value::Int(i) if *i > 0 => return Ok(i.to_string()),
        Value::Str(s) => s.trim(),
        _ => return Err(cx.schema(n, path, format!("must be a size, got {}", n.repr()), help)),
    };
    let (digits, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let ok = !digits.is_empty()
        && digits.parse::<u64>().is_ok_and(|v| v > 0)
        && matches!(unit, "" | "K" | "M" | "G" | "T" | "k" | "m" | "g" | "t");
    if !ok {
        return Err(cx.schema(n, path, format!("'{text}' is not a size"), help));
    }
    Ok(format!("{digits}{}", unit.to_ascii_uppercase()))
}

/// Slurm's time formats (`minutes`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`), or
/// a number of minutes; in seconds.
fn time_limit(cx: &Ctx, n: &Node, path: &FieldPath) -> Res<u64> {
    let help = "minutes (30), HH:MM:SS (01:30:00) or D-HH:MM:SS (1-00:00:00), as Slurm writes them";
    let secs = match &n.value {
        Value::Int(i) if *i > 0 => Some(*i as u64 * 60),
        Value::Str(s) => parse_slurm_time(s.trim()),
        _ => None,
    };
    match secs {
        Some(s) if s > 0 => Ok(s),
        _ => Err(cx.schema(n, path, format!("{} is not a time limit", n.repr()), help)),
    }
}

/// Parses Slurm's time formats into seconds; `None` for anything else.
pub fn parse_slurm_time(s: &str) -> Option<u64> {
    let num = |x: &str| -> Option<u64> {
        (!x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()))
            .then(|| x.parse().ok())
            .flatten()
    };
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (Some(num(d)?), r),
        None => (None, s),
    };
    let parts: Vec<u64> = rest.split(':').map(num).collect::<Option<_>>()?;
    let secs = match (days, parts.as_slice()) {
        (None, [m]) => m * 60,
        (None, [m, s]) => m * 60 + s,
        (None, [h, m, s]) => h * 3600 + m * 60 + s,
        (Some(d), [h]) => d * 86400 + h * 3600,
        (Some(d), [h, m]) => d * 86400 + h * 3600 + m * 60,
        (Some(d), [h, m, s]) => d * 86400 + h * 3600 + m * 60 + s,
        _ => return None,
    };
    Some(secs)
}

#[cfg(test)]
mod tests {
    use super::parse_slurm_time;

    #[test]
    fn slurm_time_formats() {
        assert_eq!(parse_slurm_time("30"), Some(1800));
        assert_eq!(parse_slurm_time("10:30"), Some(630));
        assert_eq!(parse_slurm_time("01:30:00"), Some(5400));
        assert_eq!(parse_slurm_time("1-02"), Some(93600));
        assert_eq!(parse_slurm_time("1-00:01"), Some(86460));
        assert_eq!(parse_slurm_time("2-00:00:05"), Some(172805));
        for bad in ["", "1h", "1-", "-1", "1:2:3:4", "1-1:2:3:4", "a:b"] {
            assert_eq!(parse_slurm_time(bad), None, "{bad}");
        }
    }
}
