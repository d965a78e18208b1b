//! Running one trial into a staging directory and describing it as a [`TrialRecord`]:
//! the subprocess flow (the user's command, judged by the classifier) and the workload flow
//! (an `aorta-workload-<name>` executable speaking the workload protocol).

use crate::workloads::Workload;
use aorta_classify::{classify, collect_dmesg, failure_type, ClassifierConfig, Observation, Tier};
use aorta_exec::{CancelToken, HangConfig, Lease, ProcessOutcome, ProcessSpec, SlotRelease};
use aorta_recipe::PassthroughMode;
use aorta_trial::{
    ExitStatus, FailureDetail, Metric, SmallMap, TrialRecord, Verdict, WorkloadResult,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What every trial of a cell shares.
pub struct TrialSpec {
    pub key: aorta_store::Key,
    pub cell: String,
    pub index: u32,
    pub env: BTreeMap<String, String>,
    /// A sanitizer cell's tool: the command runs under it (docs/diagnostics.md).
    pub sanitizer: Option<aorta_registry::Sanitizer>,
    pub body: Body,
}

pub enum Body {
    Command(Arc<CommandSettings>),
    Workload(Arc<WorkloadSettings>),
}

pub struct CommandSettings {
    pub argv: Vec<String>,
    pub timeout: Option<Duration>,
    pub passthrough: PassthroughMode,
    pub hang: Option<HangConfig>,
    pub classifier: ClassifierConfig,
    /// Set once `dmesg` proved unusable here, so it is not spawned again for every trial.
    pub dmesg_unavailable: AtomicBool,
    /// `/dev/kmsg` read in place of `dmesg` when it could be opened.
    pub kernel_log: Option<aorta_classify::KernelLog>,
    /// The recipe's `step_time_regex`: per-step times read from the trial's logs.
    pub step_time_regex: Option<fancy_regex::Regex>,
    /// The command's input files and the digests the trial keys hashed (see
    /// [`CommandSettings::changed_input`]).
    pub inputs: Vec<(std::path::PathBuf, String)>,
    /// The directory the command runs in (aorta's own, read once per build): where a relative
    /// `core_pattern` leaves a core file.
    pub work_dir: Option<std::path::PathBuf>,
    /// Whether the command runs under the input tracer (docs/cache-keys.md, "Traced inputs").
    pub tracing: Tracing,
    /// The recipe's kernel profilers (`collect: [ncu]`, docs/diagnostics.md).
    pub profilers: Vec<crate::profilers::Profiler>,
}

/// How a command trial's inputs are recorded.
#[derive(Debug, Clone)]
pub enum Tracing {
    /// Under `TRACER… --out FILE -- COMMAND` (`aorta-trace`, or `aorta __trace`).
    On(Vec<String>),
    /// Untraced, and why (said in the record, and when such a result is reused).
    Off(String),
}

impl CommandSettings {
    /// An input file whose content is no longer what the trial keys hashed (edited, removed),
    /// checked after each trial as Bazel re-checks an action's inputs: the trial may have run
    /// the new content, so its result must not be stored under the old key.
    pub fn changed_input(&self) -> Option<&Path> {
        self.inputs
            .iter()
            .find(|(p, digest)| aorta_graph::hash_file(p).ok().as_ref() != Some(digest))
            .map(|(p, _)| p.as_path())
    }
}

pub struct WorkloadSettings {
    /// The cell's kernel profilers (`collect: [ncu]` wraps the workload executable).
    pub profilers: Vec<crate::profilers::Profiler>,
    pub workload: Workload,
    pub steps: u32,
    pub config: serde_json::Map<String, serde_json::Value>,
    pub timeout: Option<Duration>,
}

/// The workload protocol's `config.json` (docs/workload-protocol.md): what one trial asks of
/// the workload executable.
#[derive(serde::Serialize)]
struct Invocation<'a> {
    protocol: u32,
    workload: &'a str,
    cell: &'a str,
    trial_index: u32,
    steps: u32,
    /// The recipe's `workload_config`, as the user wrote it.
    config: &'a serde_json::Map<String, serde_json::Value>,
    trial_dir: &'a Path,
}

