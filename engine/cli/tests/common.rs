#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::process::Output;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Runs the real `aorta` binary from the repository root.
pub fn aorta(args: &[&str]) -> Output {
    // A recorded snapshot keeps keys in dry-run snapshots the same on every machine.
    assert_cmd::Command::cargo_bin("aorta")
        .unwrap()
        .current_dir(repo_root())
        .env("NO_COLOR", "1")
        .env_remove("AORTA_STORE")
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        )
        // Workload keys hash the executable: the built-in ones (built beside `aorta` by
        // `cargo test --workspace`, or not) would make keys differ from build to build. These
        // committed symlinks to the pyecho fixture are found first, the same everywhere.
        .env(
            "AORTA_WORKLOAD_PATH",
            repo_root().join("engine/cli/tests/fixtures/stand-in-workloads"),
        )
        .args(args)
        .output()
        .unwrap()
}

/// Every file under `dir`, recursively (none when it does not exist).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Exit code and both streams, for snapshots.
pub fn transcript(out: &Output) -> String {
    let mut s = format!(
        "exit: {}\n",
        out.status.code().map_or("signal".into(), |c| c.to_string())
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stdout.is_empty() {
        s.push_str(&format!("--- stdout\n{stdout}"));
    }
    if !stderr.is_empty() {
        s.push_str(&format!("--- stderr\n{stderr}"));
    }
    s
}

/// A temporary workspace the real `aorta` builds in (docs/cache-keys.md's cases).
pub struct Ws {
    dir: tempfile::TempDir,
}

impl Ws {
    #[allow(clippy::new_without_default)] // a new temporary directory each time
    pub fn new() -> Ws {
        Ws {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A workspace holding `recipe` as r.yaml, rooted (`.aorta-root`) at its directory.
    pub fn with_recipe(recipe: &str) -> Ws {
        let ws = Ws::new();
        ws.write("r.yaml", recipe);
        ws.write(".aorta-root", "");
        ws
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, name: &str, body: &str) -> PathBuf {
        let p = self.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, body).unwrap();
        p
    }

    /// `aorta ARGS` in the workspace, with `bin/` first on PATH.
    pub fn aorta(&self, args: &[&str]) -> Output {
        self.aorta_env(args, &[])
    }

    /// [`Ws::aorta`] with more environment variables.
    pub fn aorta_env(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let path = format!(
            "{}:{}",
            self.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        assert_cmd::Command::cargo_bin("aorta")
            .unwrap()
            .current_dir(self.path())
            .env("NO_COLOR", "1")
            .env("PATH", path)
            .env(
                "AORTA_ENV_SNAPSHOT",
                repo_root().join("docs/examples/h200-env.json"),
            )
            .env_remove("AORTA_STORE")
            .env_remove("AORTA_REMOTE_CACHE")
            .envs(envs.iter().copied())
            .args(args)
            .output()
            .unwrap()
    }

    /// `aorta explain r.yaml --store s --cell CELL --trial N -- COMMAND…`.
    pub fn explain(&self, cell: &str, trial: &str, command: &[&str]) -> Output {
        let mut args = vec![
            "explain", "r.yaml", "--store", "s", "--cell", cell, "--trial", trial, "--",
        ];
        args.extend(command);
        self.aorta(&args)
    }

    /// `aorta build r.yaml --store s --output o EXTRA… -- COMMAND…`.
    pub fn build(&self, extra: &[&str], command: &[&str]) -> Output {
        let mut args = vec!["build", "r.yaml", "--store", "s", "--output", "o"];
        args.extend(extra);
        args.push("--");
        args.extend(command);
        self.aorta(&args)
    }
}

pub fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The summary's "Trials: N executed, M reused" as (N, M).
pub fn counts(o: &Output) -> (u32, u32) {
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.starts_with("Trials: "))
        .unwrap_or_else(|| panic!("no Trials line:\n{}", text(o)));
    let nums: Vec<u32> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (nums[0], nums[1])
}
