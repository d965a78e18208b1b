//! What the user names is written through, never replaced or deleted, and nothing hangs
//! (issue 36): every command that writes a user-named path (`env probe -o`, `bundle -o`,
//! `trial exec --out`, the agent's `agent_log.jsonl` and `--output`) against a character
//! device, a FIFO, a symlink, a directory holding unrelated files and a read-only directory;
//! a FIFO in the store's action cache and in a `file://` remote; `cache stats|verify` on a
//! store that does not exist. The rule is docs/store.md's "User-named outputs".
mod common;

use common::{repo_root, transcript};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

const RECIPE: &str = "schema_version: 1\nmode: probe\nticket: T\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n";

/// Nothing here may hang: every command runs under this limit (a hang shows as no exit code).
const LIMIT: Duration = Duration::from_secs(120);

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A workspace with the recipe, a store `s` and the recorded snapshot.
struct Ws {
    dir: tempfile::TempDir,
}

impl Ws {
    fn new() -> Ws {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".aorta-root"), "").unwrap();
        std::fs::write(dir.path().join("r.yaml"), RECIPE).unwrap();
        Ws { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.path().join(rel)
    }

    /// `aorta ARGS` in `cwd` (relative to the workspace), under [`LIMIT`].
    fn aorta_in(&self, cwd: &str, args: &[&str]) -> Output {
        assert_cmd::Command::cargo_bin("aorta")
            .unwrap()
            .current_dir(self.p(cwd))
            .env("NO_COLOR", "1")
            .env(
                "AORTA_ENV_SNAPSHOT",
                repo_root().join("docs/examples/h200-env.json"),
            )
            .env("AORTA_STORE", self.p("s"))
            .env_remove("AORTA_REMOTE_CACHE")
            .timeout(LIMIT)
            .args(args)
            .output()
            .unwrap()
    }

    fn aorta(&self, args: &[&str]) -> Output {
        self.aorta_in(".", args)
    }

    fn mkfifo(&self, rel: &str) -> PathBuf {
        let p = self.p(rel);
        let st = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success());
        p
    }

    /// A scratch null device (`mknod c 1 3`); `None`, with the reason printed, when not root.
    fn null_device(&self, rel: &str) -> Option<PathBuf> {
        if !is_root() {
            eprintln!("skipped the character-device case: mknod needs root");
            return None;
        }
        let p = self.p(rel);
        let st = std::process::Command::new("mknod")
            .arg(&p)
            .args(["c", "1", "3"])
            .status()
            .unwrap();
        assert!(st.success(), "mknod");
        Some(p)
    }

    /// A directory holding a file of the user's, which no writer may delete.
    fn dir_with_unrelated(&self, rel: &str) -> PathBuf {
        let d = self.p(rel);
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::write(d.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(d.join("notes.txt"), "mine\n").unwrap();
        d
    }

    /// A built run directory, `o/T`.
    fn built(&self) -> PathBuf {
        let out = self.aorta(&[
            "build", "r.yaml", "--output", "o", "--", "sh", "-c", "echo ok",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
        let run = self.p("o/T");
        assert!(run.join("matrix.json").is_file(), "{}", transcript(&out));
        run
    }
}

fn assert_unrelated_kept(d: &Path) {
    assert_eq!(
        std::fs::read_to_string(d.join("src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("notes.txt")).unwrap(),
        "mine\n"
    );
}

fn is_char_device(p: &Path) -> bool {
    std::fs::symlink_metadata(p)
        .unwrap()
        .file_type()
        .is_char_device()
}

fn is_fifo(p: &Path) -> bool {
    std::fs::symlink_metadata(p).unwrap().file_type().is_fifo()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Reads a FIFO to its end on a thread: the reader a writer needs.
fn reader(fifo: &Path) -> std::thread::JoinHandle<Vec<u8>> {
    let fifo = fifo.to_path_buf();
    std::thread::spawn(move || std::fs::read(fifo).unwrap())
}

/// Runs `f` until it reports success, while a FIFO's reader (on a thread) may not be open yet:
/// a writer that finds no reader fails at once with exit 2 rather than waiting.
fn until_a_reader(f: impl Fn() -> Output) -> Output {
    let start = Instant::now();
    loop {
        let out = f();
        if out.status.code() != Some(2) || start.elapsed() > Duration::from_secs(20) {
            return out;
        }
        assert!(stderr(&out).contains("no reader"), "{}", transcript(&out));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Makes a directory read-only for this process: `chattr +i` as root (for whom permission bits
/// bind nothing), mode 0555 otherwise; undone on drop.
struct ReadOnly(PathBuf);

impl ReadOnly {
    fn new(dir: &Path) -> Option<ReadOnly> {
        std::fs::create_dir_all(dir).unwrap();
        if is_root() {
            let st = std::process::Command::new("chattr")
                .arg("+i")
                .arg(dir)
                .status();
            if !st.is_ok_and(|s| s.success()) {
                eprintln!("skipped the read-only cases: chattr +i does not work here");
                return None;
            }
        } else {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        Some(ReadOnly(dir.to_path_buf()))
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        if is_root() {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.0)
                .status();
        } else {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
        }
    }
}

// ---------------------------------------------------------------------------- env probe -o

#[test]
fn env_probe_leaves_a_character_device_a_device() {
    let ws = Ws::new();
    let Some(dev) = ws.null_device("null") else {
        return;
    };
    let out = ws.aorta(&["env", "probe", "-o", "null"]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(is_char_device(&dev), "the device was replaced");
    assert!(
        std::fs::read(&dev).unwrap().is_empty(),
        "still a null device"
    );
}

#[test]
fn env_probe_writes_through_a_fifo_and_a_symlink_and_never_into_a_directory() {
    let ws = Ws::new();
    // A FIFO with no reader: an error at once, not a hang; the FIFO stays.
    let fifo = ws.mkfifo("fifo");
    let out = ws.aorta(&["env", "probe", "-o", "fifo"]);
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(
        stderr(&out).contains("FIFO with no reader"),
        "{}",
        transcript(&out)
    );
    assert!(is_fifo(&fifo));
    // With a reader, the snapshot goes through it.
    let got = reader(&fifo);
    let out = until_a_reader(|| ws.aorta(&["env", "probe", "-o", "fifo"]));
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let json: serde_json::Value = serde_json::from_slice(&got.join().unwrap()).unwrap();
    assert!(json.get("schema_version").is_some(), "{json}");
    assert!(is_fifo(&fifo));

    // A symlink is followed: the link stays, its target gets the snapshot.
    std::fs::write(ws.p("target.json"), "old").unwrap();
    std::os::unix::fs::symlink("target.json", ws.p("link.json")).unwrap();
    let out = ws.aorta(&["env", "probe", "-o", "link.json"]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(std::fs::symlink_metadata(ws.p("link.json"))
        .unwrap()
        .file_type()
        .is_symlink());
    let text = std::fs::read_to_string(ws.p("target.json")).unwrap();
    assert!(text.contains("schema_version"), "{text}");

    // `/dev/stdout` (a link to /proc/self/fd/1, here a pipe with no path): written through.
    let out = ws.aorta(&["env", "probe", "-o", "/dev/stdout"]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with("{") && said.contains("Wrote env probe to /dev/stdout"),
        "{said}"
    );

    // A directory: exit 2, nothing in it touched.
    let d = ws.dir_with_unrelated("d");
    let out = ws.aorta(&["env", "probe", "-o", "d"]);
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(
        stderr(&out).contains("is a directory"),
        "{}",
        transcript(&out)
    );
    assert_unrelated_kept(&d);
}

// ------------------------------------------------------------------------------- bundle -o

#[test]
fn bundle_writes_through_a_device_a_fifo_and_a_symlink_and_into_a_directory() {
    let ws = Ws::new();
    let run = ws.built();
    let run = run.to_str().unwrap();

    if let Some(dev) = ws.null_device("null") {
        let out = ws.aorta(&["bundle", run, "-o", "null"]);
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
        assert!(is_char_device(&dev), "the device was replaced");
    }

    let fifo = ws.mkfifo("fifo");
    let out = ws.aorta(&["bundle", run, "-o", "fifo"]);
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(
        stderr(&out).contains("FIFO with no reader"),
        "{}",
        transcript(&out)
    );
    let got = reader(&fifo);
    let out = until_a_reader(|| ws.aorta(&["bundle", run, "-o", "fifo"]));
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let bytes = got.join().unwrap();
    assert_eq!(&bytes[..2], b"\x1f\x8b", "a gzip stream came through");
    assert!(is_fifo(&fifo));
    // What came through the FIFO is the archive a file gets, byte for byte.
    let out = ws.aorta(&["bundle", run, "-o", "file.tar.gz"]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert_eq!(std::fs::read(ws.p("file.tar.gz")).unwrap(), bytes);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("{} bytes", bytes.len())), "{said}");

    std::fs::write(ws.p("target.tar.gz"), "old").unwrap();
    std::os::unix::fs::symlink("target.tar.gz", ws.p("link.tar.gz")).unwrap();
    let out = ws.aorta(&["bundle", run, "-o", "link.tar.gz"]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(std::fs::symlink_metadata(ws.p("link.tar.gz"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(ws.p("target.tar.gz")).unwrap(), bytes);

    // A directory gets `<ticket>.bundle.tar.gz` inside it; what was there stays.
    let d = ws.dir_with_unrelated("d");
    let out = ws.aorta(&["bundle", run, "-o", "d"]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(d.join("T.bundle.tar.gz").is_file());
    assert_unrelated_kept(&d);
    let mut names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["T.bundle.tar.gz", "notes.txt", "src"],
        "no staging left"
    );
}

// ------------------------------------------------------------------------ trial exec --out

fn trial_exec(ws: &Ws, cwd: &str, recipe: &str, out: &str) -> Output {
    ws.aorta_in(
        cwd,
        &[
            "trial",
            "exec",
            "--recipe",
            recipe,
            "--cell",
            "none-none",
            "--trial",
            "0",
            "--out",
            out,
            "--",
            "sh",
            "-c",
            "echo hi",
        ],
    )
}

#[test]
fn trial_exec_never_destroys_what_is_at_out() {
    let ws = Ws::new();
    // A directory with files in it: refused before the trial runs; nothing deleted or added.
    let d = ws.dir_with_unrelated("d");
    let out = trial_exec(&ws, ".", "r.yaml", "d");
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(
        stderr(&out).contains("is a directory that is not empty"),
        "{}",
        transcript(&out)
    );
    assert_unrelated_kept(&d);
    assert!(!d.join("result.json").exists() && !d.join("stdout.log").exists());
    assert!(!ws.p("s/ac").exists(), "nothing ran: {}", transcript(&out));

    // A file, a FIFO, a device, a symlink to a file: refused, each left as it was.
    std::fs::write(ws.p("file"), "mine").unwrap();
    let fifo = ws.mkfifo("fifo");
    std::os::unix::fs::symlink("file", ws.p("link-to-file")).unwrap();
    for (name, what) in [
        ("file", "is a regular file"),
        ("fifo", "is a FIFO"),
        ("link-to-file", "is a regular file"),
    ] {
        let out = trial_exec(&ws, ".", "r.yaml", name);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", transcript(&out));
        assert!(stderr(&out).contains(what), "{name}: {}", transcript(&out));
    }
    assert_eq!(std::fs::read_to_string(ws.p("file")).unwrap(), "mine");
    assert!(is_fifo(&fifo));
    if let Some(dev) = ws.null_device("null") {
        let out = trial_exec(&ws, ".", "r.yaml", "null");
        assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
        assert!(
            stderr(&out).contains("is a character device"),
            "{}",
            transcript(&out)
        );
        assert!(is_char_device(&dev));
    }

    // An empty directory is filled in place; a symlink to one is followed and stays a link.
    std::fs::create_dir(ws.p("empty")).unwrap();
    let out = trial_exec(&ws, ".", "r.yaml", "empty");
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert_eq!(
        std::fs::read_to_string(ws.p("empty/stdout.log")).unwrap(),
        "hi\n"
    );
    std::fs::create_dir(ws.p("real")).unwrap();
    std::os::unix::fs::symlink("real", ws.p("link-to-dir")).unwrap();
    let out = trial_exec(&ws, ".", "r.yaml", "link-to-dir");
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(ws.p("real/result.json").is_file());
    assert!(std::fs::symlink_metadata(ws.p("link-to-dir"))
        .unwrap()
        .file_type()
        .is_symlink());

    // `--out .` in an empty directory fills it, leaving nothing beside it.
    std::fs::create_dir_all(ws.p("cwd/here")).unwrap();
    let out = trial_exec(&ws, "cwd/here", "../../r.yaml", ".");
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(ws.p("cwd/here/result.json").is_file());
    let beside: Vec<_> = std::fs::read_dir(ws.p("cwd"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["here"], "nothing left beside --out .");
    let mut inside: Vec<String> = std::fs::read_dir(ws.p("cwd/here"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    inside.sort();
    assert_eq!(
        inside,
        ["inputs.json", "result.json", "stderr.log", "stdout.log"]
    );

    // A rerun into a filled directory is refused, the earlier outputs kept.
    let out = trial_exec(&ws, ".", "r.yaml", "empty");
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(ws.p("empty/result.json").is_file());
}

// -------------------------------------------------------------------- the agent's log

fn agent(ws: &Ws, output: &str) -> Output {
    let fixture = |n: &str| {
        repo_root()
            .join("engine/agent/tests/fixtures")
            .join(n)
            .display()
            .to_string()
    };
    std::fs::create_dir_all(ws.p("state")).unwrap();
    assert_cmd::Command::cargo_bin("aorta")
        .unwrap()
        .current_dir(ws.path())
        .env("NO_COLOR", "1")
        .env("FLAKY_STATE", ws.p("state"))
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        )
        .env("AORTA_STORE", ws.p("s"))
        .timeout(LIMIT)
        .args(["agent", "--output", output])
        .args(["--recipe", &fixture("template.yaml")])
        .args(["--mitigations-file", &fixture("mitigations.json")])
        .args(["--mitigation", "fix", "--"])
        .args([&fixture("flaky.sh"), "1000", "5"])
        .output()
        .unwrap()
}

#[test]
fn the_agent_log_is_never_a_symlink_a_fifo_or_a_device() {
    let ws = Ws::new();
    let run = ws.p("out/_no_ticket_");
    std::fs::create_dir_all(&run).unwrap();
    let log = run.join("agent_log.jsonl");

    // A symlink to some other file: refused; the other file keeps its bytes and mode.
    std::fs::write(ws.p("other"), "precious\n").unwrap();
    std::os::unix::fs::symlink(ws.p("other"), &log).unwrap();
    let out = agent(&ws, "out");
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(
        stderr(&out).contains("is a symlink"),
        "{}",
        transcript(&out)
    );
    assert_eq!(
        std::fs::read_to_string(ws.p("other")).unwrap(),
        "precious\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(ws.p("other"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o777, 0o600, "the link's target was chmodded");

    // A FIFO: refused at once, not waited on.
    std::fs::remove_file(&log).unwrap();
    let fifo = ws.mkfifo("out/_no_ticket_/agent_log.jsonl");
    let out = agent(&ws, "out");
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(stderr(&out).contains("is a FIFO"), "{}", transcript(&out));
    assert!(is_fifo(&fifo));

    if let Some(dev) = {
        std::fs::remove_file(&log).unwrap();
        ws.null_device("out/_no_ticket_/agent_log.jsonl")
    } {
        let out = agent(&ws, "out");
        assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
        assert!(
            stderr(&out).contains("is a character device"),
            "{}",
            transcript(&out)
        );
        assert!(is_char_device(&dev));
    }
}

// ------------------------------------------------------------- a read-only directory

/// Every writer gives the same exit code for a destination it cannot write: 2, the user's
/// input (the path named), as docs/store.md says; a full disk would be 3.
#[test]
fn a_read_only_directory_is_exit_2_for_every_writer() {
    let ws = Ws::new();
    let run = ws.built();
    let run = run.to_str().unwrap();
    let Some(_ro) = ReadOnly::new(&ws.p("ro")) else {
        return;
    };
    let cases: Vec<(&str, Output)> = vec![
        (
            "env probe -o",
            ws.aorta(&["env", "probe", "-o", "ro/env.json"]),
        ),
        (
            "bundle -o FILE",
            ws.aorta(&["bundle", run, "-o", "ro/b.tar.gz"]),
        ),
        ("bundle -o DIR", ws.aorta(&["bundle", run, "-o", "ro"])),
        ("trial exec --out", trial_exec(&ws, ".", "r.yaml", "ro/t")),
        ("agent --output", agent(&ws, "ro/agent")),
        (
            "build --output",
            ws.aorta(&[
                "build", "r.yaml", "--output", "ro/run", "--", "sh", "-c", "echo ok",
            ]),
        ),
    ];
    for (what, out) in &cases {
        assert_eq!(out.status.code(), Some(2), "{what}: {}", transcript(out));
        assert!(
            stderr(out).contains("name a path you can write"),
            "{what}: {}",
            transcript(out)
        );
    }
    assert_eq!(std::fs::read_dir(ws.p("ro")).unwrap().count(), 0);
}

// ------------------------------------------------------------ FIFOs in the store and remote

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A FIFO where an action-cache entry should be: `build` and `explain` finish (no wait for a
/// writer, no store lock held forever), say what they refused, re-execute, and the entry heals.
#[test]
fn a_fifo_in_the_action_cache_is_refused_not_waited_on() {
    let ws = Ws::new();
    let build = || {
        ws.aorta(&[
            "build", "r.yaml", "--output", "o", "--", "sh", "-c", "echo ok",
        ])
    };
    let first = build();
    assert_eq!(first.status.code(), Some(0), "{}", transcript(&first));
    // Every entry (the trial's and the artifacts') becomes a FIFO.
    let plant = || {
        let entries = files_under(&ws.p("s/ac"));
        assert!(!entries.is_empty());
        for e in &entries {
            std::fs::remove_file(e).unwrap();
            ws.mkfifo(e.strip_prefix(ws.path()).unwrap().to_str().unwrap());
        }
    };
    plant();
    let second = build();
    assert_eq!(second.status.code(), Some(0), "{}", transcript(&second));
    assert!(
        stderr(&second).contains("a FIFO, not a regular file"),
        "{}",
        transcript(&second)
    );
    assert_eq!(common::counts(&second), (1, 0), "{}", transcript(&second));
    let third = build();
    assert_eq!(
        common::counts(&third),
        (0, 1),
        "healed: {}",
        transcript(&third)
    );

    plant();
    let explain = ws.aorta(&[
        "explain",
        "r.yaml",
        "--cell",
        "none-none",
        "--trial",
        "0",
        "--",
        "sh",
        "-c",
        "echo ok",
    ]);
    assert!(explain.status.code().is_some(), "explain hung");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&explain.stdout),
        stderr(&explain)
    );
    assert!(
        said.contains("a FIFO, not a regular file"),
        "{}",
        transcript(&explain)
    );
}

/// A FIFO where a `file://` remote's record should be: the build finishes, warns, runs the
/// trial locally.
#[test]
fn a_fifo_in_a_file_remote_is_refused_not_waited_on() {
    let ws = Ws::new();
    std::fs::create_dir(ws.p("remote")).unwrap();
    let url = format!("file://{}", ws.p("remote").display());
    let build = |store: &str| {
        ws.aorta(&[
            "build",
            "r.yaml",
            "--store",
            store,
            "--output",
            "o",
            "--remote-cache",
            &url,
            "--remote-cache-mode",
            "readwrite",
            "--",
            "sh",
            "-c",
            "echo ok",
        ])
    };
    let first = build("s1");
    assert_eq!(first.status.code(), Some(0), "{}", transcript(&first));
    let records: Vec<PathBuf> = files_under(&ws.p("remote"))
        .into_iter()
        .filter(|p| p.components().any(|c| c.as_os_str() == "ac"))
        .collect();
    assert!(!records.is_empty(), "{}", transcript(&first));
    for r in &records {
        std::fs::remove_file(r).unwrap();
        ws.mkfifo(r.strip_prefix(ws.path()).unwrap().to_str().unwrap());
    }

    let second = build("s2");
    assert_eq!(second.status.code(), Some(0), "{}", transcript(&second));
    assert!(
        stderr(&second).contains("a FIFO, not a regular file"),
        "{}",
        transcript(&second)
    );
    assert_eq!(common::counts(&second), (1, 0), "{}", transcript(&second));
}

// ------------------------------------------------------------- cache stats|verify --store

#[test]
fn cache_stats_and_verify_on_no_store_say_so_and_create_nothing() {
    let ws = Ws::new();
    for cmd in ["stats", "verify"] {
        let out = ws.aorta(&["cache", cmd, "--store", "typo"]);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", transcript(&out));
        assert!(
            stderr(&out).contains("no store at") && stderr(&out).contains("does not exist"),
            "{cmd}: {}",
            transcript(&out)
        );
        assert!(!ws.p("typo").exists(), "{cmd} made a store");
        // An existing directory that is no store is not made into one either.
        let d = ws.dir_with_unrelated("src-dir");
        let out = ws.aorta(&["cache", cmd, "--store", "src-dir"]);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", transcript(&out));
        assert!(
            stderr(&out).contains("is not an aorta store"),
            "{}",
            transcript(&out)
        );
        assert!(!d.join("ac").exists() && !d.join("VERSION").exists());
    }
    // A real store still answers.
    ws.built();
    let out = ws.aorta(&["cache", "stats", "--store", "s"]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
}