pub enum TrialRun {
    Done(Box<TrialRecord>),
    Cancelled,
}

fn base_record(spec: &TrialSpec, workload: &str, argv: Option<Vec<String>>) -> TrialRecord {
    TrialRecord::unjudged(
        spec.key.to_string(),
        spec.cell.clone(),
        spec.index,
        workload.into(),
        argv,
        spec.env.clone().into(),
    )
}

/// A trial whose process [`PreparedTrial::start`] started (or that ended before it could start): what
/// [`StartedTrial::finish`] needs to wait for it and judge it. Owns everything, so the start
/// and the finish may run on different threads.
pub enum StartedTrial {
    /// Over before a process ran (a probe.env or config.json that could not be written, a
    /// workload that could not be started): its record.
    Done(Box<TrialRecord>),
    Command(Box<CommandStarted>),
    Workload(Box<WorkloadStarted>),
}

/// A trial made ready before it has a slot ([`prepare_trial`]): its files written (probe.env,
/// config.json), its log files open, its program found and its environment built.
pub enum PreparedTrial {
    /// Over before a process could run (a probe.env or config.json that could not be
    /// written, a command that cannot be set up): its record.
    Done(Box<TrialRecord>),
    Command(Box<CommandPrepared>),
    Workload(Box<WorkloadPrepared>),
}

/// Prepares the trial's process in `dir`: all of a start that does not need the slot, done by
/// the scheduler while every slot is busy.
pub fn prepare_trial(spec: &TrialSpec, dir: &Path) -> PreparedTrial {
    match &spec.body {
        Body::Command(c) => prepare_command(spec, c, dir),
        Body::Workload(w) => prepare_workload(spec, w, dir),
    }
}

impl PreparedTrial {
    /// Starts the prepared process under `lease`: what needs the lease (the devices' first
    /// GPU reading, the kernel log's mark) and the spawn itself.
    pub fn start(self, spec: &TrialSpec, lease: Lease, cancel: &CancelToken) -> StartedTrial {
        match (self, &spec.body) {
            (PreparedTrial::Done(record), _) => StartedTrial::Done(record),
            (PreparedTrial::Command(p), Body::Command(c)) => p.start(c, lease, cancel),
            (PreparedTrial::Workload(p), Body::Workload(_)) => p.start(lease, cancel),
            (PreparedTrial::Command(_) | PreparedTrial::Workload(_), _) => {
                unreachable!("prepared from this spec's own body")
            }
        }
    }
}

impl StartedTrial {
    /// Waits for the process and judges the trial. The slot goes back through `release` as
    /// soon as what must be read while the devices are still the trial's (the GPU snapshot
    /// after exit, the kernel log) has been read: the logs are classified while the next trial
    /// runs.
    pub fn finish(
        self,
        spec: &TrialSpec,
        dir: &Path,
        release: &mut SlotRelease,
        cancel: &CancelToken,
    ) -> TrialRun {
        match (self, &spec.body) {
            (StartedTrial::Done(record), _) => TrialRun::Done(record),
            (StartedTrial::Command(s), Body::Command(c)) => s.finish(c, dir, release, cancel),
            (StartedTrial::Workload(s), Body::Workload(_)) => s.finish(release, cancel),
            (StartedTrial::Command(_) | StartedTrial::Workload(_), _) => {
                unreachable!("started from this spec's own body")
            }
        }
    }
}

