//! What both modes' loaders (cells.rs for triage, probe.rs for probe) read alike: the shared
//! top-level fields and the check that an explicit baseline names a cell.

use crate::blocks;
use crate::check::{Ctx, Res};
use crate::model::*;
use aorta_source::{suggest, DiagKind, FieldPath, Node};

/// Fields both modes share: ticket, trials, confound threshold, stop_after, env_key.
pub(crate) struct Common {
    pub ticket: Option<String>,
    pub trials: u32,
    pub threshold: f64,
    pub baseline_cell: Option<(String, Node)>,
    pub stop_after: Option<StopAfter>,
    pub auto: Option<AutoTrials>,
    pub env_key: EnvKeyRules,
    pub resources: Resources,
    pub inputs: Vec<String>,
    pub ignore_inputs: Vec<String>,
    pub doctor: Option<DoctorLevel>,
}

pub(crate) fn common(cx: &Ctx, root: &Node) -> Res<Common> {
    let top = FieldPath::root();
    let ticket = match root.get("ticket") {
        None => None,
        Some(n) if n.is_null() => None,
        Some(n) => Some(
            cx.string(
                n,
                &top.key("ticket"),
                "a ticket id such as TICKET-1234; quote it if it looks like a number",
            )?
            .to_string(),
        ),
    };
    let auto = auto_trials(cx, root)?;
    let trials = match auto {
        Some(a) => a.max_trials_per_cell,
        None => match root.get("trials") {
            // A word that is not `auto` (`autoo`, `Auto`): say that auto is the word meant.
            Some(n) if n.as_str().is_some() => return Err(cx.schema(
                n,
                &top.key("trials"),
                format!(
                    "must be a whole number >= 1 or auto, got {:?}",
                    n.as_str().unwrap_or_default()
                ),
                "write trials: auto (the sequential test: docs/recipes.md), or a number such as 10",
            )),
            t => cx.positive_u32(t.unwrap_or(root), &top.key("trials"))?,
        },
    };
    let (mut threshold, mut baseline_cell) = (1.15, None);
    if let Some(conf) = root.get("confound") {
        let p = top.key("confound");
        let entries = cx.map(
            conf,
            &p,
            "confound: {threshold: 1.15, baseline_cell: <cell>}",
        )?;
        cx.only_keys(entries, &p, &["threshold", "baseline_cell"], "confound")?;
        if let Some(t) = conf.get("threshold") {
            threshold = cx.positive_number(t, &p.key("threshold"))?;
        }
        if let Some(b) = conf.get("baseline_cell") {
            let name = cx.non_empty_string(b, &p.key("baseline_cell"), "the name of a cell")?;
            baseline_cell = Some((name.to_string(), b.clone()));
        }
    }
    let stop_after = match root.get("stop_after") {
        None => None,
        Some(n) => Some(blocks::stop_after(cx, n, &top.key("stop_after"))?),
    };
    if let (Some(_), Some(n)) = (auto, root.get("stop_after")) {
        return Err(cx.schema(
            n,
            &top.key("stop_after"),
            "stop_after conflicts with trials: auto",
            "trials: auto already stops each cell once its answer is known; remove stop_after",
        ));
    }
    let env_key = match root.get("env_key") {
        None => EnvKeyRules::default(),
        Some(n) => blocks::env_key(cx, n, &top.key("env_key"))?,
    };
    let resources = crate::resources::resources(cx, root, &top)?;
    let globs = |name: &str| -> Res<Vec<String>> {
        let Some(n) = root.get(name) else {
            return Ok(Vec::new());
        };
        let p = top.key(name);
        let help = "workspace-relative globs, e.g. [data/**, configs/*.yaml]";
        let list = cx.string_list(n, &p, help)?;
        for (i, g) in list.iter().enumerate() {
            if let Err(e) = globset::Glob::new(g) {
                let item = n.as_seq().and_then(|s| s.get(i)).unwrap_or(n);
                return Err(cx.schema(item, &p.index(i), format!("not a glob: {e}"), help));
            }
        }
        Ok(list)
    };
    let inputs = globs("inputs")?;
    let ignore_inputs = globs("ignore_inputs")?;
    let doctor = match root.get("doctor") {
        None => None,
        Some(n) if n.is_null() => None,
        Some(n) => {
            let p = top.key("doctor");
            let help = "doctor: quick (passive checks, about 1 s), medium or long (docs/doctor.md)";
            let word = cx.string(n, &p, help)?;
            match DoctorLevel::ALL.iter().find(|l| l.as_str() == word) {
                Some(l) => Some(*l),
                None => {
                    return Err(cx.schema(
                        n,
                        &p,
                        format!("must be quick, medium or long, got {word:?}"),
                        help,
                    ))
                }
            }
        }
    };
    Ok(Common {
        doctor,
        inputs,
        ignore_inputs,
        resources,
        ticket,
        trials,
        threshold,
        baseline_cell,
        stop_after,
        auto,
        env_key,
    })
}

