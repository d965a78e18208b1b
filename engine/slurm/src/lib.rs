//! Slurm, through its own commands (`sbatch`, `squeue`, `sacct`, `scancel`): their options and
//! parsable output are stable across releases, libslurm's ABI is not. The engine's Slurm
//! executor (`aorta-engine`'s `slurm` module) submits one job array per resource shape and
//! learns each task's state here; [`Settings`] is where the executor's knobs come from.
//!
//! squeue's and sacct's `--json` exist since 21.08, but their schema changes with the data
//! parser version (22.05's `job_state` is a string, 23.11's a list): the `|`-separated
//! `--format` output reads the same on every release this supports.

mod config;
mod state;

pub use config::{ConfigError, Executor, Settings, SlurmConfig};
pub use state::{killed_for_memory, JobState, Meaning};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A Slurm command that could not run or said no.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error("cannot run {command}: {source} (is Slurm's client installed and on PATH?)")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("{command} failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("sbatch printed no job id: {0:?}")]
    NoJobId(String),
}

impl SlurmError {
    /// Whether trying again later may succeed: the controller down, restarting, busy or
    /// over a submit limit (its words as Slurm's clients print them). A refusal of the request
    /// itself (a bad partition, an invalid array) is not.
    pub fn is_transient(&self) -> bool {
        const WORDS: [&str; 12] = [
            "Unable to contact slurm controller",
            "Socket timed out",
            "Slurm temporarily unable",
            "Zero Bytes were transmitted or received",
            "Connection refused",
            "Connection timed out",
            "Resource temporarily unavailable",
            "Communication connection failure",
            "Transport endpoint is not connected",
            "slurmctld is busy",
            "job submit limit",
            "MaxJobCount",
        ];
        match self {
            SlurmError::Failed { stderr, .. } => WORDS.iter().any(|w| stderr.contains(w)),
            SlurmError::Spawn { .. } | SlurmError::NoJobId(_) => false,
        }
    }
}

/// One job array: task `i` runs `script` with `SLURM_ARRAY_TASK_ID=i`.
#[derive(Debug, Clone, Default)]
pub struct ArrayJob {
    pub name: String,
    /// The batch script (on the shared filesystem).
    pub script: PathBuf,
    pub tasks: u32,
    /// At most this many tasks at once (`--array=0-N%P`).
    pub max_parallel: Option<u32>,
    pub gpus: u32,
    pub cpus: Option<u32>,
    pub mem: Option<String>,
    pub time_limit_secs: Option<u64>,
    pub partition: Option<String>,
    pub account: Option<String>,
    pub constraint: Option<String>,
    pub extra: Vec<String>,
    /// `--output`; `%a` is the task index.
    pub output: PathBuf,
    pub chdir: PathBuf,
}

impl ArrayJob {
    /// sbatch's arguments for this array (the script last).
    pub fn sbatch_args(&self) -> Vec<String> {
        let mut a = vec![
            "--parsable".to_owned(),
            format!("--job-name={}", self.name),
            match self.max_parallel {
                Some(p) => format!("--array=0-{}%{p}", self.tasks.saturating_sub(1)),
                None => format!("--array=0-{}", self.tasks.saturating_sub(1)),
            },
            format!("--output={}", self.output.display()),
            format!("--chdir={}", self.chdir.display()),
            "--ntasks=1".to_owned(),
        ];
        if self.gpus > 0 {
            a.push(format!("--gres=gpu:{}", self.gpus));
        }
        if let Some(c) = self.cpus {
            a.push(format!("--cpus-per-task={c}"));
        }
        if let Some(m) = &self.mem {
            a.push(format!("--mem={m}"));
        }
        if let Some(t) = self.time_limit_secs {
            a.push(format!("--time={}", slurm_time(t)));
        }
        for (flag, v) in [
            ("--partition", &self.partition),
            ("--account", &self.account),
            ("--constraint", &self.constraint),
        ] {
            if let Some(v) = v {
                a.push(format!("{flag}={v}"));
            }
        }
        a.extend(self.extra.iter().cloned());
        a.push(self.script.display().to_string());
        a
    }
}