/// AORTA's `probe.env`: sorted `K=V` lines, 0600, values literal (Docker's `--env-file` format,
/// what wrappers feed it to); refused if a key or value would break the format. Sourcing it in
/// a shell would run a value like `$(cmd)`, so `probe.env.sh` beside it holds the same variables
/// as single-quoted `export` lines for scripts that source (`AORTA_ENV_SH`).
/// Why `probe.env` was not written: the trial's error (AORTA's env-file validation failure).
#[derive(Debug, thiserror::Error)]
enum EnvFileError {
    #[error(
        "cannot write {0} to probe.env: keys must not contain newlines or '=', values no newlines"
    )]
    Unwritable(String),
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn write_env_file(path: &Path, env: &BTreeMap<String, String>) -> Result<(), EnvFileError> {
    for (k, v) in env {
        if k.contains(['\n', '\r', '=']) || v.contains(['\n', '\r']) {
            return Err(EnvFileError::Unwritable(k.clone()));
        }
    }
    let text: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let sh: String = env
        .iter()
        .map(|(k, v)| format!("export {k}='{}'\n", v.replace('\'', "'\\''")))
        .collect();
    for (p, body) in [
        (path.to_path_buf(), text),
        (path.with_extension("env.sh"), sh),
    ] {
        let io = |source| EnvFileError::Io {
            path: p.clone(),
            source,
        };
        crate::dirs::write_atomic(&p, body.as_bytes()).map_err(io)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        }
    }
    Ok(())
}

fn prepare_command(spec: &TrialSpec, c: &CommandSettings, dir: &Path) -> PreparedTrial {
    let mut record = base_record(spec, "_subprocess", Some(c.argv.clone()));
    record.env_passthrough_mode = Some(c.passthrough);
    let mut env = spec.env.clone();
    if c.passthrough == PassthroughMode::File {
        let path = dir.join("probe.env");
        if let Err(e) = write_env_file(&path, &spec.env) {
            // As AORTA: the message in stderr.log and the record, no stdout.log, no process.
            let _ = std::fs::write(dir.join("stderr.log"), format!("aorta: {e}\n"));
            let ftype = aorta_classify::ENV_FILE_VALIDATION_FAILED;
            record.exit_code = 2;
            record.verdict = Verdict::Error;
            record.error_detectors_fired =
                vec![aorta_classify::ENV_FILE_VALIDATION_DETECTOR.to_string()];
            record.failure_type = Some(ftype.into());
            record.result = WorkloadResult {
                failure_count: 1,
                failure_details: vec![FailureDetail {
                    error: Some(e.to_string()),
                    ..FailureDetail::of_kind(ftype)
                }],
                main_work_started: Some(false),
                executed_iterations: Some(0),
                configured_iterations: Some(1),
                ..Default::default()
            };
            record.error_message = Some(e.to_string());
            return PreparedTrial::Done(Box::new(record));
        }
        env.insert("AORTA_ENV_FILE".into(), path.display().to_string());
        env.insert(
            "AORTA_ENV_SH".into(),
            path.with_extension("env.sh").display().to_string(),
        );
    }
    let mut p = ProcessSpec::new(
        c.argv.clone(),
        dir.join("stdout.log"),
        dir.join("stderr.log"),
    );
    p.env = env;
    p.timeout = c.timeout;
    p.hang = c.hang.clone();
    if let Some(tool) = spec.sanitizer {
        match crate::sanitize::wrap(tool, &mut p, dir) {
            Ok(report) => record.sanitizer = Some(report),
            Err(reason) => {
                return PreparedTrial::Done(Box::new(crate::sanitize::unavailable(
                    record, dir, reason,
                )))
            }
        }
    }
    record.profiles =
        crate::profilers::prepare(&c.profilers, &mut p, dir, spec.sanitizer.is_some());
    if let Tracing::On(tracer) = &c.tracing {
        // The program as the spawn would find it; when it is found nowhere, the spawn reports
        // that as it always has (an error verdict), untraced.
        // A path with a `/` comes back unchecked: one that cannot be executed is left to the
        // spawn too, so it stays an exec failure (error) rather than the tracer's exit 127.
        match aorta_exec::resolve_program(&p)
            .ok()
            .filter(|p| aorta_exec::is_executable_file(p))
        {
            Some(program) => {
                let mut wrapped = tracer.clone();
                wrapped.extend([
                    "--out".into(),
                    dir.join(crate::traced::TRACE_FILE).display().to_string(),
                    "--".into(),
                    program.display().to_string(),
                ]);
                wrapped.extend(p.argv[1..].iter().cloned());
                p.argv = wrapped;
            }
            None => {
                record.inputs = Some(crate::traced::untraced(
                    "the program was not found, so nothing ran to trace".into(),
                ))
            }
        }
    }
    let process = aorta_exec::prepare(p).map_err(|e| {
        let _ = std::fs::write(
            dir.join("stderr.log"),
            format!("aorta: cannot start the command: {e}\n"),
        );
        e
    });
    PreparedTrial::Command(Box::new(CommandPrepared { record, process }))
}

