//! Running the probe's helper tools (`nvidia-smi`, `nvcc`, `ldconfig`, the chosen Python, …).
//!
//! Each tool is a real subprocess with a deadline. The child gets exactly the probe's
//! environment map (not aorta's own), so a test can hand the probe a `PATH` of fake tools and
//! nothing leaks in from the machine running the test. Each child runs in its own process
//! group; on timeout the whole group is SIGKILLed, so a tool that forks helpers cannot keep the
//! probe waiting. This is deliberately smaller than `aorta-exec`'s trial runner: no log files and
//! no hang monitor. The wait wakes on the child's pidfd, not on a tick, because a probe runs a
//! dozen short tools and their latency adds up.

use crate::error::{Exit, ProbeError};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Waits for the child to exit until `deadline`; `None` when it is still running then. Its
/// pidfd wakes the thread the moment it exits; a sleep-and-poll loop (sleeps doubling from
/// 0.5 ms to 10 ms) notices an exit up to a sleep late, and is the way only where pidfds are
/// missing (Linux < 5.3).
fn wait_until(child: &mut Child, deadline: Instant) -> std::io::Result<Option<ExitStatus>> {
    let pidfd = aorta_exec::pidfd_open(child.id() as i32).ok();
    let mut poll = Duration::from_micros(500);
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        match &pidfd {
            Some(fd) => aorta_exec::wait_readable(fd, left),
            None => {
                thread::sleep(poll.min(left));
                poll = (poll * 2).min(Duration::from_millis(10));
            }
        }
    }
}

/// Captured output is capped so a runaway tool cannot exhaust memory.
const MAX_OUTPUT: u64 = 16 << 20;

/// What a finished tool printed.
#[derive(Debug, Clone)]
pub(crate) struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// How a failed run ended, for `partial_reasons`: the status and the last line printed.
    pub fn failure(&self) -> Exit {
        Exit {
            code: self.code,
            tail: tail(&self.stderr).or_else(|| tail(&self.stdout)),
        }
    }

    /// `Ok(self)` when the tool succeeded, else [`ProbeError::Failed`] naming `command`.
    pub fn check(self, command: &str) -> Result<Output, ProbeError> {
        if self.success() {
            Ok(self)
        } else {
            Err(ProbeError::Failed {
                command: command.to_string(),
                exit: self.failure(),
            })
        }
    }
}

/// The last non-empty line, at most 200 characters (AORTA §7.4 keeps the same tail).
pub(crate) fn tail(s: &str) -> Option<String> {
    let line = s.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(200).collect())
}

/// Looks tools up on the probe's `PATH` and runs them with the probe's environment.
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    env: BTreeMap<String, String>,
    path: Vec<PathBuf>,
}

impl Tools {
    pub fn new(env: &BTreeMap<String, String>) -> Self {
        let path = env
            .get("PATH")
            .map(|p| {
                std::env::split_paths(p)
                    .filter(|d| !d.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Tools {
            env: env.clone(),
            path,
        }
    }

    /// The first executable `name` on `PATH`, then in `fallbacks` (directories).
    pub fn which(&self, name: &str, fallbacks: &[PathBuf]) -> Option<PathBuf> {
        self.path
            .iter()
            .chain(fallbacks)
            .map(|d| d.join(name))
            .find(|p| is_executable(p))
    }

    /// Runs `program args…` with a deadline. `Err` is a reason fit for `partial_reasons`.
    pub fn run(
        &self,
        program: &Path,
        args: &[&str],
        timeout: Duration,
    ) -> Result<Output, ProbeError> {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .envs(&self.env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.process_group(0);
        let mut child = cmd.spawn().map_err(|source| ProbeError::Spawn {
            program: program.to_path_buf(),
            source,
        })?;
        let pid = child.id() as i32;
        let (tx, rx) = mpsc::channel::<(bool, Vec<u8>)>();
        for (is_out, pipe) in [
            (
                true,
                child
                    .stdout
                    .take()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
            ),
            (
                false,
                child
                    .stderr
                    .take()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
            ),
        ] {
            let tx = tx.clone();
            thread::spawn(move || {
                let mut buf = Vec::new();
                if let Some(p) = pipe {
                    let _ = p.take(MAX_OUTPUT).read_to_end(&mut buf);
                }
                let _ = tx.send((is_out, buf));
            });
        }
        drop(tx);
        let status = wait_until(&mut child, Instant::now() + timeout).map_err(|source| {
            ProbeError::Wait {
                program: program.to_path_buf(),
                source,
            }
        })?;
        let Some(status) = status else {
            // SAFETY: plain kill(2) on the child's own process group (never ours: the child
            // was started with process_group(0), so its pgid is its pid).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let _ = child.wait();
            return Err(ProbeError::Timeout {
                name: display_name(program),
                timeout,
            });
        };
        // A daemonised grandchild may hold a pipe open: give the readers a short grace.
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let grace = Instant::now() + Duration::from_millis(500);
        for _ in 0..2 {
            match rx.recv_timeout(grace.saturating_duration_since(Instant::now())) {
                Ok((true, b)) => stdout = b,
                Ok((false, b)) => stderr = b,
                Err(_) => break,
            }
        }
        // Reap anything the tool left in its group.
        // SAFETY: as above: kill(2) on the child's own process group (its pgid is its pid, never
        // ours); no memory is involved.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        Ok(Output {
            code: status.code(),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    }

    /// [`which`](Self::which) then [`run`](Self::run); a missing tool is [`ProbeError::NotOnPath`].
    pub fn run_named(
        &self,
        name: &str,
        fallbacks: &[PathBuf],
        args: &[&str],
        timeout: Duration,
    ) -> Result<Output, ProbeError> {
        let p = self
            .which(name, fallbacks)
            .ok_or_else(|| ProbeError::NotOnPath {
                name: name.to_string(),
            })?;
        self.run(&p, args, timeout)
    }

    /// Like [`run_named`](Self::run_named) but a non-zero exit is an error too.
    pub fn stdout_of(
        &self,
        name: &str,
        fallbacks: &[PathBuf],
        args: &[&str],
        timeout: Duration,
    ) -> Result<String, ProbeError> {
        let o = self.run_named(name, fallbacks, args, timeout)?;
        Ok(o.check(&format!("`{name} {}`", args.join(" ")))?.stdout)
    }
}

fn display_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

pub(crate) use aorta_exec::is_executable_file as is_executable;
