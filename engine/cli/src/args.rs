//! The command-line surface (clap). Handlers live in the `cmd_*` modules.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "aorta",
    version,
    about = "Declarative, incremental triage of GPU/PyTorch workloads",
    long_about = "aorta runs a matrix of mitigations × environments × trials over a workload or your own launch command, \
and reports which cells fail, how often, and at what speed cost.",
    after_help = "Exit codes: 0 the build finished (failing trials are results); 1 incomplete (no usable baseline, a trial \
could not run, or under --strict a cell errored or ran no trial); 2 bad input (recipe, flag, sidecar, label, \
an output path you named that cannot be written); \
3 infrastructure (store I/O, environment snapshot, a workload that cannot start); 130 interrupted.

Coming from AORTA 0.2.1: docs/compatibility.md lists every difference, why, and how to get AORTA's behaviour.",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build recipes named by label (//recipes:x, //recipes/..., or a file): every trial not
    /// in the cache runs, then matrix.json/md; `--dry-run` prints the plan instead.
    Build(BuildArgs),
    /// AORTA's unified matrix runner: a recipe, flag mode, or `-- COMMAND`.
    #[command(subcommand)]
    Sweep(SweepCommand),
    /// The mitigation registry.
    #[command(subcommand)]
    Mitigations(RegistryListCommand),
    /// The environment registry.
    #[command(subcommand)]
    Environments(RegistryListCommand),
    /// Run one workload for N trials, without a matrix.
    Run(RunArgs),
    /// Search for a mitigation that fixes a flaky command, with a sequential test behind
    /// `converged` (docs/agent.md): `aorta agent [OPTIONS] -- COMMAND…`.
    Agent(Box<AgentArgs>),
    /// What changed: the environment differences (`env`) or the first point of an ordered list
    /// (`range`) that turn a passing run into a failing one, flaky failures included
    /// (docs/bisect.md).
    #[command(subcommand)]
    Bisect(BisectCommand),
    /// The smallest part of a mitigation stack that still fixes the failure (ddmin):
    /// `aorta reduce --mitigations a,b,c -- COMMAND…` (docs/bisect.md).
    Reduce(Box<ReduceArgs>),
    /// Why a node would (not) run: a trial's key and inputs, a cell, or an artifact.
    Explain(ExplainArgs),
    /// The local content-addressed store.
    #[command(subcommand)]
    Cache(CacheCommand),
    /// The environment snapshot: GPU, driver, CUDA/ROCm libraries, PyTorch, numerics env vars.
    #[command(subcommand)]
    Env(EnvCommand),
    /// Micro-benchmarks: `aorta bench hw-queue list|run|sweep|compare` (GPU hardware queues).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// One trial by itself: `aorta trial exec` (what each Buck2 trial action runs).
    #[command(subcommand)]
    Trial(TrialCommand),
    /// Classify logs that already exist (a CI job's output, a paste, a node's dmesg) with the
    /// detectors trials use; exit 0 when nothing fired, 1 when something did, 2 on bad input.
    Classify(ClassifyArgs),
    /// Is this GPU node healthy enough to trust a sweep? Preflight checks, each with a verdict,
    /// the figure measured, the threshold and a remedy (docs/doctor.md); exit 0 when nothing
    /// failed (no GPU: every check not applicable), 1 when a check failed, 2 on bad input.
    Doctor(DoctorArgs),
    /// Render RUN_DIR/report.html again from the run directory (builds render it themselves).
    Report {
        /// The run directory (e.g. probe_results/QUICKSTART-1).
        #[arg(value_name = "RUN_DIR")]
        run_dir: PathBuf,
        /// Sidecar registry files the recipe's mitigations need.
        #[arg(long = "mitigations-file", value_name = "PATH")]
        mitigations_files: Vec<PathBuf>,
    },
    /// Pack a run directory into one redacted, reproducible .tar.gz with a blake3 manifest
    /// (`--verify FILE` re-checks one).
    Bundle(BundleArgs),
    /// Print the shell's completion script: commands, flags, recipe labels, mitigation,
    /// environment and workload names (e.g. `source <(aorta completions bash)`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_parser = ["bash", "zsh", "fish", "elvish", "powershell"])]
        shell: String,
    },
    /// Deprecated: use `aorta sweep run --recipe R -- COMMAND`.
    #[command(hide = true)]
    Probe(ProbeArgs),
    /// Deprecated: use `aorta sweep run|list-mitigations|list-environments`.
    #[command(subcommand, hide = true)]
    Triage(TriageCommand),
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Labels (`//recipes:quickstart`, `//recipes/...`) or recipe files.
    #[arg(required = true, add = crate::complete::labels())]
    pub targets: Vec<String>,
    /// Print the plan only: cells, resolved env vars, trials and their key inputs.
    #[arg(long)]
    pub dry_run: bool,
    /// JSON on stdout: with --dry-run the plan; else per target built one line with its
    /// counts, cells and answer (JSON Lines).
    #[arg(long)]
    pub json: bool,
    /// Extra sidecar registry files (JSON), after the target's own.
    #[arg(long = "mitigations-file", value_name = "PATH")]
    pub mitigations_files: Vec<PathBuf>,
    /// Go on past a target that cannot be compiled or built (as cargo's --keep-going, Bazel's
    /// -k): each is reported as it happens and listed at the end; the exit code is the first
    /// failing target's.
    #[arg(short = 'k', long)]
    pub keep_going: bool,
    #[command(flatten)]
    pub exec: ExecArgs,
    /// Keep running: rebuild when a recipe, registry or input file changes (only invalidated
    /// trials execute); Ctrl-C stops.
    #[arg(long, conflicts_with = "dry_run")]
    pub watch: bool,
    /// Watch mode: stop after this many rebuilds (for tests and scripts).
    #[arg(long, hide = true, value_name = "N", requires = "watch")]
    pub watch_max_rebuilds: Option<u64>,
    #[command(flatten)]
    pub verbosity: Verbosity,
    /// The command a probe recipe wraps (overrides the BUCK target's `command`).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct BundleArgs {
    /// The run directory (e.g. probe_results/QUICKSTART-1).
    #[arg(required_unless_present = "verify", value_name = "RUN_DIR")]
    pub run_dir: Option<PathBuf>,
    /// The ticket the bundle is named after (default: the run directory's name).
    #[arg(long)]
    pub ticket: Option<String>,
    /// Print the members, sizes and redaction counts, and ask before writing (default no).
    #[arg(long)]
    pub review: bool,
    /// Where to write (a directory gets `<ticket>.bundle.tar.gz` inside it).
    #[arg(long, short, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// The recipe whose `redaction` block applies (default: RUN_DIR/recipe.resolved.yaml).
    #[arg(long, value_name = "RECIPE")]
    pub redaction_from: Option<PathBuf>,
    /// Also redact private IP addresses and the host names the run's env snapshots record.
    #[arg(long)]
    pub redact_hosts: bool,
    /// Re-check a bundle's members against its manifest's blake3 digests.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["run_dir", "ticket", "review", "output", "redaction_from", "redact_hosts"])]
    pub verify: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ClassifyArgs {
    /// stdout/stderr logs (Tiers 4 and 5); `-` reads stdin. No log and no --dmesg: stdin.
    #[arg(value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// A kernel log (`dmesg`, `journalctl -k`, with or without timestamps) for Tier 3; `-`
    /// reads stdin. Repeatable.
    #[arg(long, value_name = "FILE")]
    pub dmesg: Vec<PathBuf>,
    /// A recipe (label or file) whose custom_patterns and disables apply, as in its trials.
    #[arg(long, value_name = "RECIPE", add = crate::complete::labels())]
    pub recipe: Option<String>,
    /// Extra sidecar registry files the recipe needs.
    #[arg(long = "mitigations-file", value_name = "PATH", requires = "recipe")]
    pub mitigations_files: Vec<PathBuf>,
    /// Print the findings as one JSON record.
    #[arg(long)]
    pub json: bool,
    /// An `aorta doctor --json` report (a run's doctor.json): each Xid found is linked to the
    /// doctor's verdict on the GPU at its PCI address.
    #[arg(long, value_name = "DOCTOR.JSON")]
    pub doctor: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// quick: passive checks only (vendor tools, sysfs, kernel log; about 1 s); medium: also a
    /// GEMM, pinned copies and a memory test on each GPU (aorta-workload-gpu_doctor); long:
    /// medium over 90% of free memory.
    #[arg(long, value_enum, default_value_t = DoctorLevel::Quick)]
    pub level: DoctorLevel,
    /// GPUs to check by nvidia-smi / amd-smi index, comma-separated (default: all).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub gpus: Vec<usize>,
    /// Print the report as JSON (what a sweep records as doctor.json).
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// `aorta doctor --level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DoctorLevel {
    /// Passive checks only (no kernel launch).
    Quick,
    /// Passive plus the active checks on each GPU.
    Medium,
    /// Medium, with the memory test over 90% of free memory.
    Long,
}