/// The top-level keys that only `trials: auto` reads.
pub(crate) const AUTO_KEYS: &[&str] = &[
    "max_trials_per_cell",
    "confidence",
    "max_walltime",
    "max_gpu_hours",
    "comparisons",
];

/// `trials: auto` and its settings; `None` for a numeric `trials` (whose auto-only keys are
/// refused).
fn auto_trials(cx: &Ctx, root: &Node) -> Res<Option<AutoTrials>> {
    let top = FieldPath::root();
    let is_auto = root
        .get("trials")
        .and_then(|n| n.as_str())
        .is_some_and(|s| s == "auto");
    if !is_auto {
        if let Some(key) = AUTO_KEYS.iter().find(|k| root.get(k).is_some()) {
            let node = root.get(key).unwrap_or(root);
            return Err(cx.schema(
                node,
                &top.key(key),
                format!("'{key}' applies only to trials: auto"),
                "write trials: auto, or remove this key",
            ));
        }
        return Ok(None);
    }
    let max_trials_per_cell = match root.get("max_trials_per_cell") {
        None => AutoTrials::DEFAULT_MAX_TRIALS_PER_CELL,
        Some(n) => {
            let p = top.key("max_trials_per_cell");
            let v = cx.positive_u32(n, &p)?;
            if v < 4 {
                return Err(cx.schema(
                    n,
                    &p,
                    format!("{v} is too few: the first look is at 4 trials"),
                    "use max_trials_per_cell: 4 or more (default 64)",
                ));
            }
            v
        }
    };
    let confidence = match root.get("confidence") {
        None => AutoTrials::DEFAULT_CONFIDENCE,
        Some(n) => {
            let p = top.key("confidence");
            let v = cx.number(n, &p)?;
            if !(0.5..1.0).contains(&v) {
                return Err(cx.schema(
                    n,
                    &p,
                    format!("confidence {v} is outside [0.5, 1)"),
                    "write a probability such as 0.95",
                ));
            }
            v
        }
    };
    let max_walltime_sec = match root.get("max_walltime") {
        None => None,
        Some(n) => Some(duration(cx, n, &top.key("max_walltime"))?),
    };
    let max_gpu_hours = match root.get("max_gpu_hours") {
        None => None,
        Some(n) => Some(cx.positive_number(n, &top.key("max_gpu_hours"))?),
    };
    let comparisons = match root.get("comparisons") {
        None => None,
        Some(n) => Some(cx.positive_u32(n, &top.key("comparisons"))?),
    };
    Ok(Some(AutoTrials {
        max_trials_per_cell,
        confidence,
        max_walltime_sec,
        max_gpu_hours,
        comparisons,
    }))
}

/// A duration: seconds as a number, or a string with a unit (`90s`, `45m`, `2h`).
fn duration(cx: &Ctx, node: &Node, path: &FieldPath) -> Res<f64> {
    if let Some(s) = node.as_str() {
        return parse_duration(s).ok_or_else(|| {
            cx.schema(
                node,
                path,
                format!("'{}' is not a duration", s.trim()),
                DURATION_HELP,
            )
        });
    }
    cx.positive_number(node, path)
}

pub(crate) const DURATION_HELP: &str = "seconds as a number, or a string such as 90m or 2h";

/// Seconds from `3600`, `90s`, `90m` or `2h`; `None` unless positive and finite.
pub(crate) fn parse_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, scale) = match s.chars().last() {
        Some('s') => (&s[..s.len() - 1], 1.0),
        Some('m') => (&s[..s.len() - 1], 60.0),
        Some('h') => (&s[..s.len() - 1], 3600.0),
        _ => (s, 1.0),
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| *v > 0.0 && v.is_finite())
        .map(|v| v * scale)
}

/// Checks an explicit baseline names a cell; the error lists the cells.
pub(crate) fn check_explicit_baseline(
    cx: &Ctx,
    cells: &[Cell],
    name: &str,
    node: &Node,
) -> Res<()> {
    if cells.iter().any(|c| c.name == name) {
        return Ok(());
    }
    let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
    let mut msg = format!("baseline_cell '{name}' does not name a cell");
    if let Some(s) = suggest::did_you_mean(name, names.iter().copied()) {
        msg.push_str(&format!(" (did you mean '{s}'?)"));
    }
    Err(cx.err(
        DiagKind::Cell,
        node,
        &FieldPath::root().key("confound").key("baseline_cell"),
        msg,
        format!("cells: {}", names.join(", ")),
    ))
}
