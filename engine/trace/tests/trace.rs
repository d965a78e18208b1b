//! Real processes under the real `aorta-trace` binary: what is recorded, exit statuses,
//! signals, the untraced fallback. Tests needing a tool that is missing say so and pass.

use aorta_trace::{read_trace, Trace, TraceStatus, TracedFile};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_aorta-trace");

/// A temp dir by its canonical path (traces hold paths as the kernel resolved cwd/fds).
fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().canonicalize().unwrap();
    (d, p)
}

fn traced_in(cwd: &Path, out: &Path, argv: &[&str]) -> (ExitStatus, Trace) {
    let mut cmd = Command::new(BIN);
    cmd.arg("--out")
        .arg(out)
        .arg("--")
        .args(argv)
        .current_dir(cwd);
    let st = wait_bounded(cmd.stdout(Stdio::null()).spawn().unwrap());
    (st, read_trace(out).unwrap())
}

/// A hang (a tracee left stopped, a tracer waiting for a stop that never comes) fails the
/// test instead of blocking the suite.
fn wait_bounded(mut c: Child) -> ExitStatus {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > until {
            let _ = c.kill();
            panic!("aorta-trace hung (killed after 60 s)");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn traced(dir: &Path, argv: &[&str]) -> (ExitStatus, Trace) {
    traced_in(dir, &dir.join("trace.json"), argv)
}

fn entry<'a>(t: &'a Trace, p: &Path) -> &'a TracedFile {
    t.file(p)
        .unwrap_or_else(|| panic!("{} not recorded in {t:#?}", p.display()))
}