/// `--results-dir` is AORTA's name for where results go; the shared `--output` is hidden here
/// and may not be given with it.
#[derive(Debug, Args)]
#[command(mut_arg("output", |a| a.hide(true)))]
pub struct RunArgs {
    /// The workload (an `aorta-workload-<name>` executable).
    #[arg(long, add = crate::complete::workloads())]
    pub workload: String,
    /// Trials to run (each a fresh process of the workload).
    #[arg(long, default_value_t = 1)]
    pub trials: i64,
    /// Steps per trial (default: the workload's own).
    #[arg(long)]
    pub steps: Option<i64>,
    /// Registered environment.
    #[arg(long, default_value = "local", add = crate::complete::environments())]
    pub environment: String,
    /// Comma-separated mitigations (stacked; conflicts are errors).
    #[arg(long, default_value = "none", add = crate::complete::mitigations())]
    pub mitigations: String,
    /// Extra env vars, "K=V,K2=V2".
    #[arg(long, default_value = "")]
    pub extra_env: String,
    /// Workload config as inline JSON (e.g. '{"model":"mlp"}').
    #[arg(long, value_name = "JSON")]
    pub config: Option<String>,
    /// Collectors for the cell (comma-separated; AORTA 0.3.0's flag).
    #[arg(long, value_name = "CSV")]
    pub collect: Option<String>,
    /// AORTA 0.3.0's trial policy: auto, in_process or process. aorta runs every trial as a
    /// process of its own whatever it says (in_process is said to differ).
    #[arg(long, value_name = "POLICY", value_parser = ["auto", "in_process", "process"])]
    pub trial_isolation: Option<String>,
    /// Sidecar registry files (JSON), repeatable.
    #[arg(long = "mitigations-file", value_name = "PATH")]
    pub mitigations_files: Vec<PathBuf>,
    /// Where results go (default `results`; `--output` is the same).
    #[arg(long, value_name = "DIR", conflicts_with = "output")]
    pub results_dir: Option<PathBuf>,
    #[command(flatten)]
    pub exec: ExecArgs,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

/// Flags shared by everything that executes trials.
#[derive(Debug, Args, Clone, Default)]
pub struct ExecArgs {
    /// Trials run at once (default 1, or the number of --gpus).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// GPU ids to hand out, one per GPU trial (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub gpus: Vec<String>,
    /// Store root (default: $AORTA_STORE, else .aorta/ at the workspace root).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// Kill a trial whose whole process tree looks hung instead of waiting for its timeout.
    #[arg(long)]
    pub kill_on_hang: bool,
    /// Timeout in seconds for workload trials (probe recipes use timeout_per_trial).
    #[arg(long, value_name = "SECONDS")]
    pub trial_timeout: Option<f64>,
    /// Output directory (default probe_results / triage_results, as AORTA).
    #[arg(long, visible_alias = "output-dir", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Use this recorded environment snapshot (from `aorta env probe`) for trial keys instead
    /// of probing this machine [env: AORTA_ENV_SNAPSHOT].
    #[arg(long, value_name = "ENV.JSON")]
    pub env_snapshot: Option<PathBuf>,
    /// The Python interpreter whose PyTorch the environment probe describes (default:
    /// $VIRTUAL_ENV's, $CONDA_PREFIX's, then python3 on PATH) [env: AORTA_PYTHON].
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// Exit 1 when any cell errored (or every trial of it did) or ran no trial (AORTA 0.3's
    /// --strict); without it failing cells are results and the exit code is 0.
    #[arg(long)]
    pub strict: bool,
    /// Execute stored results again instead of reusing them: `all` of them, or only the
    /// `failed` ones (errored trials always run again); the new results replace the old.
    #[arg(long, value_name = "WHAT", value_parser = ["all", "failed"])]
    pub rerun: Option<String>,
    /// Execute this cell's stored trials again (repeatable); with `--rerun failed`, only its
    /// failed ones.
    #[arg(long, value_name = "CELL")]
    pub rerun_cell: Vec<String>,
    /// Run `aorta doctor` at this level before any trial: a node that fails is refused (exit
    /// 3, with the remedies) so no mitigation is credited or blamed for a sick GPU; the report
    /// is kept as doctor.json in the run directory and its verdict shown in env.json, matrix.md
    /// and report.html. Never part of a trial key.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub doctor: Option<DoctorLevel>,
    /// With --doctor or a recipe's `doctor:`: build on a node that fails anyway, marking the
    /// run (doctor.json, and a banner in matrix.md and report.html) instead of refusing it.
    #[arg(long)]
    pub doctor_mark: bool,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(flatten)]
    pub slurm: SlurmArgs,
}

