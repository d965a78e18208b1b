//! One session per invocation: it opens the store, the remote tier and the environment
//! snapshot, resolves workloads and holds the compile database. Every entry point (`build`,
//! `sweep run`, `run`, `trial exec`, `explain`, `--dry-run`, `--watch`) compiles through
//! [`Session::compile`], so a trial's key cannot be computed any other way.

use crate::compile::{normalize, Compiled, Compiler, TargetId, TargetSpec};
use crate::environment::{self, EnvSource, SnapshotSlot};
use crate::error::{EngineError, Result};
use aorta_exec::CancelToken;
use aorta_graph::db::{dag, recipe, trials};
use aorta_graph::{hash_inputs, KeyContext};
use aorta_recipe::Mode;
use aorta_remote::{RemoteCache, RemoteStats, Settings};
use aorta_store::LocalStore;
use salsa::Setter;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// What an invocation's flags say about where things are and how trials run.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// `--store`; else `$AORTA_STORE`, else `.aorta/` at the workspace root.
    pub store: Option<PathBuf>,
    /// `--env-snapshot`; else `$AORTA_ENV_SNAPSHOT`.
    pub env_snapshot: Option<PathBuf>,
    /// `--python`; else `$AORTA_PYTHON`.
    pub python: Option<PathBuf>,
    /// The remote-cache flags; the environment and `.buckconfig` fill what they leave unset.
    pub remote: Settings,
    pub jobs: Option<usize>,
    pub gpus: Vec<String>,
    pub kill_on_hang: bool,
    /// Timeout for workload-protocol trials (probe recipes carry their own).
    pub trial_timeout: Option<f64>,
    /// `--output`: the run directory's parent (AORTA's default per flow when None).
    pub output: Option<PathBuf>,
    /// `--executor` and the Slurm flags; the environment and `.buckconfig` fill what they
    /// leave unset (docs/slurm.md).
    pub slurm: aorta_slurm::Settings,
    /// `--detach`: submit to the cluster and return; a later build collects.
    pub detach: bool,
    /// `--rerun` / `--rerun-cell`: stored results the first build of this session executes
    /// again (watch mode's later rounds do not).
    pub rerun: crate::reuse::Rerun,
    /// The command that records a command trial's inputs, before its `--out FILE -- COMMAND`
    /// (the CLI passes `aorta-trace` beside the aorta binary, else `aorta __trace`); None
    /// runs command trials untraced, and says so.
    pub tracer: Option<Vec<String>>,
}

pub struct Session {
    pub(crate) opts: SessionOptions,
    pub(crate) cwd: PathBuf,
    workspace_root: PathBuf,
    store_root: PathBuf,
    store: OnceLock<Arc<LocalStore>>,
    pub(crate) remote: Option<Arc<RemoteCache>>,
    pub(crate) slurm: aorta_slurm::SlurmConfig,
    remote_reported: Mutex<RemoteStats>,
    env_source: EnvSource,
    snapshot: SnapshotSlot,
    workloads: crate::workloads::WorkloadCache,
    cancel: OnceLock<CancelToken>,
    pub(crate) compiler: Mutex<Compiler>,
    /// Set once `opts.rerun` has been applied (by the session's first build).
    rerun_applied: std::sync::atomic::AtomicBool,
    /// The traced inputs' digest cache, loaded from the store once.
    digests: OnceLock<Arc<crate::traced::DigestCache>>,
    /// The `--doctor` preflight's record, once run: every build of the invocation writes it
    /// into its run directory and shows its verdict.
    preflight: OnceLock<crate::doctor::Recorded>,
}

