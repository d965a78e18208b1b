//! `sweep`: one fresh child process per CUDA_DEVICE_MAX_CONNECTIONS value (the driver reads it
//! once, at context creation), each `aorta-hw-queue run WORKLOAD --config-json CFG --json`, its
//! JSON collected from stdout.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::backend::DeviceInfo;
use crate::config::Config;
use crate::results::{ResultFile, Run, CONNECTIONS_ENV};

#[derive(Clone, Debug, PartialEq)]
pub struct ChildSpec {
    pub connections: u32,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

pub fn validate_connections(c: &[u32]) -> Result<(), String> {
    if c.is_empty() || c.iter().any(|&c| c == 0 || c > 32) {
        return Err(format!(
            "connections must be 1..=32 (the driver's range), got {c:?}"
        ));
    }
    Ok(())
}

pub fn plan(workload: &str, cfg: &Config, connections: &[u32]) -> Vec<ChildSpec> {
    let json = serde_json::to_string(cfg).expect("config serializes");
    connections
        .iter()
        .map(|&c| ChildSpec {
            connections: c,
            args: vec![
                "run".into(),
                workload.into(),
                "--config-json".into(),
                json.clone(),
                "--json".into(),
            ],
            env: vec![(CONNECTIONS_ENV.into(), c.to_string())],
        })
        .collect()
}

/// Run the children in order. A child that finds no GPU (exit 2) stops the sweep with exit 2;
/// any other failure is recorded in that run and the sweep goes on.
pub fn execute(
    exe: &Path,
    specs: &[ChildSpec],
    log: &mut dyn FnMut(String),
) -> Result<(Vec<Run>, Option<DeviceInfo>), (i32, String)> {
    let mut runs = Vec::new();
    let mut device = None;
    for spec in specs {
        log(format!(
            "--- {CONNECTIONS_ENV}={} (fresh process)",
            spec.connections
        ));
        let mut cmd = Command::new(exe);
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            cmd.arg0("aorta-hw-queue");
        }
        let out = cmd
            .args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| (1, format!("cannot start {}: {e}", exe.display())))?;
        let mut run = Run {
            connections: Some(spec.connections),
            ..Default::default()
        };
        match out.status.code() {
            Some(0) => match ResultFile::from_json(&String::from_utf8_lossy(&out.stdout)) {
                Ok(f) => {
                    device = device.or(f.device);
                    if let Some(r) = f.runs.into_iter().next() {
                        run.points = r.points;
                        run.notes = r.notes;
                    }
                }
                Err(e) => run.error = Some(format!("unreadable child output: {e}")),
            },
            Some(2) => return Err((2, "the child found no usable GPU (see above)".into())),
            other => run.error = Some(format!("child exited with {other:?}")),
        }
        runs.push(run);
    }
    Ok((runs, device))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_fresh_child_per_connection_count() {
        let cfg = Config {
            streams: vec![1, 64],
            ..Default::default()
        };
        let specs = plan("spin_streams", &cfg, &[1, 2, 4, 8, 16, 32]);
        assert_eq!(specs.len(), 6);
        for (s, c) in specs.iter().zip([1, 2, 4, 8, 16, 32]) {
            assert_eq!(s.connections, c);
            assert_eq!(
                s.env,
                vec![("CUDA_DEVICE_MAX_CONNECTIONS".to_string(), c.to_string())]
            );
            assert_eq!(
                &s.args[..2],
                &["run".to_string(), "spin_streams".to_string()]
            );
            assert_eq!(s.args.last().unwrap(), "--json");
            let back: Config = serde_json::from_str(&s.args[3]).unwrap();
            assert_eq!(back, cfg, "the child gets the parent's whole config");
        }
        assert!(validate_connections(&[1, 32]).is_ok());
        assert!(validate_connections(&[0]).is_err());
        assert!(validate_connections(&[64]).is_err());
    }
}
