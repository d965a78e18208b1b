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
    pub env_key: EnvKeyRules,
    pub resources: Resources,
    pub inputs: Vec<String>,
    pub ignore_inputs: Vec<String>,
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
    let trials = cx.positive_u32(root.get("trials").unwrap_or(root), &top.key("trials"))?;
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
    Ok(Common {
        inputs,
        ignore_inputs,
        resources,
        ticket,
        trials,
        threshold,
        baseline_cell,
        stop_after,
        env_key,
    })
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
