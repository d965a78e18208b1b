//! The executor's settings, from (highest first) flags, the environment (`AORTA_EXECUTOR`,
//! `AORTA_SLURM_*`) and the `[aorta]` section of the workspace's `.buckconfig`, like the
//! remote cache's (docs/slurm.md).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where trials run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Executor {
    /// Child processes of this aorta.
    #[default]
    Local,
    /// Job arrays on a Slurm cluster.
    Slurm,
}

/// A bad setting: what is wrong and how to fix it (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    pub message: String,
    pub help: String,
}

fn bad(message: String, help: &str) -> ConfigError {
    ConfigError {
        message,
        help: help.to_owned(),
    }
}

/// The settings as given, each unset one filled from lower down by [`Settings::or`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub executor: Option<String>,
    pub partition: Option<String>,
    pub account: Option<String>,
    /// Tasks of one array running at once (`--array=…%N`).
    pub max_parallel: Option<String>,
    /// Resubmissions of a trial whose task the cluster took away (node failure, preemption).
    pub retries: Option<String>,
    /// Seconds between polls of the store and squeue.
    pub poll_interval: Option<String>,
    /// The longest wait, in seconds, between tries while the controller does not answer.
    pub max_backoff: Option<String>,
    /// Extra sbatch flags for every array, whitespace-separated.
    pub sbatch_args: Option<String>,
    /// The aorta executable the tasks run (default: this one; it must be on the shared
    /// filesystem or at the same path on every node).
    pub aorta: Option<String>,
    /// Where sbatch, squeue, sacct and scancel are (default: PATH).
    pub bin_dir: Option<String>,
}

/// The resolved settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmConfig {
    pub executor: Executor,
    pub partition: Option<String>,
    pub account: Option<String>,
    pub max_parallel: Option<u32>,
    pub retries: u32,
    pub poll_interval: Duration,
    /// While squeue or sbatch fail for want of the controller, tries back off from
    /// `poll_interval`, doubling, up to this.
    pub max_backoff: Duration,
    pub sbatch_args: Vec<String>,
    pub aorta: Option<PathBuf>,
    pub bin_dir: Option<PathBuf>,
}

impl Settings {
    pub fn from_env() -> Settings {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Settings {
            executor: var("AORTA_EXECUTOR"),
            partition: var("AORTA_SLURM_PARTITION"),
            account: var("AORTA_SLURM_ACCOUNT"),
            max_parallel: var("AORTA_SLURM_MAX_PARALLEL"),
            retries: var("AORTA_SLURM_RETRIES"),
            poll_interval: var("AORTA_SLURM_POLL_INTERVAL"),
            max_backoff: var("AORTA_SLURM_MAX_BACKOFF"),
            sbatch_args: var("AORTA_SLURM_SBATCH_ARGS"),
            aorta: var("AORTA_SLURM_AORTA"),
            bin_dir: var("AORTA_SLURM_BIN"),
        }
    }

    /// The `[aorta]` section of `<root>/.buckconfig`: `executor`, `slurm_partition`,
    /// `slurm_account`, `slurm_max_parallel`, `slurm_retries`, `slurm_poll_interval`,
    /// `slurm_max_backoff`, `slurm_sbatch_args`, `slurm_aorta`, `slurm_bin`.
    pub fn from_project(root: &Path) -> Settings {
        let mut section = aorta_buckconfig::section(root, "aorta");
        let mut take = |k: &str| section.remove(k);
        Settings {
            executor: take("executor"),
            partition: take("slurm_partition"),
            account: take("slurm_account"),
            max_parallel: take("slurm_max_parallel"),
            retries: take("slurm_retries"),
            poll_interval: take("slurm_poll_interval"),
            max_backoff: take("slurm_max_backoff"),
            sbatch_args: take("slurm_sbatch_args"),
            aorta: take("slurm_aorta"),
            bin_dir: take("slurm_bin"),
        }
    }