impl Session {
    /// Resolves the settings. Nothing is opened yet except the remote tier's configuration: a
    /// bad remote setting is an input error now, an unreachable cache is found out (and
    /// skipped) during the build.
    pub fn open(opts: SessionOptions) -> Result<Session> {
        let cwd = std::env::current_dir()
            .map_err(|e| EngineError::infra(format!("cannot read the current directory: {e}")))?;
        let workspace_root = aorta_labels::find_workspace_root(&cwd);
        let store_root = match &opts.store {
            Some(p) => p.clone(),
            None => aorta_store::default_store_root(&workspace_root),
        };
        let settings = opts
            .remote
            .clone()
            .or(Settings::from_env())
            .or(Settings::from_project(&workspace_root));
        let bad = |e: aorta_remote::ConfigError| EngineError::usage(e.message, e.help);
        let remote = match settings.resolve().map_err(bad)? {
            Some(cfg) => Some(Arc::new(aorta_remote::open(&cfg).map_err(bad)?)),
            None => None,
        };
        let slurm = opts
            .slurm
            .clone()
            .or(aorta_slurm::Settings::from_env())
            .or(aorta_slurm::Settings::from_project(&workspace_root))
            .resolve()
            .map_err(|e| EngineError::usage(e.message, e.help))?;
        if opts.jobs == Some(0) {
            return Err(EngineError::usage(
                "--jobs 0 would run no trial",
                "pass --jobs 1 or more (the default is 1, or one per --gpus device)",
            ));
        }
        if opts.detach && slurm.executor != aorta_slurm::Executor::Slurm {
            return Err(EngineError::usage(
                "--detach leaves trials running on a cluster; it needs --executor slurm",
                "aorta build //recipes:x --executor slurm --detach",
            ));
        }
        let env_source = EnvSource::resolve(opts.env_snapshot.clone(), opts.python.clone());
        crate::timing_mark("session open");
        Ok(Session {
            opts,
            cwd,
            workspace_root,
            store_root,
            store: OnceLock::new(),
            remote,
            slurm,
            remote_reported: Mutex::default(),
            env_source,
            snapshot: SnapshotSlot::default(),
            workloads: Default::default(),
            cancel: OnceLock::new(),
            compiler: Mutex::new(Compiler::new()),
            rerun_applied: Default::default(),
            digests: OnceLock::new(),
            preflight: OnceLock::new(),
        })
    }

    pub fn workspace_root(&self) -> &Path {
        &self.workspace_root
    }

    pub fn store_root(&self) -> &Path {
        &self.store_root
    }

    pub fn options(&self) -> &SessionOptions {
        &self.opts
    }

    /// The local store, opened (and created) on first use; dry runs never create one.
    pub fn store(&self) -> Result<Arc<LocalStore>> {
        if let Some(s) = self.store.get() {
            return Ok(s.clone());
        }
        let s = LocalStore::open(&self.store_root).map_err(|e| {
            EngineError::infra_with_help(
                format!(
                    "cannot open the store at {}: {e}",
                    self.store_root.display()
                ),
                "check --store / AORTA_STORE and the disk",
            )
        })?;
        match std::env::var("AORTA_PLACE_OUTPUTS").as_deref() {
            Err(_) | Ok("" | "link") => {}
            Ok("copy") => s.place_by_copy(),
            Ok(other) => {
                return Err(EngineError::usage(
                    format!("AORTA_PLACE_OUTPUTS={other:?} is neither `link` nor `copy`"),
                    "unset it for the default, `link` (a run directory's trial files are hard \
                     links to the store's read-only files), or set `copy` (files of their own)",
                ))
            }
        }
        Ok(self.store.get_or_init(|| Arc::new(s)).clone())
    }

    /// The store, checked writable: what a build or `trial exec` uses before it runs anything.
    pub(crate) fn writable_store(&self) -> Result<Arc<LocalStore>> {
        let store = self.store()?;
        store.check_writable().map_err(|e| {
            EngineError::infra_with_help(
                format!(
                    "the store at {} is not writable: {e}",
                    self.store_root.display()
                ),
                "a build stores every trial it runs: point --store / AORTA_STORE at a writable \
                 directory (`aorta explain` and `aorta build --dry-run` read a read-only store)",
            )
        })?;
        Ok(store)
    }

    /// The store if one exists at the root already (explain must not create one).
    pub fn existing_store(&self) -> Result<Option<Arc<LocalStore>>> {
        if self.store.get().is_none() && !self.store_root.join("VERSION").exists() {
            return Ok(None);
        }
        self.store().map(Some)
    }

    /// Ctrl-C: installed on first use; the first press cancels running trials.
    pub fn cancel_token(&self) -> Result<CancelToken> {
        if let Some(c) = self.cancel.get() {
            return Ok(c.clone());
        }
        let c = aorta_exec::install_interrupt_handler()
            .map_err(|e| EngineError::infra(format!("cannot install the Ctrl-C handler: {e}")))?;
        Ok(self.cancel.get_or_init(|| c).clone())
    }