fn write(p: &Path, text: &str) -> PathBuf {
    std::fs::write(p, text).unwrap();
    p.to_path_buf()
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[test]
fn cat_read_is_recorded_with_the_binary_it_ran() {
    let (_d, dir) = tempdir();
    let f = write(&dir.join("input.txt"), "hello\n");
    let (st, t) = traced(&dir, &["cat", f.to_str().unwrap()]);
    assert!(st.success());
    assert_eq!(t.status, TraceStatus::Complete, "{:?}", t.reason);
    let e = entry(&t, &f);
    assert!(e.read && !e.write && !e.exec, "{e:?}");
    let cat = on_path("cat").unwrap().canonicalize().unwrap();
    assert!(entry(&t, &cat).exec);
    let mut sorted = t.files.clone();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(sorted, t.files, "sorted by path");
}

#[test]
fn exit_codes_and_signals_pass_through() {
    let (_d, dir) = tempdir();
    assert_eq!(traced(&dir, &["sh", "-c", "exit 7"]).0.code(), Some(7));
    assert_eq!(traced(&dir, &["no-such-program-xyz"]).0.code(), Some(127));
    for (sig, name) in [(libc::SIGKILL, "KILL"), (libc::SIGTERM, "TERM")] {
        let (st, t) = traced(&dir, &["sh", "-c", &format!("kill -{name} $$")]);
        assert_eq!(st.signal(), Some(sig), "{st:?}");
        assert_eq!(t.status, TraceStatus::Complete);
    }
}

#[test]
fn written_then_read_file_is_a_write() {
    let (_d, dir) = tempdir();
    let (st, t) = traced(&dir, &["sh", "-c", "echo x > f; cat f"]);
    assert!(st.success());
    let e = entry(&t, &dir.join("f"));
    assert!(e.write && e.read, "{e:?}");
}

#[test]
fn grandchild_in_a_new_session_without_env_is_recorded() {
    let (_d, dir) = tempdir();
    let f = write(&dir.join("deep.txt"), "x");
    let script = format!(
        "env -i setsid sh -c 'cat {} > /dev/null' & wait",
        f.display()
    );
    let (st, t) = traced(&dir, &["sh", "-c", &script]);
    assert!(st.success());
    assert!(entry(&t, &f).read);
}

const STATIC_C: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>
#include <string.h>
#include <sys/syscall.h>
struct how { unsigned long long flags, mode, resolve; };
int main(int argc, char **argv) {
    char buf[64];
    int fd = open(argv[1], O_RDONLY);
    if (argc != 4 || fd < 0 || read(fd, buf, sizeof buf) < 0) return 10;
    struct how h; memset(&h, 0, sizeof h);
    h.flags = O_WRONLY | O_CREAT; h.mode = 0644;
    if (syscall(437 /* openat2 */, AT_FDCWD, argv[2], &h, sizeof h) < 0) return 11;
    int s = open(argv[3], O_RDONLY);
    char *args[] = { argv[3], NULL }, *env[] = { NULL };
    if (s >= 0) syscall(SYS_execveat, s, "", args, env, AT_EMPTY_PATH);
    return 12;
}
"#;

/// Static binary (no libc wrapper to interpose on), openat2 with a relative path, and
/// execveat(fd, "", AT_EMPTY_PATH) of a script.
#[test]
fn static_binary_openat2_and_execveat_are_recorded() {
    let libc_a = Path::new("/usr/lib/x86_64-linux-gnu/libc.a");
    if on_path("gcc").is_none() || !libc_a.exists() {
        eprintln!("skipped: needs gcc and {} (static glibc)", libc_a.display());
        return;
    }
    let (_d, dir) = tempdir();
    let src = write(&dir.join("s.c"), STATIC_C);
    let exe = dir.join("s");
    let cc = Command::new("gcc")
        .args(["-static", "-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .status();
    assert!(cc.unwrap().success(), "gcc -static failed");
    let input = write(&dir.join("in.txt"), "data");
    let script = write(&dir.join("script"), "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let argv = [
        exe.to_str().unwrap(),
        input.to_str().unwrap(),
        "out.txt",
        "script",
    ];
    let (st, t) = traced(&dir, &argv);
    assert_eq!(st.code(), Some(0), "the script ran through execveat");
    assert!(entry(&t, &exe).exec);
    assert!(entry(&t, &input).read);
    assert!(
        entry(&t, &dir.join("out.txt")).write,
        "openat2 flags read from open_how"
    );
    assert!(
        entry(&t, &script).exec,
        "execveat AT_EMPTY_PATH resolved through the fd"
    );
}

#[test]
fn python_open_dirfd_thread_and_nested_import_are_recorded() {
    let Some(py) = on_path("python3") else {
        return eprintln!("skipped: no python3");
    };
    let (_d, dir) = tempdir();
    let sub = dir.join("lib/pkg/sub");
    std::fs::create_dir_all(&sub).unwrap();
    write(&dir.join("lib/pkg/__init__.py"), "");
    write(&sub.join("__init__.py"), "");
    let module = write(&sub.join("mod.py"), "VALUE = 42\n");
    let a = write(&dir.join("a.txt"), "a");
    let b = write(&dir.join("b.txt"), "b");
    let c = write(&dir.join("c.txt"), "c");
    let code = format!(
        "import os, sys, threading\n\
         sys.path.insert(0, {lib:?})\n\
         open({a:?}).read()\n\
         fd = os.open({dir:?}, os.O_RDONLY)\n\
         os.close(os.open('b.txt', os.O_RDONLY, dir_fd=fd))\n\
         t = threading.Thread(target=lambda: open({c:?}).read()); t.start(); t.join()\n\
         import pkg.sub.mod\n\
         assert pkg.sub.mod.VALUE == 42\n",
        lib = dir.join("lib").to_str().unwrap(),
        a = a.to_str().unwrap(),
        dir = dir.to_str().unwrap(),
        c = c.to_str().unwrap(),
    );
    let (st, t) = traced(Path::new("/"), &[py.to_str().unwrap(), "-B", "-c", &code]);
    assert!(st.success());
    for f in [&a, &b, &c, &module, &dir.join("lib/pkg/__init__.py")] {
        assert!(entry(&t, f).read, "{}", f.display());
    }
}

#[test]
fn script_and_its_interpreter_are_executed() {
    let (_d, dir) = tempdir();
    let f = write(&dir.join("data"), "d");
    let script = write(
        &dir.join("run.sh"),
        &format!("#!/bin/sh\ncat {}\n", f.display()),
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (st, t) = traced(&dir, &["./run.sh"]);
    assert!(st.success());
    assert!(entry(&t, &script).exec);
    let sh = Path::new("/bin/sh").canonicalize().unwrap();
    assert!(
        entry(&t, &sh).exec,
        "interpreter {} (from /proc/PID/exe)",
        sh.display()
    );
    assert!(entry(&t, &f).read);
}

/// As root, re-runs under `setpriv` as nobody: TRACEME + seccomp with NO_NEW_PRIVS.
#[test]
fn works_unprivileged() {
    let (_d, dir) = tempdir();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let f = write(&dir.join("world.txt"), "w");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = dir.join("t.json");
    let mut cmd = Command::new(BIN);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let Some(setpriv) = on_path("setpriv") else {
            return eprintln!("skipped: running as root and no setpriv (util-linux)");
        };
        let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"];
        let can = Command::new(&setpriv)
            .args(nobody)
            .args(["test", "-x", BIN])
            .status();
        if !can.unwrap().success() {
            return eprintln!("skipped: {BIN} is not executable by uid 65534");
        }
        cmd = Command::new(setpriv);
        cmd.args(nobody).arg(BIN);
    }
    cmd.arg("--out")
        .arg(&out)
        .args(["--", "cat"])
        .arg(&f)
        .current_dir(&dir);
    assert!(wait_bounded(cmd.stdout(Stdio::null()).spawn().unwrap()).success());
    let t = read_trace(&out).unwrap();
    assert_eq!(t.status, TraceStatus::Complete, "{:?}", t.reason);
    assert!(entry(&t, &f).read);
}

/// aorta-trace under aorta-trace: the inner child's TRACEME fails (it is already traced by
/// the outer tracer), so the inner trace is unavailable but the command runs, its status
/// passes through both, and the outer trace sees the inner command's files.
#[test]
fn nested_tracer_falls_back_and_outer_sees_everything() {
    let (_d, dir) = tempdir();
    let f = write(&dir.join("nested.txt"), "n");
    let inner = dir.join("inner.json");
    let cmd = format!("cat {} > /dev/null; exit 3", f.display());
    let argv = [
        BIN,
        "--out",
        inner.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &cmd,
    ];
    let (st, outer) = traced(&dir, &argv);
    assert_eq!(st.code(), Some(3));
    let inner = read_trace(&inner).unwrap();
    assert_eq!(inner.status, TraceStatus::Unavailable);
    // ptrace: the outer tracer already traces the child (TRACEME refused); user
    // notifications: a filter chain has one listener (EBUSY).
    let reason = inner.reason.as_deref().unwrap();
    assert!(
        reason.contains("PTRACE_TRACEME") || reason.contains("os error 16"),
        "{inner:?}"
    );
    assert_eq!(outer.status, TraceStatus::Complete);
    assert!(entry(&outer, &f).read);
}

const NO_SECCOMP_C: &str = r#"
#include <errno.h>
#include <stddef.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
int main(int argc, char **argv) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_seccomp, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog p = { 4, f };
    if (argc < 2 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p)) return 99;
    execvp(argv[1], argv + 1);
    return 98;
}
"#;

/// seccomp(2) refused (a sandbox's filter answers EPERM): ptrace works but no filter can be
/// installed; the command runs, its status passes through, the trace is unavailable.
#[test]
fn seccomp_refused_still_runs_the_command() {
    if on_path("gcc").is_none() {
        return eprintln!("skipped: needs gcc to build the seccomp-denying wrapper");
    }
    let (_d, dir) = tempdir();
    let src = write(&dir.join("deny.c"), NO_SECCOMP_C);
    let deny = dir.join("deny");
    let cc = Command::new("gcc").arg("-o").arg(&deny).arg(&src).status();
    assert!(cc.unwrap().success(), "gcc failed");
    let out = dir.join("t.json");
    let mut cmd = Command::new(&deny);
    cmd.args([
        BIN,
        "--out",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 6",
    ]);
    assert_eq!(wait_bounded(cmd.spawn().unwrap()).code(), Some(6));
    let t = read_trace(&out).unwrap();
    assert_eq!(t.status, TraceStatus::Unavailable);
    let reason = t.reason.unwrap();
    assert!(reason.contains("seccomp filter not installed"), "{reason}");
}

#[test]
fn two_thousand_opens_complete() {
    let (_d, dir) = tempdir();
    let many = dir.join("many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..2000 {
        std::fs::write(many.join(format!("f{i:04}")), "").unwrap();
    }
    let script = format!("for f in {}/*; do : < \"$f\"; done", many.display());
    let started = Instant::now();
    let (st, t) = traced(&dir, &["sh", "-c", &script]);
    assert!(st.success());
    let n = t
        .files
        .iter()
        .filter(|f| f.os_path().starts_with(&many) && f.read)
        .count();
    assert_eq!(n, 2001, "2000 files + the directory listing");
    eprintln!("2000 opens traced in {:?}", started.elapsed());
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The tracer ignores SIGTERM; a SIGTERM to the whole group reaches the tracee's handler.
#[test]
fn sigterm_goes_to_the_tracees_not_the_tracer() {
    let (_d, dir) = tempdir();
    let out = dir.join("t.json");
    let mut cmd = Command::new(BIN);
    cmd.arg("--out")
        .arg(&out)
        .args(["--", "sh", "-c", ": > started; sleep 0.5; exit 4"])
        .current_dir(&dir);
    let c = cmd.spawn().unwrap();
    wait_for("start", || dir.join("started").exists());
    // SAFETY: signalling the child we just spawned.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    assert_eq!(
        wait_bounded(c).code(),
        Some(4),
        "the tracer survived SIGTERM"
    );

    let body = "trap 'exit 5' TERM; : > ready; while :; do sleep 0.05; done";
    let mut cmd = Command::new(BIN);
    cmd.arg("--out")
        .arg(&out)
        .args(["--", "sh", "-c", body])
        .current_dir(&dir);
    let c = cmd.process_group(0).spawn().unwrap();
    wait_for("ready", || dir.join("ready").exists());
    // SAFETY: signalling the process group of the child we just spawned.
    unsafe { libc::kill(-(c.id() as i32), libc::SIGTERM) };
    assert_eq!(wait_bounded(c).code(), Some(5), "the tracee's trap ran");
    assert!(entry(&read_trace(&out).unwrap(), &dir.join("ready")).write);
}

fn proc_state(pid: &str) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].chars().next()
}