/// The ids of [`ExecArgs::build_only_flags`].
const BUILD_ONLY: [&str; 9] = [
    "doctor",
    "doctor_mark",
    "strict",
    "output",
    "executor",
    "detach",
    "slurm_partition",
    "slurm_account",
    "slurm_max_parallel",
];

/// Hides the build-only flags from a command's help (`explain`, `trial exec`).
fn hide_build_only(a: clap::Arg) -> clap::Arg {
    if BUILD_ONLY.contains(&a.get_id().as_str()) {
        a.hide(true)
    } else {
        a
    }
}

impl ExecArgs {
    /// The flags given that only a whole build uses (its exit code, run directory, Slurm
    /// submission): `explain` and `trial exec` refuse them rather than silently ignore them.
    pub fn build_only_flags(&self) -> Vec<&'static str> {
        let s = &self.slurm;
        [
            (self.doctor.is_some(), "--doctor"),
            (self.doctor_mark, "--doctor-mark"),
            (self.strict, "--strict"),
            (self.output.is_some(), "--output"),
            (s.executor.is_some(), "--executor"),
            (s.detach, "--detach"),
            (s.slurm_partition.is_some(), "--slurm-partition"),
            (s.slurm_account.is_some(), "--slurm-account"),
            (s.slurm_max_parallel.is_some(), "--slurm-max-parallel"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect()
    }

    /// A usage error naming the build-only flags given to `command`, if any.
    pub fn refuse_build_only(&self, command: &str) -> Result<(), crate::exit::CliError> {
        let given = self.build_only_flags();
        let Some((last, rest)) = given.split_last() else {
            return Ok(());
        };
        let (flags, verb) = match rest {
            [] => (last.to_string(), "does"),
            _ => (format!("{} and {last}", rest.join(", ")), "do"),
        };
        Err(crate::exit::usage(
            format!("{flags} {verb} not apply to {command}"),
            "build-only flags change how a whole build runs or where it writes: give them to `aorta build`",
        ))
    }
}

/// `--executor slurm` and its settings; the environment (`$AORTA_EXECUTOR`,
/// `$AORTA_SLURM_*`) and the `[aorta]` section of `.buckconfig` fill what the flags leave unset
/// (docs/slurm.md).
#[derive(Debug, Args, Clone, Default)]
pub struct SlurmArgs {
    /// Where trials run: `local` (default) or `slurm` (job arrays; the store must be on the
    /// cluster's shared filesystem) [env: AORTA_EXECUTOR].
    #[arg(long, value_name = "EXECUTOR", value_parser = ["local", "slurm"])]
    pub executor: Option<String>,
    /// With --executor slurm: submit and return; the same build later collects the results.
    #[arg(long)]
    pub detach: bool,
    /// Default Slurm partition for trials whose recipe names none [env: AORTA_SLURM_PARTITION].
    #[arg(long, value_name = "NAME")]
    pub slurm_partition: Option<String>,
    /// Default Slurm account [env: AORTA_SLURM_ACCOUNT].
    #[arg(long, value_name = "NAME")]
    pub slurm_account: Option<String>,
    /// Tasks of one array running at once (`--array=…%N`) [env: AORTA_SLURM_MAX_PARALLEL].
    #[arg(long, value_name = "N")]
    pub slurm_max_parallel: Option<String>,
}

impl ExecArgs {
    /// The engine session these flags describe.
    pub fn session(&self) -> Result<aorta_engine::Session, crate::exit::CliError> {
        self.session_with_output(self.output.clone())
    }