    /// `--doctor LEVEL` (or a recipe's `doctor:`, [`crate::doctor::wanted`]): runs the node's
    /// checks once, before any trial of the invocation. A failing node is refused unless
    /// `mark`; the record is then written into every run directory this session builds, and
    /// its verdict shown by their env.json, matrix.md and report.html. `None`: no preflight.
    ///
    /// Under `--executor slurm` the checks run on a node of the partition `recipe`'s trials run
    /// on (a one-task job of their shape), not on this machine.
    pub fn preflight(
        &self,
        level: Option<crate::doctor::Level>,
        mark: bool,
        recipe: Option<&aorta_recipe::Recipe>,
    ) -> std::result::Result<Option<&crate::doctor::Recorded>, crate::doctor::PreflightError> {
        let Some(level) = level else {
            return Ok(None);
        };
        if let Some(done) = self.preflight.get() {
            return Ok(Some(done));
        }
        let rec = match recipe.filter(|_| self.runs_on_cluster()) {
            Some(recipe) => {
                let not_checked = |e| crate::doctor::PreflightError::NotChecked(Box::new(e));
                let report = self
                    .partition_probe()
                    .and_then(|probe| probe.doctor(recipe, level))
                    .map_err(not_checked)?;
                crate::doctor::judge(report, mark)?
            }
            None => {
                crate::doctor::preflight(level, mark, self.env_source.snapshot_file.as_deref())?
            }
        };
        Ok(Some(self.preflight.get_or_init(|| rec)))
    }

    /// Whether trials run on a Slurm cluster's nodes rather than this machine.
    pub fn runs_on_cluster(&self) -> bool {
        self.slurm.executor == aorta_slurm::Executor::Slurm
    }

    /// This invocation's preflight record, if one ran.
    pub(crate) fn preflight_record(&self) -> Option<&crate::doctor::Recorded> {
        self.preflight.get()
    }

    pub(crate) fn probe_cache_dir(&self) -> PathBuf {
        environment::probe_cache_dir(&self.store_root)
    }

    /// Whether trials are keyed by a Slurm partition's environment (a probe job's snapshot)
    /// rather than this machine's: `--executor slurm` with no snapshot pinned
    /// (crate::execute::nodes).
    pub(crate) fn partition_keyed(&self) -> bool {
        self.slurm.executor == aorta_slurm::Executor::Slurm
            && self.env_source.snapshot_file.is_none()
    }