/// A command trial prepared and waiting for its slot.
pub struct CommandPrepared {
    record: TrialRecord,
    /// The process, or why it could not be set up.
    process: Result<aorta_exec::Prepared, aorta_exec::SpawnError>,
}

impl CommandPrepared {
    fn start(self, c: &CommandSettings, lease: Lease, cancel: &CancelToken) -> StartedTrial {
        let CommandPrepared {
            record,
            mut process,
        } = self;
        let devices: Vec<String> = lease.gpus().to_vec();
        let tier3_off = c.classifier.disables.tier_disabled(Tier::Tier3);
        let gpu_tier3 = !tier3_off && crate::execute::gpu_readings::available();
        if let Ok(p) = process.as_mut() {
            p.apply_lease(&lease);
            if let Some(h) = p.hang_mut() {
                // The hang monitor's GPU vote: every device the trial may touch under 5% busy;
                // no vote without a metrics source. Asked only once the monitor samples (a
                // trial past the grace period), so a short trial never loads NVML for it.
                let devs = devices.clone();
                h.gpu_idle = Some(std::sync::Arc::new(move || {
                    crate::execute::gpu_readings::utilisation(&devs).map(|u| u < 5)
                }));
            }
        }
        let throttle = !c
            .classifier
            .disables
            .detector_disabled("tier3:thermal_throttle");
        let gpu_pre = if gpu_tier3 {
            crate::execute::gpu_readings::snapshot_before(&devices, throttle)
        } else {
            None
        };
        let kernel_mark = c.kernel_log.as_ref().map(|k| k.mark());
        // Cores in the working directory count from here (2 s early: coarse file timestamps).
        let started_at = std::time::SystemTime::now() - Duration::from_secs(2);
        // The peak reading belongs to Tier 3's probes: with the tier off, as in AORTA, none is
        // taken (and NVML, about 30 ms to load on an H200, is never loaded for a build).
        let sampler = if tier3_off {
            None
        } else {
            crate::execute::gpu_readings::PeakSampler::start(&devices)
        };
        let process = process.map(|p| p.start(cancel));
        StartedTrial::Command(Box::new(CommandStarted {
            record,
            process,
            devices,
            tier3_off,
            gpu_tier3,
            throttle,
            gpu_pre,
            kernel_mark,
            started_at,
            sampler,
        }))
    }
}

/// A command trial between its spawn and its judgement.
pub struct CommandStarted {
    record: TrialRecord,
    /// The process, or why it could not be started.
    process: Result<aorta_exec::Started, aorta_exec::SpawnError>,
    devices: Vec<String>,
    tier3_off: bool,
    gpu_tier3: bool,
    throttle: bool,
    gpu_pre: Option<aorta_classify::GpuSnapshot>,
    kernel_mark: Option<aorta_classify::KernelLogMark>,
    started_at: std::time::SystemTime,
    sampler: Option<crate::execute::gpu_readings::PeakSampler>,
}

