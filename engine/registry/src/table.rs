//! The `list` tables, in AORTA's layout (spec §1.1.2/§1.1.3): one header line, columns
//! padded to the widest of header and values, two-space separators. We add a DESCRIPTION
//! column (and BUCK_TARGET for environments, which AORTA forgot); trailing spaces are
//! trimmed so the output diffs cleanly.

use crate::{Environment, Mitigation};

pub(crate) fn mitigations<'a>(rows: impl Iterator<Item = &'a Mitigation>) -> String {
    let rows = rows.map(|m| {
        let env = if m.env.is_empty() {
            "(none)".to_string()
        } else {
            m.env
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        vec![
            m.name.clone(),
            m.source.to_string(),
            env,
            m.description.clone(),
        ]
    });
    render(&["NAME", "SOURCE", "ENV", "DESCRIPTION"], rows.collect())
}

pub(crate) fn environments<'a>(rows: impl Iterator<Item = &'a Environment>) -> String {
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let rows = rows.map(|e| {
        vec![
            e.name.clone(),
            e.source.to_string(),
            dash(&e.docker),
            dash(&e.venv),
            dash(&e.buck_target),
            e.description.clone(),
        ]
    });
    render(
        &[
            "NAME",
            "SOURCE",
            "DOCKER",
            "VENV",
            "BUCK_TARGET",
            "DESCRIPTION",
        ],
        rows.collect(),
    )
}

/// Widths are counted in characters, so non-ASCII names still line up in a terminal.
fn render(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_to_widest_and_trims() {
        let t = render(
            &["NAME", "X"],
            vec![
                vec!["a".into(), "long".into()],
                vec!["longer_name".into(), "".into()],
            ],
        );
        assert_eq!(t, "NAME         X\na            long\nlonger_name\n");
    }
}
