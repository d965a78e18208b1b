//! The engine's side of report.html, which `aorta_report` renders: the environment section
//! started on a thread while the trials run, and a run directory's recipe compiled for
//! `aorta report RUN_DIR`.

use crate::compile::Compiled;
use crate::environment::key_rules;
use aorta_report::EnvSection;

/// An [`EnvSection`] made on its own thread once [`PendingEnvSection::start`]ed.
#[derive(Default)]
pub(crate) struct PendingEnvSection {
    started: bool,
    thread: Option<std::thread::JoinHandle<EnvSection>>,
}

fn env_section(recipe: &aorta_recipe::Recipe, env: &crate::EnvRecord) -> EnvSection {
    EnvSection::new(recipe, &env.snapshot, env.key.clone(), key_rules(recipe))
}

impl PendingEnvSection {
    /// Starts making `c`'s section on a thread, the first time it is called.
    pub(crate) fn start(&mut self, c: &Compiled) {
        if std::mem::replace(&mut self.started, true) {
            return;
        }
        let (recipe, env) = (c.recipe.clone(), c.env.clone());
        self.thread = std::thread::Builder::new()
            .name("aorta-report-env".into())
            .spawn(move || env_section(&recipe, &env))
            .ok();
    }

    /// The section: the thread's, or made here if none was started or it failed.
    pub(crate) fn wait(self, c: &Compiled) -> EnvSection {
        self.thread
            .and_then(|h| h.join().ok())
            .unwrap_or_else(|| env_section(&c.recipe, &c.env))
    }
}

/// `aorta report RUN_DIR`: report.html rendered again from what a run directory holds (its
/// recipe.resolved.yaml, each trial's result.json, its env.json and doctor.json), for a run built before
/// report.html existed or received in a bundle. `sidecars`: registries the recipe's
/// mitigations need. Returns the page's path.
pub fn render_run_dir(
    run_dir: &std::path::Path,
    sidecars: &[std::path::PathBuf],
    agent: Option<(&aorta_report::Answer, &aorta_report::AgentPage)>,
) -> crate::Result<std::path::PathBuf> {
    use crate::EngineError;
    let resolved = run_dir.join("recipe.resolved.yaml");
    if !resolved.is_file() {
        return Err(EngineError::usage(
            format!(
                "{} is not a run directory (it has no recipe.resolved.yaml)",
                run_dir.display()
            ),
            "point at a run directory such as probe_results/<ticket>",
        ));
    }
    // Through a compile database of its own, like every recipe (no session: nothing runs).
    let mut compiler = crate::compile::Compiler::new();
    let id = compiler.add(crate::compile::TargetSpec {
        label: None,
        origin: crate::compile::RecipeOrigin::File {
            path: resolved.clone(),
            sidecars: sidecars.to_vec(),
            overlays: Default::default(),
        },
        argv: None,
    });
    let mut recipe = crate::session::recipe_of(&compiler, &compiler.targets[id.0])?;
    // The resolved file names the recipe it came from: that is what reproduces the run.
    let text = std::fs::read_to_string(&resolved).unwrap_or_default();
    let source = text
        .lines()
        .find_map(|l| l.strip_prefix("# Source: "))
        .and_then(|l| l.rsplit_once(" (blake3:"));
    if let (Some((path, hash)), Some(s)) = (source, recipe.source.as_mut()) {
        s.path = path.into();
        s.blake3 = hash.trim_end_matches(')').to_string();
    }
    let classifier = crate::bodies::classifier_config(&recipe).ok();
    // The node's verdict, as the build's pages showed it: the run directory's doctor.json.
    let doctor = crate::doctor::verdict_for_run(None, run_dir);
    let html = aorta_report::render_run_dir(
        run_dir,
        &recipe,
        &key_rules(&recipe),
        classifier.as_ref(),
        aorta_report::RunInfo {
            run_timestamp: crate::outputs::utc_timestamp(),
            warnings: Vec::new(),
            doctor,
        },
        agent,
    )
    .map_err(|e| match e {
        aorta_report::RunDirError::NotARecord { .. } => EngineError::usage(
            e.to_string(),
            "the run directory was written by another aorta, or edited",
        ),
        aorta_report::RunDirError::Read { .. } => EngineError::infra(e.to_string()),
    })?;
    let dest = run_dir.join("report.html");
    crate::write_atomic(&dest, html.as_bytes())
        .map_err(|e| EngineError::infra(format!("cannot write {}: {e}", dest.display())))?;
    Ok(dest)
}