    /// As [`ExecArgs::session`], with the run directory's parent decided by the caller.
    pub fn session_with_output(
        &self,
        output: Option<PathBuf>,
    ) -> Result<aorta_engine::Session, crate::exit::CliError> {
        let opts = aorta_engine::SessionOptions {
            store: self.store.clone(),
            env_snapshot: self.env_snapshot.clone(),
            python: self.python.clone(),
            remote: self.remote.settings(),
            jobs: self.jobs,
            gpus: self.gpus.clone(),
            kill_on_hang: self.kill_on_hang,
            trial_timeout: self.trial_timeout,
            output,
            slurm: aorta_engine::SlurmSettings {
                executor: self.slurm.executor.clone(),
                partition: self.slurm.slurm_partition.clone(),
                account: self.slurm.slurm_account.clone(),
                max_parallel: self.slurm.slurm_max_parallel.clone(),
                ..Default::default()
            },
            detach: self.slurm.detach,
            rerun: aorta_engine::Rerun {
                what: self.rerun.as_deref().map(|w| match w {
                    "failed" => aorta_engine::RerunWhat::Failed,
                    _ => aorta_engine::RerunWhat::All,
                }),
                cells: self.rerun_cell.clone(),
            },
            tracer: tracer(),
        };
        Ok(aorta_engine::Session::open(opts)?)
    }
}

/// What records a command trial's inputs: the small `aorta-trace` beside this executable when
/// it was installed with it (a fifth of aorta's size: a trial's start execs it), else this
/// executable's own `aorta __trace` (main.rs), which is wherever aorta is.
pub fn tracer() -> Option<Vec<String>> {
    let me = std::env::current_exe().ok()?;
    let small = me.with_file_name("aorta-trace");
    if small.is_file() {
        return Some(vec![small.display().to_string()]);
    }
    Some(vec![me.display().to_string(), "__trace".into()])
}

/// `--remote-cache URL` and friends: which remote tier a build reads (and writes); the
/// environment (`$AORTA_REMOTE_CACHE*`) and the `[aorta]` section of `.buckconfig` fill in
/// what the flags leave unset.
#[derive(Debug, Args, Clone, Default)]
pub struct RemoteArgs {
    /// Remote cache: file:///dir, http(s)://host/prefix (GET/PUT/HEAD), s3://bucket/prefix,
    /// gs://bucket/prefix; `off` disables one set in the environment or project config
    /// [env: AORTA_REMOTE_CACHE].
    #[arg(long, value_name = "URL")]
    pub remote_cache: Option<String>,
    /// `read` (default): use remote hits only; `readwrite`: also upload what this build executed
    /// [env: AORTA_REMOTE_CACHE_MODE].
    #[arg(long, value_name = "MODE", value_parser = ["read", "readwrite"])]
    pub remote_cache_mode: Option<String>,
    /// Namespace (salt) under the URL; change it to disown a poisoned set (default `default`)
    /// [env: AORTA_REMOTE_CACHE_NAMESPACE].
    #[arg(long, value_name = "NAME")]
    pub remote_cache_namespace: Option<String>,
    /// Per-request timeout (seconds, or e.g. 500ms; default 10); an unreachable cache is
    /// switched off after one [env: AORTA_REMOTE_CACHE_TIMEOUT].
    #[arg(long, value_name = "SECONDS")]
    pub remote_cache_timeout: Option<String>,
}

impl RemoteArgs {
    /// The flags as the engine's settings; the engine fills in the environment and config.
    pub fn settings(&self) -> aorta_engine::RemoteSettings {
        aorta_engine::RemoteSettings {
            url: self.remote_cache.clone(),
            mode: self.remote_cache_mode.clone(),
            namespace: self.remote_cache_namespace.clone(),
            timeout: self.remote_cache_timeout.clone(),
            retries: None,
            hmac_key_file: None,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum TrialCommand {
    /// Execute one trial (cell + index) and write its outputs (result.json, logs) to --out.
    Exec(TrialExecArgs),
}

/// Build-only flags (`ExecArgs::build_only_flags`) are hidden here and refused if given.
#[derive(Debug, Args)]
#[command(mut_args(hide_build_only))]
pub struct TrialExecArgs {
    /// The recipe file.
    #[arg(long, required_unless_present = "manifest")]
    pub recipe: Option<PathBuf>,
    /// Sidecar registry files, in order.
    #[arg(long = "mitigations-file", value_name = "PATH")]
    pub mitigations_files: Vec<PathBuf>,
    /// The cell's name (as in matrix.md).
    #[arg(long, required_unless_present = "manifest")]
    pub cell: Option<String>,
    /// The trial index (0-based).
    #[arg(long, required_unless_present = "manifest")]
    pub trial: Option<u32>,
    /// Where the trial's outputs go (created; Buck2 passes its declared output).
    #[arg(long, value_name = "DIR", required_unless_present = "manifest")]
    pub out: Option<PathBuf>,
    /// A Slurm array task: the trial is `$SLURM_ARRAY_TASK_ID` of this manifest (written by
    /// `--executor slurm`); the result goes to the store only.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["cell", "trial", "out", "expect_key", "recipe"])]
    pub manifest: Option<PathBuf>,
    /// Fail unless the trial's key is this one (Buck2 targets can pin it).
    #[arg(long, value_name = "KEY", value_parser = aorta_engine::Key::parse)]
    pub expect_key: Option<aorta_engine::Key>,
    /// Store, GPUs, timeouts, `--env-snapshot` (under Buck2: the snapshot the result is valid
    /// for, a declared input), `--remote-cache`: as for `aorta build`.
    #[command(flatten)]
    pub exec: ExecArgs,
    /// The command a probe recipe wraps.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// Capture a snapshot (never fails: missing parts are `partial_reasons`).
    Probe {
        /// Where to write it (default env.json).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Print the brief only; write nothing.
        #[arg(long)]
        summary: bool,
        /// Print one value (dotted path) as JSON; write nothing.
        #[arg(long, value_name = "A.B.C")]
        field: Option<String>,
        /// The Python interpreter whose PyTorch to describe (default: python3 on PATH).
        #[arg(long)]
        python: Option<PathBuf>,
        /// Re-run the interpreter part instead of using the cached one.
        #[arg(long)]
        no_cache: bool,
        /// Also `import torch` for the fields only a live torch reports (build config, SDPA,
        /// TF32/determinism flags, allocator backend); cached per install. Never changes the
        /// default key.
        #[arg(long)]
        deep: bool,
        /// How the probe was launched, recorded as `probe.invocation` (AORTA 0.3.0's flag):
        /// buck2_action when it runs as a Buck2 action, so its environment is the executor's.
        #[arg(long, value_name = "CONTEXT", value_parser = ["direct", "buck2_run", "buck2_action"], default_value = "direct")]
        execution_context: String,
        /// AORTA 0.3.0's flag: keep full per-file ROCm kernel-catalog lists. aorta's snapshot
        /// keeps none, so the snapshot is the same with or without it.
        #[arg(long)]
        extended: bool,
        /// AORTA 0.3.0's Buck cquery options (--buck-target, --buck-option, --buck-mode-file,
        /// --buck-config, --buck-modifier, --buck-default-context, --buck-timeout): refused
        /// with what to do instead.
        #[arg(long = "buck-target", hide = true, value_name = "X", num_args = 0..=1, action = clap::ArgAction::Append)]
        buck_target: Vec<String>,
        /// AORTA 0.3.0's --buck-option: refused (aorta env probe does not query Buck).
        #[arg(long = "buck-option", hide = true, value_name = "X", num_args = 0..=1, action = clap::ArgAction::Append)]
        buck_option: Vec<String>,
        /// AORTA 0.3.0's --buck-mode-file: refused (aorta env probe does not query Buck).
        #[arg(long = "buck-mode-file", hide = true, value_name = "X", num_args = 0..=1, action = clap::ArgAction::Append)]
        buck_mode_file: Vec<String>,
        /// AORTA 0.3.0's --buck-config: refused (aorta env probe does not query Buck).
        #[arg(long = "buck-config", hide = true, value_name = "X", num_args = 0..=1, action = clap::ArgAction::Append)]
        buck_config: Vec<String>,
        /// AORTA 0.3.0's --buck-modifier: refused (aorta env probe does not query Buck).
        #[arg(long = "buck-modifier", hide = true, value_name = "X", num_args = 0..=1, action = clap::ArgAction::Append)]
        buck_modifier: Vec<String>,
        /// AORTA 0.3.0's --buck-default-context: refused (aorta env probe does not query Buck).
        #[arg(long = "buck-default-context", hide = true)]
        buck_default_context: bool,
        /// AORTA 0.3.0's --buck-timeout: refused (aorta env probe does not query Buck).
        #[arg(long = "buck-timeout", hide = true, value_name = "X", num_args = 0..=1, action = clap::ArgAction::Append)]
        buck_timeout: Vec<String>,
    },
    /// Semantic diff of two snapshots; exit 1 when fields that feed the key differ.
    Diff {
        a: PathBuf,
        b: PathBuf,
        /// Only the differences that change the key.
        #[arg(long)]
        key_only: bool,
        /// The differences as JSON: both keys, and per section each changed field with whether
        /// it feeds the key.
        #[arg(long)]
        json: bool,
        /// Extra fields in the key (dotted paths, * globs).
        #[arg(long)]
        key_include: Vec<String>,
        /// Fields kept out of the key.
        #[arg(long)]
        key_exclude: Vec<String>,
    },
    /// How trial processes are contained here: a cgroup per trial (nothing escapes teardown or
    /// outlives aorta, even on kill -9), or the process tree only, and why.
    Containment,
    /// The environment key and the fields that fed it (of FILE, or of this machine).
    Key {
        file: Option<PathBuf>,
        /// Probe deep (`env probe --deep`); implied when --key-include names an import-only field.
        #[arg(long)]
        deep: bool,
        /// Extra fields in the key (dotted paths, * globs).
        #[arg(long)]
        key_include: Vec<String>,
        /// Fields kept out of the key.
        #[arg(long)]
        key_exclude: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// GPU hardware-queue evaluation (forwards to the aorta-hw-queue executable).
    #[command(name = "hw-queue", disable_help_flag = true)]
    HwQueue {
        /// Arguments for aorta-hw-queue (list, run, sweep, compare, --help).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Build-only flags (`ExecArgs::build_only_flags`) are hidden here and refused if given.
#[derive(Debug, Args)]
#[command(mut_args(hide_build_only))]
pub struct ExplainArgs {
    /// A label (`//recipes:quickstart`) or recipe file.
    #[arg(add = crate::complete::labels())]
    pub target: String,
    /// The cell to explain (with --trial: that trial).
    #[arg(long, required_unless_present = "artifact")]
    pub cell: Option<String>,
    /// The trial index (needs --cell).
    #[arg(long, requires = "cell")]
    pub trial: Option<u32>,
    /// An artifact of the run directory: matrix.json, matrix.md, recipe.resolved.yaml,
    /// environments/<name>/env.json.
    #[arg(long, value_name = "PATH", conflicts_with = "cell")]
    pub artifact: Option<String>,
    /// One JSON object on stdout: the node, its key, whether it is cached and why, its
    /// details and (a trial) the key's inputs as JSON.
    #[arg(long)]
    pub json: bool,
    /// Store, environment snapshot, Python: as for `aorta build`.
    #[command(flatten)]
    pub exec: ExecArgs,
    /// Extra sidecar registry files (JSON).
    #[arg(long = "mitigations-file", value_name = "PATH")]
    pub mitigations_files: Vec<PathBuf>,
    /// The command a probe recipe wraps (overrides the BUCK target's `command`).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Counts and sizes of blobs and action-cache entries.
    Stats {
        /// Store root (default: $AORTA_STORE, else .aorta/ at the workspace root).
        #[arg(long)]
        store: Option<PathBuf>,
        /// One JSON object on stdout (the store's path and every count, sizes in bytes).
        #[arg(long)]
        json: bool,
    },
    /// Re-hash every blob and check every entry; exit 1 if anything is wrong.
    Verify {
        /// Store root (default: $AORTA_STORE, else .aorta/ at the workspace root).
        #[arg(long)]
        store: Option<PathBuf>,
        /// Move bad entries and blobs to quarantine/ so their trials re-execute.
        #[arg(long)]
        repair: bool,
    },
    /// Remove unreferenced blobs, and entries older or beyond a budget.
    Gc {
        /// Store root (default: $AORTA_STORE, else .aorta/ at the workspace root).
        #[arg(long)]
        store: Option<PathBuf>,
        /// Drop entries not used for this many days.
        #[arg(long, value_name = "DAYS")]
        max_age_days: Option<f64>,
        /// Keep at most this many bytes (least recently used entries go first).
        #[arg(long, value_name = "BYTES")]
        max_bytes: Option<u64>,
        /// Wait for running builds instead of failing.
        #[arg(long)]
        wait: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum SweepCommand {
    /// Run a matrix from a recipe or from flags; `-- COMMAND` selects the subprocess flow.
    Run(Box<SweepRunArgs>),
    /// List registered mitigations.
    ListMitigations(ListArgs),
    /// List registered environments.
    ListEnvironments(ListArgs),
    /// Show the built-in log-pattern catalogue with samples.
    ListPatterns(ListPatternsArgs),
}

#[derive(Debug, Args, Clone, Default)]
#[command(
    after_help = "Differences from AORTA 0.2.1's `sweep run` (docs/compatibility.md has them all): \
stdout and stderr are scanned as two texts (AORTA joined them; `-- sh -c 'exec CMD 2>&1'` gives one stream), \
whole logs are scanned (AORTA: the first 10 MiB), every match of a custom pattern is tried, a silent busy loop \
is not a hang, step_time_regex is honoured, and with stop_after --dry-run prints max_trials as trials/cell."
)]
pub struct SweepRunArgs {
    /// YAML/JSON recipe.
    #[arg(long, value_name = "PATH")]
    pub recipe: Option<PathBuf>,
    /// Validate and print the plan; write nothing, run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// JSON on stdout: with --dry-run the plan; else one line with the run's counts, cells
    /// and answer.
    #[arg(long)]
    pub json: bool,
    /// Only `matrix` exists (AORTA compatibility).
    #[arg(long, value_parser = ["matrix"], default_value = "matrix")]
    pub mode: String,
    #[command(flatten)]
    pub flags: FlagModeArgs,
    /// Ticket id (subprocess flow: overrides the recipe's).
    #[arg(long)]
    pub ticket: Option<String>,
    #[command(flatten)]
    pub exec: ExecArgs,
    #[command(flatten)]
    pub subprocess: SubprocessFlowArgs,
    /// Sidecar registry files (JSON), repeatable.
    #[arg(long = "mitigations-file", value_name = "PATH")]
    pub mitigations_files: Vec<PathBuf>,
    #[command(flatten)]
    pub verbosity: Verbosity,
    /// The user command (after `--`): selects the subprocess flow.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// The workload flow's recipe as flags (flag mode), shared by `sweep run` and `triage run`.
/// `--trials`: a count, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrialsArg {
    Count(i64),
    Auto,
}

fn parse_trials(s: &str) -> Result<TrialsArg, String> {
    if s == "auto" {
        return Ok(TrialsArg::Auto);
    }
    s.parse()
        .map(TrialsArg::Count)
        .map_err(|_| format!("'{s}' is not a number of trials or 'auto'"))
}

#[derive(Debug, Args, Clone, Default)]
pub struct FlagModeArgs {
    /// Flag mode: the workload to run.
    #[arg(long, add = crate::complete::workloads())]
    pub workload: Option<String>,
    /// Flag mode: comma-separated mitigations.
    #[arg(long, value_name = "CSV", add = crate::complete::mitigations())]
    pub mitigation_axis: Option<String>,
    /// Flag mode: comma-separated environments; `image:<ref>` is an inline docker environment.
    #[arg(long, value_name = "CSV", add = crate::complete::environments())]
    pub environment_axis: Option<String>,
    /// Flag mode: trials per cell, or `auto` (run each cell until its answer is known).
    #[arg(long, allow_negative_numbers = true, value_name = "N|auto", value_parser = parse_trials)]
    pub trials: Option<TrialsArg>,
    /// Flag mode with `--trials auto`: the most trials one cell may run (default 64).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_trials_per_cell: Option<i64>,
    /// Flag mode with `--trials auto`: stop starting trials after this long (3600, 90m, 2h);
    /// undecided cells say "budget".
    #[arg(long, value_name = "DURATION")]
    pub max_walltime: Option<String>,
    /// Flag mode with `--trials auto`: stop starting trials once this many GPU-hours were used
    /// (trial wall time × its GPUs).
    #[arg(long, value_name = "HOURS", allow_negative_numbers = true)]
    pub max_gpu_hours: Option<f64>,
    /// Flag mode: steps per trial.
    #[arg(long, allow_negative_numbers = true)]
    pub steps: Option<i64>,
    /// Flag mode: the baseline cell.
    #[arg(long)]
    pub baseline_cell: Option<String>,
    /// Flag mode: confound threshold (default 1.15).
    #[arg(long, allow_negative_numbers = true)]
    pub confound_threshold: Option<f64>,
    /// Workload flow: collectors for every cell (overrides the recipe's).
    #[arg(long, value_name = "CSV")]
    pub collect: Option<String>,
}

/// The subprocess flow's overlays on a probe recipe, shared by `sweep run` and `probe`.
#[derive(Debug, Args, Clone, Default)]
pub struct SubprocessFlowArgs {
    /// Subprocess flow: inherit (default) or file.
    #[arg(long, value_parser = ["inherit", "file"])]
    pub env_passthrough_mode: Option<String>,
    /// Subprocess flow: stop a cell after K events (needs a cap).
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    pub stop_after_events: Option<i64>,
    /// Subprocess flow: hard cap on trials per cell.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_trials: Option<i64>,
    /// Subprocess flow: disable a tier (`tier3`) or detector (`tier2:hang`); repeatable.
    #[arg(long, value_name = "TIER[:ID]")]
    pub disable_detector: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Sidecar registry files (JSON), repeatable.
    #[arg(long = "mitigations-file", value_name = "PATH")]
    pub mitigations_files: Vec<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(disable_version_flag = true)]
pub struct ListPatternsArgs {
    /// Print only the pattern library version.
    #[arg(long)]
    pub version: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum RegistryListCommand {
    /// List entries as a table (or JSON).
    List {
        /// Sidecar registry files (JSON), repeatable.
        #[arg(long = "file", visible_alias = "mitigations-file", value_name = "PATH")]
        files: Vec<PathBuf>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

/// AORTA's `aorta probe` options (deprecated front door).
#[derive(Debug, Args)]
#[command(disable_version_flag = true)]
pub struct ProbeArgs {
    /// List the classifier's detectors and patterns (as `aorta classify --list-patterns`).
    #[arg(long)]
    pub list_patterns: bool,
    /// With --list-patterns: print only the pattern library version.
    #[arg(long)]
    pub version: bool,
    /// The probe recipe (YAML); without it, flag mode builds one from the flags.
    #[arg(long, value_name = "PATH")]
    pub recipe: Option<PathBuf>,
    /// Output directory (default probe_results/<ticket>).
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Ticket id (overrides the recipe's; names the output directory).
    #[arg(long)]
    pub ticket: Option<String>,
    /// Print the plan; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub subprocess: SubprocessFlowArgs,
    /// Sidecar registry files (JSON), repeatable.
    #[arg(long = "mitigations-file", value_name = "PATH")]
    pub mitigations_files: Vec<PathBuf>,
    #[command(flatten)]
    pub verbosity: Verbosity,
    #[arg(last = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum TriageCommand {
    Run(Box<TriageRunArgs>),
    ListMitigations(ListArgs),
    ListEnvironments(ListArgs),
}

/// AORTA's `aorta triage run` options (deprecated; the workload flow of `sweep run`).
#[derive(Debug, Args)]
pub struct TriageRunArgs {
    /// The triage recipe (YAML); without it, flag mode builds one from the flags.
    #[arg(long, value_name = "PATH")]
    pub recipe: Option<PathBuf>,
    /// Print the plan; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Only `matrix` exists (AORTA compatibility).
    #[arg(long, value_parser = ["matrix"], default_value = "matrix")]
    pub mode: String,
    #[command(flatten)]
    pub flags: FlagModeArgs,
    /// Ticket id (overrides the recipe's; names the output directory).
    #[arg(long)]
    pub ticket: Option<String>,
    /// Output directory (default triage_results/<ticket>/<workload>/<timestamp>).
    #[arg(long = "output-dir", visible_alias = "output")]
    pub output_dir: Option<PathBuf>,
    /// Sidecar registry files (JSON), repeatable.
    #[arg(long = "mitigations-file")]
    pub mitigations_files: Vec<PathBuf>,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// `--help` explains every option of every command (a newcomer met several bare ones).
    #[test]
    fn every_option_has_help_text() {
        fn walk(cmd: &clap::Command, path: &str, bare: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let builtin = matches!(a.get_id().as_str(), "help" | "version");
                if !builtin && !a.is_hide_set() && !a.is_positional() && a.get_help().is_none() {
                    bare.push(format!("{path} --{}", a.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), bare);
            }
        }
        let mut bare = Vec::new();
        walk(&Cli::command(), "aorta", &mut bare);
        assert!(
            bare.is_empty(),
            "options without help text:\n{}",
            bare.join("\n")
        );
    }

    /// Every flag of the executing commands and what it does to a trial's key: a new field of
    /// these structs does not compile until it is classified here (the destructuring is
    /// exhaustive), and one missing from docs/cache-keys.md's flag table fails the test.
    fn build_flags(v: Option<&BuildArgs>) -> Vec<(&'static str, &'static str)> {
        if let Some(BuildArgs {
            targets: _,
            dry_run: _,
            json: _,
            mitigations_files: _,
            keep_going: _,
            exec: _,
            watch: _,
            watch_max_rebuilds: _,
            verbosity: _,
            command: _,
        }) = v
        {}
        vec![
            ("targets", "keyed: the recipe they name"),
            ("--dry-run", "not keyed: prints the plan"),
            ("--json", "not keyed: output format"),
            ("--keep-going", "not keyed: which targets are attempted"),
            (
                "--mitigations-file",
                "keyed through env: the values it resolves",
            ),
            ("--watch", "not keyed: when builds happen"),
            ("--verbose", "not keyed: output"),
            ("--quiet", "not keyed: output"),
            (
                "-- COMMAND",
                "keyed: workload (argv, input files, traced inputs)",
            ),
        ]
    }

    fn exec_flags(v: Option<&ExecArgs>) -> Vec<(&'static str, &'static str)> {
        if let Some(ExecArgs {
            jobs: _,
            gpus: _,
            store: _,
            kill_on_hang: _,
            trial_timeout: _,
            output: _,
            env_snapshot: _,
            python: _,
            strict: _,
            rerun: _,
            rerun_cell: _,
            doctor: _,
            doctor_mark: _,
            remote:
                RemoteArgs {
                    remote_cache: _,
                    remote_cache_mode: _,
                    remote_cache_namespace: _,
                    remote_cache_timeout: _,
                },
            slurm:
                SlurmArgs {
                    executor: _,
                    detach: _,
                    slurm_partition: _,
                    slurm_account: _,
                    slurm_max_parallel: _,
                },
        }) = v
        {}
        vec![
            ("--jobs", "not keyed: how many run at once"),
            (
                "--gpus",
                "not keyed: which device ids (the model is in env_snapshot)",
            ),
            ("--store", "not keyed: where results are kept"),
            (
                "--doctor",
                "not keyed: a precondition on the node (doctor.json), never a trial input",
            ),
            (
                "--doctor-mark",
                "not keyed: whether a failing node is refused",
            ),
            ("--kill-on-hang", "keyed: execution.kill_on_hang"),
            ("--trial-timeout", "keyed: execution.workload_timeout_ms"),
            ("--output", "not keyed: where the run directory goes"),
            ("--env-snapshot", "keyed: env_snapshot"),
            ("--python", "keyed: env_snapshot (the PyTorch it describes)"),
            ("--strict", "not keyed: the exit code"),
            ("--rerun", "not keyed: forces execution"),
            ("--rerun-cell", "not keyed: forces execution"),
            ("--remote-cache", "not keyed: where results are shared"),
            ("--remote-cache-mode", "not keyed"),
            (
                "--remote-cache-namespace",
                "not keyed: a salt of the remote's paths",
            ),
            ("--remote-cache-timeout", "not keyed"),
            (
                "--executor",
                "not keyed: the result records the machine it ran on",
            ),
            ("--detach", "not keyed"),
            (
                "--slurm-partition",
                "not keyed yet: the default partition (a recipe's `partition` is keyed)",
            ),
            ("--slurm-account", "not keyed: who pays"),
            ("--slurm-max-parallel", "not keyed: how many run at once"),
        ]
    }

    #[test]
    fn every_build_flag_is_classified_in_docs_cache_keys() {
        let doc = include_str!("../../../docs/cache-keys.md");
        let missing: Vec<String> = build_flags(None)
            .into_iter()
            .chain(exec_flags(None))
            .filter(|(flag, _)| !doc.contains(&format!("`{flag}`")))
            .map(|(flag, class)| format!("{flag} ({class})"))
            .collect();
        assert!(
            missing.is_empty(),
            "docs/cache-keys.md's flag table lacks: {}",
            missing.join(", ")
        );
    }
}

/// `aorta agent`: AORTA's flags, plus the test's confidence, the trial caps and the endpoint.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Parent of the run directory `<output>/<ticket slug>`.
    #[arg(
        long,
        visible_alias = "output-dir",
        value_name = "DIR",
        default_value = "agent_results"
    )]
    pub output: PathBuf,
    /// Names the run directory and the report (default: the template's ticket).
    #[arg(long)]
    pub ticket: Option<String>,
    /// A probe recipe as template: trials (for diagnostic cells), diagnostic_axis, timeouts,
    /// step_time_regex, custom_patterns, hang settings, redaction, mitigation_axis order.
    #[arg(long, value_name = "PATH")]
    pub recipe: Option<PathBuf>,
    /// What the failure looks like (the proposer reads it).
    #[arg(long)]
    pub symptom: Option<String>,
    /// Proposer steps before stopping with policy_stop.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_iterations: u32,
    /// Stop after this many seconds (checked before each build).
    #[arg(long, value_name = "SECONDS")]
    pub max_walltime_sec: Option<f64>,
    /// Stop before a look would need more than this many trials in all (reused ones count).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_trials: Option<u64>,
    /// Confidence that a declared fix really lowers the failure rate (the whole run's).
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Most trials the baseline runs alone, waiting for its first failure.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_baseline_trials: u32,
    /// Most trials for one candidate (and the baseline beside it); at least 4, the first look.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(4..=10_000))]
    pub max_trials_per_cell: u32,
    /// `fake` (deterministic, AORTA's rules) or `openai` (an OpenAI-compatible chat endpoint;
    /// AORTA's `litellm` is accepted as its alias).
    #[arg(long, default_value = "fake", value_parser = ["fake", "openai", "litellm"])]
    pub llm_backend: String,
    /// The model name sent to the endpoint.
    #[arg(long, default_value = "gpt-4o-mini")]
    pub llm_model: String,
    /// The endpoint's API base, e.g. http://127.0.0.1:8000/v1 (vLLM, Ollama, LiteLLM); the key
    /// is read from $AORTA_LLM_API_KEY, else $OPENAI_API_KEY.
    #[arg(long, value_name = "URL")]
    pub llm_url: Option<String>,
    /// Seconds to wait for one reply.
    #[arg(long, default_value_t = 120.0, value_name = "SECONDS")]
    pub llm_timeout: f64,
    /// Candidate mitigations, in order (repeatable); default: the template's mitigation_axis,
    /// else every registered mitigation.
    #[arg(long = "mitigation", value_name = "NAME", add = crate::complete::mitigations())]
    pub mitigations: Vec<String>,
    /// Sidecar registry files that add mitigations, in order.
    #[arg(long = "mitigations-file", value_name = "PATH")]
    pub mitigations_files: Vec<PathBuf>,
    /// Pause (outcome approval_required) before trying hip_launch_blocking or hsa_disable_cache.
    #[arg(long)]
    pub require_approval: bool,
    /// Print the first look's plan; execute and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Bundle the run directory afterwards (AORTA's --bundle).
    #[arg(long)]
    pub bundle: bool,
    /// One JSON line on stdout when the search ends (instead of the outcome lines): outcome,
    /// winner, run directory, the answer and the search.
    #[arg(long)]
    pub json: bool,
    /// Print each look's counts and each candidate's verdict on stderr.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Trials run at once (default 1).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Store root (default: $AORTA_STORE, else .aorta/ at the workspace root).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// A recorded environment snapshot for trial keys [env: AORTA_ENV_SNAPSHOT].
    #[arg(long, value_name = "ENV.JSON")]
    pub env_snapshot: Option<PathBuf>,
    /// The Python whose PyTorch the environment probe describes [env: AORTA_PYTHON].
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// The command to triage.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// How much a build says while it runs and when it ends.
#[derive(clap::Args, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verbosity {
    /// Each trial's event on stderr as it lands (-v); also its key and run directory, and each
    /// Slurm poll (-vv).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only warnings and errors: no progress bar, no summary (the exit code says how it went).
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
}

/// `aorta bisect env|range`.
#[derive(Debug, Subcommand)]
pub enum BisectCommand {
    /// The minimal set of differences between GOOD and BAD (env files or `aorta env probe -o`
    /// snapshots) that makes the command fail: `aorta bisect env --good G --bad B -- COMMAND…`.
    Env(Box<BisectEnvArgs>),
    /// The first bad point of an ordered list (one point per line, exported as
    /// $AORTA_BISECT_POINT; `KEY=VALUE` assignments also set), or of commits (`--rev A..B`).
    Range(Box<BisectRangeArgs>),
}

#[derive(Debug, Args)]
pub struct BisectEnvArgs {
    /// The passing environment: an env file (KEY=VALUE lines) or a snapshot JSON.
    #[arg(long, value_name = "FILE")]
    pub good: PathBuf,
    /// The failing environment, in the same forms.
    #[arg(long, value_name = "FILE")]
    pub bad: PathBuf,
    /// The other way round: the fewest differences to revert (to GOOD's values) for BAD to pass.
    #[arg(long)]
    pub reverse: bool,
    #[command(flatten)]
    pub common: BisectCommon,
}

#[derive(Debug, Args)]
pub struct BisectRangeArgs {
    /// The ordered points, one per line (`#` comments and blank lines skipped).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "rev",
        conflicts_with = "rev"
    )]
    pub list: Option<PathBuf>,
    /// The points are A and each commit after it up to B (`git rev-list --reverse A..B` here).
    #[arg(long, value_name = "A..B")]
    pub rev: Option<String>,
    /// The command as one shell line, `{point}` standing for the point (instead of -- COMMAND).
    #[arg(long, value_name = "COMMAND")]
    pub template: Option<String>,
    #[command(flatten)]
    pub common: BisectCommon,
}

#[derive(Debug, Args)]
pub struct ReduceArgs {
    /// The stack that fixes the failure, comma-separated registry names (`aorta mitigations list`).
    #[arg(long, value_name = "A,B,…", value_delimiter = ',', required = true)]
    pub mitigations: Vec<String>,
    #[command(flatten)]
    pub common: BisectCommon,
}

/// What `bisect env`, `bisect range` and `reduce` share: the test's settings, the session's.
#[derive(Debug, Args)]
pub struct BisectCommon {
    /// Names the run directory `<output>/<ticket>` (default: the command's name).
    #[arg(long)]
    pub ticket: Option<String>,
    /// Each probe's call (fails / passes) is wrong with probability at most 1 − this.
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Most trials one configuration runs before its call is left undecided (at least 4).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(4..=10_000))]
    pub max_trials_per_probe: u32,
    /// Seconds before a trial is killed and counted as a timeout.
    #[arg(long, value_name = "SECONDS")]
    pub timeout_per_trial: Option<f64>,
    /// Sidecar registry files that add mitigations.
    #[arg(long = "mitigations-file", value_name = "PATH")]
    pub mitigations_files: Vec<PathBuf>,
    /// One JSON line on stdout: the answer, the culprit, the confidence and every probe.
    #[arg(long)]
    pub json: bool,
    /// Print each build's counts on stderr.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(flatten)]
    pub exec: ExecArgs,
    /// The command that passes under GOOD and fails under BAD.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}