impl CommandStarted {
    fn finish(
        self,
        c: &CommandSettings,
        dir: &Path,
        release: &mut SlotRelease,
        cancel: &CancelToken,
    ) -> TrialRun {
        let CommandStarted {
            record,
            process,
            devices,
            tier3_off,
            gpu_tier3,
            throttle,
            gpu_pre,
            kernel_mark,
            started_at,
            sampler,
        } = self;
        let outcome = match process {
            Ok(started) => started.wait(cancel),
            Err(reason) => not_launched(reason.to_string()),
        };
        let sampled_peak = sampler.and_then(crate::execute::gpu_readings::PeakSampler::finish);
        if outcome.cancelled {
            return TrialRun::Cancelled;
        }
        let gpu_post = if gpu_tier3 && outcome.launched {
            crate::execute::gpu_readings::snapshot(&devices, throttle)
        } else {
            None
        };
        // The highest device-level reading: before spawn, every 100 ms while it ran (1 s with
        // amd-smi), after exit. AORTA took only the first and the last, which miss what a trial
        // frees before it ends. Device-level, so other processes on the device count too.
        let peak_vram_mib = [gpu_pre, gpu_post]
            .iter()
            .flatten()
            .filter_map(|s| s.vram_used_mib)
            .chain(sampled_peak)
            .max();
        let dmesg_text = if let (Some(log), Some(mark), true) =
            (&c.kernel_log, kernel_mark, outcome.launched && !tier3_off)
        {
            Some(log.since(mark))
        } else if outcome.launched && !tier3_off && !c.dmesg_unavailable.load(Ordering::Relaxed) {
            match collect_dmesg(outcome.walltime.as_secs() + 5) {
                Ok(t) => Some(t),
                Err(reason) => {
                    if !c.dmesg_unavailable.swap(true, Ordering::Relaxed) {
                        eprintln!("aorta: tier3 disabled (dmesg): {reason}");
                    }
                    None
                }
            }
        } else {
            None
        };
        release.release();
        let walltime = outcome.walltime.as_secs_f64();
        let obs = Observation {
            exit_code: outcome.exit_code,
            timed_out: outcome.timed_out,
            exec_failed: !outcome.launched,
            walltime_sec: walltime,
            stdout_log: Some(dir.join("stdout.log")),
            stderr_log: Some(dir.join("stderr.log")),
            trial_dir: dir.to_path_buf(),
            core_dirs: c.work_dir.iter().cloned().collect(),
            started_at: Some(started_at),
            hang_detected: outcome.hang_detected,
            killed_on_hang: outcome.killed_on_hang,
            dmesg_text,
            peak_vram_mib,
            gpu_pre,
            gpu_post,
            ..Default::default()
        };
        TrialRun::Done(Box::new(judge_command(record, c, dir, &outcome, &obs)))
    }
}

/// The subprocess flow's judgement of how its command ended: the classifier's verdict and
/// detectors, AORTA's `failure_details`. Also what a trial the scheduler killed gets
/// ([`killed_by_scheduler`]), so a Slurm TIMEOUT reads as a local timeout does.
fn judge_command(
    mut record: TrialRecord,
    c: &CommandSettings,
    dir: &Path,
    outcome: &ProcessOutcome,
    obs: &Observation,
) -> TrialRecord {
    let mut cls = classify(obs, &c.classifier);
    let sanitizer_hint = crate::sanitize::judge(&mut record, &mut cls, dir, outcome.launched);
    crate::profilers::collect(&mut record.profiles, dir);
    let ftype = failure_type(
        &cls,
        outcome.exit_code,
        outcome.timed_out,
        !outcome.launched,
    );
    record.verdict = cls.verdict;
    record.exit_code = outcome.exit_code;
    record.timed_out = outcome.timed_out;
    record.walltime_sec = obs.walltime_sec;
    record.peak_vram_mib = obs.peak_vram_mib;
    record.exit_status = match (outcome.launched, cls.verdict) {
        (false, _) => ExitStatus::InfrastructureFailed,
        (true, Verdict::Pass) => ExitStatus::Ok,
        (true, _) => ExitStatus::WorkloadFailed,
    };
    let passed = cls.verdict == Verdict::Pass;
    let mut metrics = SmallMap::default();
    metrics.insert("verdict".into(), cls.verdict.as_str().into());
    metrics.insert("exit_code".into(), i64::from(outcome.exit_code).into());
    if let Some(rss) = outcome.peak_rss_kib {
        metrics.insert("peak_rss_kib".into(), Metric::Int(rss as i64));
    }
    let step_times_ms = match &c.step_time_regex {
        Some(re) => {
            crate::step_times::from_logs(re, &[&dir.join("stdout.log"), &dir.join("stderr.log")])
        }
        None => Vec::new(),
    };
    if c.step_time_regex.is_some() {
        metrics.insert(
            "step_time_samples".into(),
            Metric::Int(step_times_ms.len() as i64),
        );
    }
    record.result = WorkloadResult {
        passed,
        failure_count: u64::from(!passed),
        step_times_ms,
        failure_details: if passed {
            Vec::new()
        } else {
            let mut detail = FailureDetail {
                kind: ftype.map(str::to_owned),
                exit_code: Some(outcome.exit_code),
                timed_out: Some(outcome.timed_out),
                failure_detectors_fired: Some(cls.failure_detectors_fired.clone()),
                ..Default::default()
            };
            if let Some(h) = outcome.hang.as_ref().filter(|_| {
                cls.failure_detectors_fired
                    .iter()
                    .any(|d| d == "tier2:hang")
            }) {
                // matrix.md's "Failure hints" quote it: what showed the hang, and where its
                // stacks are kept.
                let kept = if h.stacks.is_some() {
                    format!("; stacks in {}", aorta_exec::HANG_STACKS_FILE)
                } else {
                    String::new()
                };
                detail.hint = Some(format!(
                    "hang ({}), latched {:.0} s after the trial went quiet{kept}",
                    h.evidence,
                    h.latched_after.saturating_sub(h.quiet_since).as_secs_f64()
                ));
            }
            if detail.hint.is_none() {
                detail.hint = sanitizer_hint;
            }
            vec![detail]
        },
        elapsed_sec: obs.walltime_sec,
        main_work_started: Some(outcome.launched),
        executed_iterations: Some(u64::from(outcome.launched)),
        configured_iterations: Some(1),
        metrics,
        ..Default::default()
    };
    record.failure_detectors_fired = cls.failure_detectors_fired;
    record.error_detectors_fired = cls.error_detectors_fired;
    record.warn_detectors_fired = cls.warn_detectors_fired;
    record.capture = cls.capture;
    record.tier_durations_ms = cls.tier_durations_ms.into();
    record
}