    /// The one-task Slurm jobs a build runs on the partition before its arrays (the
    /// environment probe, the doctor).
    fn partition_probe(&self) -> Result<crate::execute::nodes::PartitionProbe<'_>> {
        Ok(crate::execute::nodes::PartitionProbe {
            cfg: &self.slurm,
            root: self.store_root.join("slurm"),
            cwd: &self.cwd,
            python: self.env_source.python.as_deref(),
            cancel: self.cancel_token()?,
        })
    }

    /// The environment snapshot a build of `recipe` is keyed by (probed once per session, or
    /// the `--env-snapshot` file, or the Slurm partition's).
    pub fn machine(&self, recipe: &aorta_recipe::Recipe) -> Result<Arc<aorta_probe::Snapshot>> {
        Ok(self.environment(recipe)?.snapshot)
    }

    pub(crate) fn environment(
        &self,
        recipe: &aorta_recipe::Recipe,
    ) -> Result<environment::EnvRecord> {
        if self.partition_keyed() {
            let file = self.partition_probe()?.snapshot(recipe)?;
            return environment::recorded(&file, recipe);
        }
        environment::environment(
            &self.snapshot,
            &self.env_source,
            self.probe_cache_dir(),
            recipe,
        )
    }

    /// How a target is named to the user: its label, else its recipe's origin.
    pub fn target_name(&self, id: TargetId) -> String {
        let c = self.compiler.lock().unwrap_or_else(|e| e.into_inner());
        let spec = &c.targets[id.0].spec;
        spec.label
            .clone()
            .unwrap_or_else(|| spec.origin.display_name())
    }

    /// Forgets resolved workloads (watch mode: an executable may have been rebuilt).
    pub fn forget_workloads(&self) {
        self.workloads.clear();
    }

    /// Adds a target to the compile database. Targets share the texts of the files they read,
    /// so a file is read (and re-read on change) once however many targets name it.
    pub fn add_target(&self, spec: TargetSpec) -> TargetId {
        self.compiler
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(spec)
    }

    /// A target's recipe alone, through the compile database (no environment probe, no keys):
    /// for commands that read a recipe's settings, such as `aorta classify`.
    pub fn recipe(&self, target: TargetId) -> Result<Arc<aorta_recipe::Recipe>> {
        let c = self.compiler.lock().unwrap_or_else(|e| e.into_inner());
        let t = &c.targets[target.0];
        recipe_of(&c, t).map(Arc::new)
    }

    /// The registry a target's recipe is resolved against (the project registry beside its
    /// file and its sidecars): for callers that list or check mitigation names, such as the
    /// agent's candidates.
    pub fn registry(&self, target: TargetId) -> Result<aorta_registry::Registry> {
        let c = self.compiler.lock().unwrap_or_else(|e| e.into_inner());
        let t = &c.targets[target.0];
        match aorta_graph::db::registry(&c.db, t.build).as_ref() {
            Ok(r) => Ok(r.clone()),
            Err(e) => {
                Err(read_error(&t.spec.origin).unwrap_or_else(|| EngineError::Input(e.clone())))
            }
        }
    }

    /// Compiles a target: its recipe (memoized), the environment key, the command's input
    /// hashes and the workload's identity, then the trial keys and the DAG.
    pub fn compile(&self, target: TargetId) -> Result<Compiled> {
        compile(self, target)
    }

    /// One line about the remote cache's work since the last call (after each build), or None
    /// when no remote tier is configured.
    pub fn remote_report(&self) -> Option<String> {
        let r = self.remote.as_ref()?;
        let total = r.stats();
        let mut reported = self
            .remote_reported
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let before = std::mem::replace(&mut *reported, total.clone());
        let (downloaded, uploaded) = (
            total.downloaded - before.downloaded,
            total.uploaded - before.uploaded,
        );
        let (present, rejected, errors) = (
            total.already_present - before.already_present,
            total.rejected - before.rejected,
            total.errors - before.errors,
        );
        let mut line = format!("aorta: remote cache {} ({}, namespace {}): {downloaded} downloaded, {uploaded} uploaded", r.config().url, r.mode().as_str(), r.config().namespace);
        if present > 0 {
            line += &format!(", {present} already there");
        }
        if rejected > 0 {
            line += &format!(", {rejected} rejected (did not verify)");
        }
        if total.disabled.is_some() {
            line += ", unreachable (skipped)";
        } else if errors > 0 {
            line += &format!(", {errors} errors (skipped)");
        }
        Some(line)
    }

    /// The invocation's settings that can change a verdict, for the trial keys (each cell's
    /// keyed resources are added by the plan).
    fn execution_key(&self) -> aorta_graph::ExecutionKey {
        aorta_graph::ExecutionKey {
            resources: Default::default(),
            kill_on_hang: self.opts.kill_on_hang,
            workload_timeout_ms: self.opts.trial_timeout.map(|s| (s * 1000.0).round() as u64),
            containment_off: std::env::var(aorta_exec::CONTAINMENT_VAR).is_ok_and(|v| v == "off"),
        }
    }

    /// What a build of `c` verifies and records traced inputs with: the recipe's scope over the
    /// session's digest cache, with a fresh per-build memo.
    pub(crate) fn inputs(&self, c: &crate::Compiled) -> Result<Arc<crate::traced::Inputs>> {
        let digests = self
            .digests
            .get_or_init(|| Arc::new(crate::traced::DigestCache::open(&self.store_root)))
            .clone();
        let scope = crate::traced::Scope::new(
            &self.workspace_root,
            &self.store_root,
            &c.recipe.ignore_inputs,
        )
        .map_err(|e| {
            EngineError::usage(
                format!("ignore_inputs: {e}"),
                "a glob such as data/scratch/**",
            )
        })?;
        Ok(Arc::new(crate::traced::Inputs::new(scope, digests)))
    }

    /// How command trials are traced in this session.
    pub(crate) fn tracing(&self) -> crate::execute::process::Tracing {
        use crate::execute::process::Tracing;
        if std::env::var("AORTA_TRACE").is_ok_and(|v| v == "off") {
            return Tracing::Off("AORTA_TRACE=off".into());
        }
        match &self.opts.tracer {
            Some(t) => Tracing::On(t.clone()),
            None => Tracing::Off("this aorta runs without an input tracer".into()),
        }
    }

    /// Saves what the digest cache learned (after a build).
    pub(crate) fn save_digests(&self) {
        if let Some(d) = self.digests.get() {
            d.save();
        }
    }

    /// The `--rerun` request, the first time a build asks (None after, or when there is none).
    pub(crate) fn take_rerun(&self) -> Option<&crate::reuse::Rerun> {
        use std::sync::atomic::Ordering;
        if self.opts.rerun.is_empty() || self.rerun_applied.swap(true, Ordering::SeqCst) {
            return None;
        }
        Some(&self.opts.rerun)
    }

    pub(crate) fn workload_timeout(&self) -> Option<Duration> {
        self.opts.trial_timeout.map(Duration::from_secs_f64)
    }
}

