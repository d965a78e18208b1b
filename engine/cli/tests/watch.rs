//! `aorta build --watch`: editing one recipe among several re-parses only that recipe (salsa's
//! WillExecute events, reported as "re-parsed …") and re-executes only its changed cell.
mod common;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const RECIPE: &str = "schema_version: 1\nmode: probe\nticket: T\ntrials: 2\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\nconfound: {baseline_cell: none-none}\n";

#[test]
fn editing_one_recipe_rebuilds_only_its_changed_cell() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::write(ws.join(".aorta-root"), "").unwrap();
    for name in ["a", "b", "c"] {
        std::fs::write(
            ws.join(format!("{name}.yaml")),
            RECIPE.replace("ticket: T", &format!("ticket: {name}")),
        )
        .unwrap();
    }
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(ws)
        .env("NO_COLOR", "1")
        .env("AORTA_STORE", ws.join("store"))
        .env(
            "AORTA_ENV_SNAPSHOT",
            common::repo_root().join("docs/examples/h200-env.json"),
        )
        .args([
            "build",
            "--watch",
            "--watch-max-rebuilds",
            "1",
            "a.yaml",
            "b.yaml",
            "c.yaml",
            "--output",
            "out",
            "--",
            "true",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    let t = tx.clone();
    std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .for_each(|l| drop(t.send(format!("E {l}"))))
    });
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .for_each(|l| drop(tx.send(format!("O {l}"))))
    });

    // stdout and stderr arrive through two threads, so their lines interleave in any order:
    // wait for what the first round must have printed on both, not for one line.
    let mut lines = Vec::new();
    let wait_for = |pred: &dyn Fn(&[String]) -> bool, lines: &mut Vec<String>| {
        while !pred(lines) {
            let l = rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("timed out; output so far:\n{}", lines.join("\n")));
            lines.push(l);
        }
    };
    let first_round_done = |ls: &[String]| {
        ls.iter().any(|l| l.contains("aorta watch: watching"))
            && ls
                .iter()
                .filter(|l| l.contains("Wrote probe artifacts"))
                .count()
                == 3
    };
    wait_for(&first_round_done, &mut lines);
    let first: Vec<String> = lines.clone();
    assert!(
        first
            .iter()
            .any(|l| l.contains("re-parsed a.yaml, b.yaml, c.yaml")
                || l.contains("re-parsed a, b, c")),
        "{first:#?}"
    );
    // The three recipes plan identical trials (the ticket is not in keys): a executes, b and c reuse.
    assert_eq!(
        first.iter().filter(|l| l.contains("Trials: ")).count(),
        3,
        "{first:#?}"
    );
    assert_eq!(
        first
            .iter()
            .filter(|l| l.contains("Trials: 4 executed, 0 reused"))
            .count(),
        1,
        "{first:#?}"
    );

    // Edit one cell of b.yaml.
    std::fs::write(
        ws.join("b.yaml"),
        RECIPE
            .replace("ticket: T", "ticket: b")
            .replace("cuda_launch_blocking", "cuda_device_max_connections_1"),
    )
    .unwrap();
    let status = child.wait_timeout_or_kill(Duration::from_secs(60));
    // Until both pipes close (the reader threads end with the process).
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(10)) {
        lines.push(l);
    }
    let second = &lines[first.len()..];
    assert!(
        status,
        "aorta did not exit after one rebuild:\n{}",
        lines.join("\n")
    );
    let reparsed: Vec<&String> = second.iter().filter(|l| l.contains("re-parsed")).collect();
    assert_eq!(reparsed.len(), 1, "{second:#?}");
    assert!(
        reparsed[0].ends_with("re-parsed b") || reparsed[0].ends_with("re-parsed b.yaml"),
        "only b re-parsed: {second:#?}"
    );
    let builds: Vec<&String> = second.iter().filter(|l| l.contains("Trials: ")).collect();
    assert_eq!(builds.len(), 1, "only b rebuilt: {second:#?}");
    assert!(
        builds[0].contains("Trials: 2 executed, 2 reused"),
        "only the edited cell re-executed: {second:#?}"
    );
}

trait WaitTimeout {
    fn wait_timeout_or_kill(&mut self, d: Duration) -> bool;
}

impl WaitTimeout for std::process::Child {
    fn wait_timeout_or_kill(&mut self, d: Duration) -> bool {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < d {
            if let Ok(Some(s)) = self.try_wait() {
                return s.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.kill();
        let _ = self.wait();
        false
    }
}