fn prepare_workload(spec: &TrialSpec, w: &WorkloadSettings, dir: &Path) -> PreparedTrial {
    let mut record = base_record(spec, &w.workload.name, None);
    let invocation = Invocation {
        protocol: 1,
        workload: &w.workload.name,
        cell: &spec.cell,
        trial_index: spec.index,
        steps: w.steps,
        config: &w.config,
        trial_dir: dir,
    };
    let cfg_path = dir.join("config.json");
    let res_path = dir.join("workload-result.json");
    let written = serde_json::to_vec_pretty(&invocation)
        .map_err(std::io::Error::other)
        .and_then(|bytes| std::fs::write(&cfg_path, bytes));
    if let Err(e) = written {
        record.capture.error_message = Some(format!("cannot write {}: {e}", cfg_path.display()));
        return PreparedTrial::Done(Box::new(record));
    }
    let argv = vec![
        w.workload.path.display().to_string(),
        "run".into(),
        "--config".into(),
        cfg_path.display().to_string(),
        "--result".into(),
        res_path.display().to_string(),
    ];
    let mut p = ProcessSpec::new(argv, dir.join("stdout.log"), dir.join("stderr.log"));
    p.env = spec.env.clone();
    if let Some(lib) = &w.workload.library_path {
        // A cell's own LD_LIBRARY_PATH comes after libtorch's folder, not instead of it.
        let v = crate::workloads::with_library_path(
            lib,
            p.env.get("LD_LIBRARY_PATH").map(String::as_str),
        );
        p.env.insert("LD_LIBRARY_PATH".into(), v);
    }
    p.cwd = Some(dir.to_path_buf());
    p.timeout = w.timeout;
    record.profiles = crate::profilers::prepare(&w.profilers, &mut p, dir, false);
    match aorta_exec::prepare(p) {
        Ok(process) => PreparedTrial::Workload(Box::new(WorkloadPrepared {
            record,
            process,
            res_path,
        })),
        Err(e) => {
            record.capture.error_message = Some(format!("cannot start the workload: {e}"));
            PreparedTrial::Done(Box::new(record))
        }
    }
}

/// A workload trial prepared and waiting for its slot.
pub struct WorkloadPrepared {
    record: TrialRecord,
    process: aorta_exec::Prepared,
    res_path: std::path::PathBuf,
}

