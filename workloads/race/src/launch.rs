//! `--nproc N`: one process per GPU, launched by the workload itself the way torchrun would
//! (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), with NVLink multicast kept off.
//! Rank 0 writes the merged result; the launcher waits for all ranks and, once one has failed,
//! gives the others a grace period before ending them, so a lost rank cannot hang the trial.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::rendezvous::free_port;

/// Env every rank gets besides the rank variables: NVLink SHARP/multicast off (it can put a
/// shared host's GPUs out of service).
pub const SAFE_ENV: &[(&str, &str)] = &[
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
];

pub fn rank_env(rank: u32, world: u32, port: u16) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = vec![
        ("RANK".into(), rank.to_string()),
        ("LOCAL_RANK".into(), rank.to_string()),
        ("WORLD_SIZE".into(), world.to_string()),
        ("LOCAL_WORLD_SIZE".into(), world.to_string()),
        ("MASTER_ADDR".into(), "127.0.0.1".into()),
        ("MASTER_PORT".into(), port.to_string()),
    ];
    v.extend(SAFE_ENV.iter().map(|(k, x)| (k.to_string(), x.to_string())));
    v
}

/// Run `nproc` ranks of this executable on `config`; returns rank 0's exit code (1 when rank 0
/// died without one), or `Err` when the ranks could not be started.
pub fn launch(nproc: u32, config: &Path, result: &Path, grace: Duration) -> Result<i32, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let port = free_port()?;
    let mut children: Vec<(u32, Child)> = Vec::new();
    for rank in 0..nproc {
        let mut cmd = Command::new(&exe);
        cmd.arg0("aorta-workload-race")
            .args(["run", "--config"])
            .arg(config)
            .arg("--result")
            .arg(result)
            .envs(rank_env(rank, nproc, port));
        match cmd.spawn() {
            Ok(c) => children.push((rank, c)),
            Err(e) => {
                for (_, c) in &mut children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(format!("cannot start rank {rank}: {e}"));
            }
        }
    }
    let mut codes: Vec<Option<i32>> = vec![None; nproc as usize];
    let mut deadline: Option<Instant> = None;
    while codes.iter().any(Option::is_none) {
        for (rank, c) in &mut children {
            let r = *rank as usize;
            if codes[r].is_none() {
                if let Ok(Some(st)) = c.try_wait() {
                    let code = st.code().unwrap_or(1);
                    codes[r] = Some(code);
                    if code != 0 && deadline.is_none() {
                        eprintln!(
                            "race: rank {rank} exited with {code}; waiting {} s for the others",
                            grace.as_secs()
                        );
                        deadline = Some(Instant::now() + grace);
                    }
                }
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            for (rank, c) in &mut children {
                if codes[*rank as usize].is_none() {
                    eprintln!("race: ending rank {rank} (pid {})", c.id());
                    let _ = c.kill();
                    codes[*rank as usize] = Some(c.wait().ok().and_then(|s| s.code()).unwrap_or(1));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("race: rank exit codes {codes:?}");
    Ok(codes[0].unwrap_or(1))
}