/// Seconds as Slurm's `D-HH:MM:SS`, rounded up to whole minutes (Slurm's granularity).
pub fn slurm_time(secs: u64) -> String {
    let m = secs.div_ceil(60);
    let (d, h, m) = (m / 1440, (m / 60) % 24, m % 60);
    format!("{d}-{h:02}:{m:02}:00")
}

/// A task of an array: the array's job id and the task index.
pub type TaskId = (String, u32);

/// Where the commands are: a folder, or PATH.
#[derive(Debug, Clone, Default)]
pub struct Slurm {
    bin_dir: Option<PathBuf>,
}

impl Slurm {
    pub fn new(bin_dir: Option<PathBuf>) -> Self {
        Slurm { bin_dir }
    }

    fn command(&self, name: &str) -> Command {
        match &self.bin_dir {
            Some(d) => Command::new(d.join(name)),
            None => Command::new(name),
        }
    }

    fn run(&self, name: &str, args: &[String]) -> Result<String, SlurmError> {
        let shown = || format!("{name} {}", args.join(" "));
        let out = self
            .command(name)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|source| SlurmError::Spawn {
                command: name.to_owned(),
                source,
            })?;
        if !out.status.success() {
            return Err(SlurmError::Failed {
                command: shown(),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Submits the array; its job id.
    pub fn submit(&self, job: &ArrayJob) -> Result<String, SlurmError> {
        let out = self.run("sbatch", &job.sbatch_args())?;
        // `--parsable` prints `id` or `id;cluster`.
        let id = out.trim().split(';').next().unwrap_or("").trim().to_owned();
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(SlurmError::NoJobId(out));
        }
        Ok(id)
    }

    /// The state of every task of `jobs` that squeue still knows, then sacct for the rest
    /// (squeue forgets finished jobs after MinJobAge; sacct needs accounting, and where the
    /// cluster has none its silence is not an error: the caller decides about unknown tasks).
    pub fn states(&self, jobs: &[String]) -> Result<HashMap<TaskId, JobState>, SlurmError> {
        let mut out = HashMap::new();
        if jobs.is_empty() {
            return Ok(out);
        }
        let list = jobs.join(",");
        let squeue = self.run(
            "squeue",
            &[
                format!("--jobs={list}"),
                "--states=all".into(),
                "--array".into(),
                "--noheader".into(),
                "--format=%F|%K|%T".into(),
            ],
        );
        match squeue {
            Ok(text) => parse_rows(&text, &mut out),
            // Every id unknown (all aged out): squeue says so and exits 1.
            Err(SlurmError::Failed { stderr, .. }) if stderr.contains("Invalid job id") => {}
            Err(e) => return Err(e),
        }
        let known: std::collections::HashSet<&str> = out.keys().map(|(j, _)| j.as_str()).collect();
        let missing: Vec<&String> = jobs
            .iter()
            .filter(|j| !known.contains(j.as_str()))
            .collect();
        if !missing.is_empty() {
            let ids: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
            let sacct = self.run(
                "sacct",
                &[
                    format!("--jobs={}", ids.join(",")),
                    "--allocations".into(),
                    "--noheader".into(),
                    "--parsable2".into(),
                    "--format=JobID,State".into(),
                ],
            );
            if let Ok(text) = sacct {
                for line in text.lines() {
                    let Some((id, state)) = line.split_once('|') else {
                        continue;
                    };
                    if let Some((job, task)) = id.split_once('_') {
                        if let Ok(t) = task.parse::<u32>() {
                            out.insert((job.to_owned(), t), JobState::parse(state));
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// The ids of the jobs named `name` that the controller still knows (squeue: queued,
    /// running, or ended less than MinJobAge ago): how a submission whose id was never
    /// recorded (the submitter killed right after sbatch) is found again.
    pub fn jobs_named(&self, name: &str) -> Result<Vec<String>, SlurmError> {
        let text = self.run(
            "squeue",
            &[
                format!("--name={name}"),
                "--states=all".into(),
                "--noheader".into(),
                "--format=%F".into(),
            ],
        )?;
        let mut ids: Vec<String> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
            .map(str::to_owned)
            .collect();
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// The cluster's `MaxArraySize` (`scontrol show config`): an array's task indices must stay
    /// below it. `None` when scontrol does not say.
    pub fn max_array_size(&self) -> Result<Option<u32>, SlurmError> {
        let text = self.run("scontrol", &["show".into(), "config".into()])?;
        Ok(parse_config_value(&text, "MaxArraySize").and_then(|v| v.parse().ok()))
    }

    /// Cancels whole arrays (every task, queued or running).
    pub fn cancel(&self, jobs: &[String]) -> Result<(), SlurmError> {
        if jobs.is_empty() {
            return Ok(());
        }
        self.run("scancel", jobs).map(|_| ())
    }

    /// The folder the commands are run from, when not PATH.
    pub fn bin_dir(&self) -> Option<&Path> {
        self.bin_dir.as_deref()
    }
}

/// The value of `key` in `scontrol show config`'s `Key = value` lines.
fn parse_config_value<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// `array_job|task|STATE` rows; a job that is no array (`N/A`) is skipped.
fn parse_rows(text: &str, out: &mut HashMap<TaskId, JobState>) {
    for line in text.lines() {
        let mut f = line.trim().split('|');
        let (Some(job), Some(task), Some(state)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if let Ok(t) = task.trim().parse::<u32>() {
            out.insert((job.trim().to_owned(), t), JobState::parse(state.trim()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_rows_parse() {
        let mut out = HashMap::new();
        parse_rows("12|0|COMPLETED\n12|1|RUNNING\n13|N/A|PENDING\n", &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[&("12".to_owned(), 1)], JobState::Running);
    }

    #[test]
    fn an_unreachable_controller_is_transient_a_refusal_is_not() {
        let failed = |stderr: &str| SlurmError::Failed {
            command: "squeue".into(),
            status: "exit status: 1".into(),
            stderr: stderr.into(),
        };
        // squeue and sbatch while slurmctld is stopped, and a busy controller.
        for e in [
            "slurm_load_jobs error: Unable to contact slurm controller (connect failure)",
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
            "squeue: error: slurm_receive_msg: Socket timed out on send/recv operation",
            "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)",
        ] {
            assert!(failed(e).is_transient(), "{e}");
        }
        for e in [
            "sbatch: error: Batch job submission failed: Invalid job array specification",
            "sbatch: error: invalid partition specified: gpu",
        ] {
            assert!(!failed(e).is_transient(), "{e}");
        }
        let spawn = SlurmError::Spawn {
            command: "sbatch".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(!spawn.is_transient());
    }

    #[test]
    fn times_round_up_to_minutes() {
        assert_eq!(slurm_time(1), "0-00:01:00");
        assert_eq!(slurm_time(3600), "0-01:00:00");
        assert_eq!(slurm_time(90061), "1-01:02:00");
    }

    #[test]
    fn config_values_are_read_by_key() {
        let text = "MaxArraySize            = 1001\nMaxJobCount             = 10000\n";
        assert_eq!(parse_config_value(text, "MaxArraySize"), Some("1001"));
        assert_eq!(parse_config_value(text, "MaxJobCount"), Some("10000"));
        assert_eq!(parse_config_value(text, "MaxArray"), None);
    }

    #[test]
    fn array_flags() {
        let job = ArrayJob {
            name: "aorta".into(),
            script: "/s/job.sh".into(),
            tasks: 10,
            max_parallel: Some(4),
            gpus: 2,
            output: "/s/%a.log".into(),
            chdir: "/w".into(),
            ..ArrayJob::default()
        };
        let a = job.sbatch_args();
        assert!(a.contains(&"--array=0-9%4".to_owned()));
        assert!(a.contains(&"--gres=gpu:2".to_owned()));
        assert_eq!(a.last().map(String::as_str), Some("/s/job.sh"));
    }
}
