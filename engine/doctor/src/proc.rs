//! Running a vendor tool with a deadline: a hung driver hangs `nvidia-smi`, and doctor must
//! say so instead of hanging with it.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0} not found on PATH")]
    NotFound(String),
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} did not answer within {} s (a hung driver?)", .after.as_secs())]
    Timeout { program: String, after: Duration },
    #[error("{program} exited with {code}: {stderr}")]
    Failed {
        program: String,
        code: String,
        stderr: String,
    },
}

/// Runs `program args`, returns its stdout; kills it after `timeout`.
pub fn run_captured(program: &str, args: &[&str], timeout: Duration) -> Result<String, RunError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => RunError::NotFound(program.to_owned()),
            _ => RunError::Spawn {
                program: program.to_owned(),
                source,
            },
        })?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Timeout {
                    program: program.to_owned(),
                    after: timeout,
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(source) => {
                return Err(RunError::Spawn {
                    program: program.to_owned(),
                    source,
                })
            }
        }
    };
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    if !status.success() {
        let stderr = String::from_utf8_lossy(&err);
        let stdout = String::from_utf8_lossy(&out);
        let first = stderr
            .lines()
            .chain(stdout.lines())
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_owned();
        return Err(RunError::Failed {
            program: program.to_owned(),
            code: status
                .code()
                .map_or("a signal".to_owned(), |c| format!("status {c}")),
            stderr: first,
        });
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_failing_slow_and_fine() {
        let t = Duration::from_secs(5);
        assert!(matches!(
            run_captured("/nonexistent/aorta-no-such-tool", &[], t),
            Err(RunError::NotFound(_))
        ));
        assert_eq!(run_captured("sh", &["-c", "echo hi"], t).unwrap(), "hi\n");
        let e = run_captured("sh", &["-c", "echo bad >&2; exit 3"], t).unwrap_err();
        assert_eq!(e.to_string(), "sh exited with status 3: bad");
        assert!(matches!(
            run_captured("sleep", &["5"], Duration::from_millis(100)),
            Err(RunError::Timeout { .. })
        ));
    }
}