impl WorkloadPrepared {
    fn start(self, lease: Lease, cancel: &CancelToken) -> StartedTrial {
        let WorkloadPrepared {
            record,
            mut process,
            res_path,
        } = self;
        process.apply_lease(&lease);
        StartedTrial::Workload(Box::new(WorkloadStarted {
            record,
            process: process.start(cancel),
            res_path,
        }))
    }
}

/// A workload trial between its spawn and its judgement.
pub struct WorkloadStarted {
    record: TrialRecord,
    process: aorta_exec::Started,
    res_path: std::path::PathBuf,
}

impl WorkloadStarted {
    fn finish(self, release: &mut SlotRelease, cancel: &CancelToken) -> TrialRun {
        let outcome = self.process.wait(cancel);
        release.release();
        if outcome.cancelled {
            return TrialRun::Cancelled;
        }
        TrialRun::Done(Box::new(workload_record(
            self.record,
            &self.res_path,
            &outcome,
        )))
    }
}

/// The workload flow's record of how its process ended (and what it wrote to `res_path`).
fn workload_record(
    mut record: TrialRecord,
    res_path: &Path,
    outcome: &ProcessOutcome,
) -> TrialRecord {
    record.exit_code = outcome.exit_code;
    record.timed_out = outcome.timed_out;
    record.walltime_sec = outcome.walltime.as_secs_f64();
    let parsed: Option<WorkloadResult> = std::fs::read(res_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let (status, verdict, result) = judge_workload(outcome, parsed);
    record.exit_status = status;
    record.verdict = verdict;
    if outcome.timed_out {
        record.error_detectors_fired.push("tier1:timeout".into());
    }
    record.result = result;
    if let Some(dir) = res_path.parent() {
        crate::profilers::collect(&mut record.profiles, dir);
    }
    if record.verdict != Verdict::Pass {
        if let Some(dir) = res_path.parent() {
            classify_workload_logs(&mut record, dir, outcome);
        }
    }
    record
}

/// A workload trial that did not pass is classified as a command trial is (its verdict stays
/// the workload's own): the detectors its logs fire name the failure in matrix.md and
/// report.html (a HIP illegal-memory-access line, not just "exited 1"). The pattern library's
/// version is in workload trial keys.
fn classify_workload_logs(record: &mut TrialRecord, dir: &Path, outcome: &ProcessOutcome) {
    let obs = Observation {
        exit_code: outcome.exit_code,
        timed_out: outcome.timed_out,
        walltime_sec: outcome.walltime.as_secs_f64(),
        stdout_log: Some(dir.join("stdout.log")),
        stderr_log: Some(dir.join("stderr.log")),
        trial_dir: dir.to_path_buf(),
        ..Default::default()
    };
    let cls = classify(&obs, &ClassifierConfig::default());
    if record.failure_type.is_none() {
        let ftype = failure_type(
            &cls,
            outcome.exit_code,
            outcome.timed_out,
            !outcome.launched,
        );
        record.failure_type = ftype.map(str::to_string);
    }
    for d in cls.failure_detectors_fired {
        if !record.failure_detectors_fired.contains(&d) {
            record.failure_detectors_fired.push(d);
        }
    }
}

/// Why a batch scheduler killed a trial's task: its own limit, so a result for triage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulerKill {
    /// The time limit: recorded as a local `--trial-timeout` is (`timed_out`, exit -1).
    TimeLimit,
    /// The memory limit: recorded as the kernel's OOM killer's SIGKILL is (exit -9).
    MemoryLimit,
}