/// The target's recipe from the database. The database reads a file it cannot open as empty
/// (watch mode waits for an editor's save), so when the recipe fails, the error that explains
/// it is a read error of one of its files, if there is one.
pub(crate) fn recipe_of(
    c: &crate::compile::Compiler,
    t: &crate::compile::Target,
) -> Result<aorta_recipe::Recipe> {
    recipe(&c.db, t.build)
        .as_ref()
        .clone()
        .map_err(|e| read_error(&t.spec.origin).unwrap_or(EngineError::Input(e)))
}

/// The first file of `origin` that cannot be read, as an input error.
fn read_error(origin: &crate::compile::RecipeOrigin) -> Option<EngineError> {
    origin
        .files()
        .find_map(|p| aorta_source::SourceFile::read(p).err())
        .map(EngineError::Input)
}

/// See [`Session::compile`].
fn compile(session: &Session, id: TargetId) -> Result<Compiled> {
    let t0 = std::time::Instant::now();
    let (build, spec, recipe) = {
        let c = session.compiler.lock().unwrap_or_else(|e| e.into_inner());
        let t = &c.targets[id.0];
        let r = recipe_of(&c, t)?;
        (t.build, t.spec.clone(), r)
    };
    let label = spec
        .label
        .clone()
        .unwrap_or_else(|| spec.origin.display_name());
    let argv = if recipe.mode == Mode::Probe {
        spec.argv.clone()
    } else {
        None
    };
    let env = session.environment(&recipe)?;
    let input_hashes = match &argv {
        Some(a) => {
            let declared =
                aorta_graph::expand_globs(&session.cwd, &recipe.inputs).map_err(|e| {
                    EngineError::usage(
                        e.to_string(),
                        "inputs: globs relative to where aorta runs, e.g. [data/**]",
                    )
                })?;
            hash_inputs(&session.cwd, a, &declared)
                .map_err(|e| EngineError::usage(e.to_string(), "check the command's input paths"))?
        }
        None => BTreeMap::new(),
    };
    let input_digests: Vec<(PathBuf, String)> = input_hashes
        .iter()
        .map(|(p, h)| (normalize(&session.cwd.join(p)), h.clone()))
        .collect();
    let input_files = input_digests.iter().map(|(p, _)| p.clone()).collect();
    let workload = (recipe.mode == Mode::Triage).then(|| {
        session.workloads.get(
            &recipe.workload,
            env.snapshot.pytorch.torch_dir.as_deref().map(Path::new),
        )
    });
    let resolved = match &workload {
        Some(Ok(w)) => Some(aorta_graph::ResolvedWorkload {
            name: w.name.clone(),
            version: w.version.clone(),
            executable_blake3: w.blake3.clone(),
        }),
        _ => None,
    };
    let ctx = KeyContext {
        env_snapshot: env.key.hash.clone(),
        argv: argv.clone(),
        input_hashes,
        workload: resolved,
        execution: session.execution_key(),
    };
    let mut c = session.compiler.lock().unwrap_or_else(|e| e.into_inner());
    if *build.context(&c.db) != ctx {
        build.set_context(&mut c.db).to(ctx);
    }
    let planned = trials(&c.db, build)
        .clone()
        .map_err(|e| EngineError::infra(format!("{label}: cannot compute trial keys: {e}")))?;
    let Some(graph) = dag(&c.db, build).as_ref().clone() else {
        return Err(EngineError::infra(format!(
            "{label}: the build graph could not be made"
        )));
    };
    crate::timing("compile (recipe, environment, keys, DAG)", t0);
    // A program found neither as a path nor on PATH would make every trial error: said once,
    // before them (a warning: on a cluster it may exist only on the nodes).
    let path = std::env::var_os("PATH").unwrap_or_default();
    let warnings = argv
        .as_deref()
        .and_then(|a| a.first())
        .filter(|program| aorta_exec::find_program(program, &path, &session.cwd).is_err())
        .map(|program| format!("the command's program {program:?} is not an executable file here nor on PATH: every trial will end in error unless it exists where the trials run"))
        .into_iter()
        .chain(recipe.trial_isolation.note().map(str::to_owned))
        .collect();
    Ok(Compiled {
        id,
        label,
        target_label: spec.label,
        recipe: Arc::new(recipe),
        argv,
        planned,
        dag: Arc::new(graph),
        env: Arc::new(env),
        workload,
        input_files,
        input_digests,
        warnings,
    })
}
