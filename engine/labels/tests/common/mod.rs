//! A throwaway workspace on disk: `.aorta-root` marker plus the real `rules/aorta.bzl`, so the
//! integration tests exercise the rule file users actually load.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use aorta_labels::{LabelsError, LabelsErrorKind, RecipeTarget};

pub const AORTA_BZL: &str = include_str!("../../../../rules/aorta.bzl");
pub const LOAD: &str = "load(\"//rules:aorta.bzl\", \"aorta_recipe\")\n";

pub struct Ws {
    dir: tempfile::TempDir,
}

impl Ws {
    pub fn new() -> Ws {
        let ws = Ws {
            dir: tempfile::tempdir().unwrap(),
        };
        ws.write(".aorta-root", "");
        ws.write("rules/aorta.bzl", AORTA_BZL);
        ws
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn write(&self, rel: &str, content: &str) -> &Ws {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        self
    }

    pub fn resolve(&self, spec: &str) -> Result<Vec<RecipeTarget>, LabelsError> {
        aorta_labels::resolve(self.root(), spec)
    }

    pub fn one(&self, spec: &str) -> RecipeTarget {
        let mut v = self.resolve(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(v.len(), 1, "{spec}");
        v.pop().unwrap()
    }

    pub fn labels(&self, spec: &str) -> Vec<String> {
        self.resolve(spec)
            .unwrap_or_else(|e| panic!("{spec}: {e}"))
            .into_iter()
            .map(|t| t.label)
            .collect()
    }

    pub fn err(&self, spec: &str) -> LabelsError {
        match self.resolve(spec) {
            Ok(v) => panic!("{spec} should fail, got {v:?}"),
            Err(e) => e,
        }
    }
}

/// Fields of a starlark diagnostic: (file relative to the workspace, line, column, message).
pub fn starlark_parts(ws: &Ws, e: &LabelsError) -> (String, usize, usize, String) {
    match e.kind() {
        LabelsErrorKind::Starlark {
            file,
            line,
            column,
            message,
            ..
        } => (
            file.strip_prefix(ws.root()).unwrap().display().to_string(),
            *line,
            *column,
            message.clone(),
        ),
        other => panic!("expected a starlark error, got {other:?}"),
    }
}

/// The diagnostic as a user sees it (no colors), to check snippet and help rendering.
pub fn render(e: &LabelsError) -> String {
    let mut out = String::new();
    miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
        .with_width(200)
        .render_report(&mut out, e)
        .unwrap();
    out
}