/// The record of a trial whose task the scheduler killed before aorta could write one (Slurm's
/// TIMEOUT, OUT_OF_MEMORY): the same judgement as a local timeout or OOM kill, over whatever
/// the task left in `dir` (its scheduler log, passed as `log`). `state` is the scheduler's word
/// for it, kept in `capture.scheduler_state`.
pub fn killed_by_scheduler(
    spec: &TrialSpec,
    dir: &Path,
    kill: SchedulerKill,
    walltime: Duration,
    log: Option<&Path>,
    state: &str,
) -> TrialRecord {
    let outcome = ProcessOutcome {
        launched: true,
        exit_code: match kill {
            SchedulerKill::TimeLimit => aorta_exec::EXIT_TIMEOUT,
            SchedulerKill::MemoryLimit => -9,
        },
        timed_out: kill == SchedulerKill::TimeLimit,
        walltime,
        ..ProcessOutcome::not_launched(0)
    };
    let mut record = match &spec.body {
        Body::Command(c) => {
            let mut record = base_record(spec, "_subprocess", Some(c.argv.clone()));
            record.env_passthrough_mode = Some(c.passthrough);
            let obs = Observation {
                exit_code: outcome.exit_code,
                timed_out: outcome.timed_out,
                walltime_sec: walltime.as_secs_f64(),
                stdout_log: None,
                stderr_log: log.map(Path::to_path_buf),
                trial_dir: dir.to_path_buf(),
                ..Default::default()
            };
            judge_command(record, c, dir, &outcome, &obs)
        }
        Body::Workload(w) => {
            let record = base_record(spec, &w.workload.name, None);
            workload_record(record, &dir.join("workload-result.json"), &outcome)
        }
    };
    record.capture.scheduler_state = Some(state.into());
    record
}

fn not_launched(reason: String) -> ProcessOutcome {
    ProcessOutcome {
        exec_error: Some(reason),
        ..ProcessOutcome::not_launched(1)
    }
}

/// The workload protocol's judgement table (docs/workload-protocol.md).
fn judge_workload(
    outcome: &ProcessOutcome,
    parsed: Option<WorkloadResult>,
) -> (ExitStatus, Verdict, WorkloadResult) {
    if !outcome.launched {
        let r = WorkloadResult {
            main_work_started: Some(false),
            failure_details: vec![FailureDetail {
                error: outcome.exec_error.clone(),
                ..FailureDetail::of_kind("exec_failed")
            }],
            ..Default::default()
        };
        return (ExitStatus::InfrastructureFailed, Verdict::Error, r);
    }
    if outcome.timed_out {
        let mut r = parsed.unwrap_or_default();
        r.passed = false;
        r.failure_details.push(FailureDetail::of_kind("timeout"));
        return (ExitStatus::InfrastructureFailed, Verdict::Error, r);
    }
    match parsed {
        Some(r) if r.main_work_started == Some(false) => {
            (ExitStatus::WorkloadSetupFailed, Verdict::Error, r)
        }
        Some(r) if outcome.exit_code == 0 && r.passed => (ExitStatus::Ok, Verdict::Pass, r),
        Some(mut r) => {
            if outcome.exit_code != 0 {
                r.passed = false;
                r.failure_details.push(FailureDetail {
                    exit_code: Some(outcome.exit_code),
                    ..FailureDetail::of_kind("nonzero_exit")
                });
            }
            (ExitStatus::WorkloadFailed, Verdict::Fail, r)
        }
        // Died without a result: a crash of the workload is the symptom being triaged.
        None => {
            let r = WorkloadResult {
                main_work_started: Some(true),
                failure_count: 1,
                failure_details: vec![FailureDetail {
                    exit_code: Some(outcome.exit_code),
                    ..FailureDetail::of_kind(if outcome.exit_code < 0 {
                        "crashed"
                    } else {
                        "no_result"
                    })
                }],
                ..Default::default()
            };
            (ExitStatus::WorkloadFailed, Verdict::Fail, r)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_env_is_literal_and_its_shell_twin_runs_nothing_when_sourced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.env");
        let pwned = dir.path().join("pwned");
        let env: BTreeMap<String, String> = [
            ("A".to_string(), format!("$(touch {})", pwned.display())),
            ("B".to_string(), "it's `x` \\ \"q\"".to_string()),
        ]
        .into();
        write_env_file(&path, &env).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            format!("A=$(touch {})\nB=it's `x` \\ \"q\"\n", pwned.display()),
            "Docker's --env-file format, as AORTA wrote it"
        );
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                ". {}; printf '%s\\n%s' \"$A\" \"$B\"",
                path.with_extension("env.sh").display()
            ))
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            format!("{}\n{}", env["A"], env["B"])
        );
        assert!(!pwned.exists(), "sourcing ran a value");
    }
}