    /// Field by field: `self` wins over `lower`.
    pub fn or(self, lower: Settings) -> Settings {
        Settings {
            executor: self.executor.or(lower.executor),
            partition: self.partition.or(lower.partition),
            account: self.account.or(lower.account),
            max_parallel: self.max_parallel.or(lower.max_parallel),
            retries: self.retries.or(lower.retries),
            poll_interval: self.poll_interval.or(lower.poll_interval),
            max_backoff: self.max_backoff.or(lower.max_backoff),
            sbatch_args: self.sbatch_args.or(lower.sbatch_args),
            aorta: self.aorta.or(lower.aorta),
            bin_dir: self.bin_dir.or(lower.bin_dir),
        }
    }

    pub fn resolve(&self) -> Result<SlurmConfig, ConfigError> {
        let executor = match self.executor.as_deref().map(str::trim) {
            None | Some("local") => Executor::Local,
            Some("slurm") => Executor::Slurm,
            Some(other) => {
                return Err(bad(
                    format!("unknown executor {other:?}"),
                    "use `local` (the default) or `slurm`",
                ))
            }
        };
        let count =
            |v: &Option<String>, what: &str, min: u32| -> Result<Option<u32>, ConfigError> {
                v.as_deref()
                    .map(|s| match s.trim().parse::<u32>() {
                        Ok(n) if n >= min => Ok(n),
                        _ => Err(bad(
                            format!("{what} must be a whole number >= {min}, got {s:?}"),
                            "see docs/slurm.md for the settings",
                        )),
                    })
                    .transpose()
            };
        let seconds = |v: &Option<String>, what: &str, default: f64| match v.as_deref() {
            None => Ok(Duration::from_secs_f64(default)),
            Some(s) => match s.trim().parse::<f64>() {
                Ok(v) if v > 0.0 && v.is_finite() && v < 1e9 => Ok(Duration::from_secs_f64(v)),
                _ => Err(bad(
                    format!("{what} must be seconds > 0, got {s:?}"),
                    "e.g. 2 or 0.5",
                )),
            },
        };
        let poll = seconds(&self.poll_interval, "the Slurm poll interval", 2.0)?;
        let max_backoff = seconds(&self.max_backoff, "the Slurm max_backoff", 60.0)?.max(poll);
        Ok(SlurmConfig {
            executor,
            partition: self.partition.clone(),
            account: self.account.clone(),
            max_parallel: count(&self.max_parallel, "the Slurm max_parallel", 1)?,
            retries: count(&self.retries, "the Slurm retries", 0)?.unwrap_or(2),
            poll_interval: poll,
            max_backoff,
            sbatch_args: self
                .sbatch_args
                .as_deref()
                .map(|s| s.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default(),
            aorta: self.aorta.as_ref().map(PathBuf::from),
            bin_dir: self.bin_dir.as_ref().map(PathBuf::from),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_then_env_then_buckconfig() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".buckconfig"),
            "[buildfile]\n  executor = nope\n[aorta]\n  executor = slurm\n  slurm_partition = gpu\n  slurm_retries = 5\n",
        )
        .unwrap();
        let project = Settings::from_project(dir.path());
        assert_eq!(project.executor.as_deref(), Some("slurm"));
        let flags = Settings {
            partition: Some("debug".into()),
            ..Settings::default()
        };
        let c = flags.or(project).resolve().unwrap();
        assert_eq!(c.executor, Executor::Slurm);
        assert_eq!(c.partition.as_deref(), Some("debug"));
        assert_eq!(c.retries, 5);
    }

    #[test]
    fn bad_settings_are_refused() {
        for s in [
            Settings {
                executor: Some("kubernetes".into()),
                ..Settings::default()
            },
            Settings {
                max_parallel: Some("0".into()),
                ..Settings::default()
            },
            Settings {
                poll_interval: Some("-1".into()),
                ..Settings::default()
            },
            Settings {
                max_backoff: Some("soon".into()),
                ..Settings::default()
            },
        ] {
            assert!(s.resolve().is_err(), "{s:?}");
        }
    }
}