/// A group-stop is left stopped (an external SIGSTOP freezes the tracee), and SIGKILL of
/// the frozen main child makes aorta-trace die of SIGKILL.
#[test]
fn sigstop_freezes_a_tracee_and_sigkill_ends_it() {
    let (_d, dir) = tempdir();
    let out = dir.join("t.json");
    let body = "echo $$ > pid.tmp && mv pid.tmp pid && exec sleep 30";
    let mut cmd = Command::new(BIN);
    cmd.arg("--out")
        .arg(&out)
        .args(["--", "sh", "-c", body])
        .current_dir(&dir);
    let c = cmd.spawn().unwrap();
    wait_for("pid", || dir.join("pid").exists());
    let pid = std::fs::read_to_string(dir.join("pid"))
        .unwrap()
        .trim()
        .to_string();
    let comm = format!("/proc/{pid}/comm");
    wait_for("exec", || {
        std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() == "sleep")
    });
    let n: i32 = pid.parse().unwrap();
    // SAFETY: signalling a process of our test's tree.
    unsafe { libc::kill(n, libc::SIGSTOP) };
    wait_for("stop", || matches!(proc_state(&pid), Some('t' | 'T')));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        matches!(proc_state(&pid), Some('t' | 'T')),
        "resumed: {:?}",
        proc_state(&pid)
    );
    // SAFETY: as above.
    unsafe { libc::kill(n, libc::SIGKILL) };
    assert_eq!(wait_bounded(c).signal(), Some(libc::SIGKILL));
}

/// A stray still running when the main child exits is killed (PTRACE_O_EXITKILL) as soon as
/// aorta-trace exits; aorta-trace does not wait for it.
#[test]
fn strays_die_with_the_tracer() {
    let (_d, dir) = tempdir();
    let started = Instant::now();
    let (st, _) = traced(&dir, &["sh", "-c", "setsid sleep 30 & echo $! > stray"]);
    assert!(st.success());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "waited for the stray"
    );
    let pid = std::fs::read_to_string(dir.join("stray")).unwrap();
    let pid = pid.trim().to_string();
    wait_for("the stray's death", || {
        matches!(proc_state(&pid), None | Some('Z'))
    });
}

#[test]
fn bad_arguments_print_usage_and_exit_2() {
    for args in [
        &[][..],
        &["--out"],
        &["--out", "t.json", "true"],
        &["--out", "/no/dir/t", "--", "true"],
    ] {
        let o = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("usage: aorta-trace"));
    }
}
