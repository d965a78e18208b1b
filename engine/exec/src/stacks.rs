//! Hang evidence from stack samples: a tree that spins in a CUDA synchronize or an NCCL
//! collective burns CPU, so the hang monitor's CPU veto rules it out; its stacks do not lie.
//!
//! Samplers, tried per process in this order: `py-spy dump` (Python stacks; looked for in the
//! configured directories, then on `PATH`), `eu-stack` and `gdb -batch` (native stacks, on
//! `PATH`). Each dump is parsed into threads of frames. A thread is *waiting* when one of its
//! frames is a CUDA/HIP synchronize, an NCCL/RCCL call, or a `torch.distributed` collective or
//! barrier ([`is_wait_frame`]). Two samples taken a hang window apart that show the same
//! waiting thread with the very same frames are the evidence ([`evidence`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::tree::ProcId;

/// The programs that can dump a process's stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplerKind {
    PySpy,
    EuStack,
    Gdb,
}

impl SamplerKind {
    fn name(self) -> &'static str {
        match self {
            SamplerKind::PySpy => "py-spy",
            SamplerKind::EuStack => "eu-stack",
            SamplerKind::Gdb => "gdb",
        }
    }
}

/// One sampler found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampler {
    pub kind: SamplerKind,
    pub path: PathBuf,
}

/// Finds the samplers: `py-spy` in `py_spy_dirs` (e.g. the configured Python's `bin`) or on
/// `PATH`, `eu-stack` and `gdb` on `PATH`. Python stacks first: they name the collective.
pub fn discover(py_spy_dirs: &[PathBuf]) -> Vec<Sampler> {
    let path_dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    let find = |name: &str, dirs: &mut dyn Iterator<Item = &PathBuf>| {
        dirs.map(|d| d.join(name)).find(|p| is_executable(p))
    };
    let mut out = Vec::new();
    if let Some(path) = find("py-spy", &mut py_spy_dirs.iter().chain(&path_dirs)) {
        out.push(Sampler {
            kind: SamplerKind::PySpy,
            path,
        });
    }
    for kind in [SamplerKind::EuStack, SamplerKind::Gdb] {
        if let Some(path) = find(kind.name(), &mut path_dirs.iter()) {
            out.push(Sampler { kind, path });
        }
    }
    out
}

use crate::program::is_executable_file as is_executable;

/// One thread's stack, innermost frame first, as function names (py-spy: `name (file:line)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStack {
    pub tid: u64,
    pub frames: Vec<String>,
}

/// What one process looked like in one sample: the dump's text and its threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessStacks {
    pub proc: ProcId,
    pub sampler: SamplerKind,
    pub text: String,
    pub threads: Vec<ThreadStack>,
}

/// How long one dump may take before it is abandoned (gdb loading CUDA's symbols is slow).
pub const DUMP_TIMEOUT: Duration = Duration::from_secs(15);

/// Dumps `proc`'s stacks with the first sampler that yields at least one thread.
pub fn sample(samplers: &[Sampler], proc: ProcId) -> Option<ProcessStacks> {
    samplers.iter().find_map(|s| {
        let pid = proc.pid.to_string();
        let args: Vec<&str> = match s.kind {
            // --nonblocking reads the process's memory without attaching (no ptrace stop): it
            // works on a command trial, whose processes aorta's input tracer already traces,
            // and a hung process is not moving anyway.
            SamplerKind::PySpy => vec!["dump", "--nonblocking", "--pid", &pid],
            SamplerKind::EuStack => vec!["-p", &pid],
            SamplerKind::Gdb => vec!["-batch", "-nx", "-p", &pid, "-ex", "thread apply all bt"],
        };
        let text = run_captured(&s.path, &args, DUMP_TIMEOUT)?;
        let threads = match s.kind {
            SamplerKind::PySpy => parse_py_spy(&text),
            SamplerKind::EuStack => parse_eu_stack(&text),
            SamplerKind::Gdb => parse_gdb(&text),
        };
        (!threads.is_empty()).then_some(ProcessStacks {
            proc,
            sampler: s.kind,
            text,
            threads,
        })
    })
}

/// Runs `program args`, returns its stdout if it finished within `timeout` (killed otherwise).
fn run_captured(program: &Path, args: &[&str], timeout: Duration) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    reader
        .join()
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// `py-spy dump`: `Thread 123 (idle): "MainThread"` then four-space-indented `name (file:line)`.
pub fn parse_py_spy(text: &str) -> Vec<ThreadStack> {
    let mut threads: Vec<ThreadStack> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Thread ") {
            let id = rest.split_whitespace().next().unwrap_or("");
            let tid = id
                .strip_prefix("0x")
                .map_or_else(|| id.parse().ok(), |h| u64::from_str_radix(h, 16).ok());
            if let Some(tid) = tid {
                threads.push(ThreadStack {
                    tid,
                    frames: Vec::new(),
                });
            }
        } else if let (Some(frame), Some(t)) = (line.strip_prefix("    "), threads.last_mut()) {
            let frame = frame.trim();
            // Local variables (--locals) are indented further and hold no frame.
            if !frame.is_empty() && !line.starts_with("        ") {
                t.frames.push(frame.to_string());
            }
        }
    }
    threads
}

/// `eu-stack -p`: `TID 123:` then `#0  0x00007f... function` lines.
pub fn parse_eu_stack(text: &str) -> Vec<ThreadStack> {
    let mut threads: Vec<ThreadStack> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("TID ") {
            if let Ok(tid) = rest.trim_end_matches(':').trim().parse() {
                threads.push(ThreadStack {
                    tid,
                    frames: Vec::new(),
                });
            }
        } else if let (Some(rest), Some(t)) = (frame_body(line), threads.last_mut()) {
            // `0x00007f...  name` or `0x00007f... - 1 name`; no name when symbols are missing.
            let name = rest
                .split_whitespace()
                .find(|w| !w.starts_with("0x") && *w != "-" && w.parse::<u64>().is_err());
            t.frames.push(name.unwrap_or("??").to_string());
        }
    }
    threads
}

/// `gdb -batch -ex "thread apply all bt"`: `Thread 2 (Thread 0x7f... (LWP 123) "name"):` then
/// `#0  0x00007f... in function (args) at file:line` (the address is absent in frame 0 at times).
pub fn parse_gdb(text: &str) -> Vec<ThreadStack> {
    let mut threads: Vec<ThreadStack> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Thread ") && line.contains("(LWP ") {
            let tid = line
                .split("(LWP ")
                .nth(1)
                .and_then(|r| r.split(')').next())
                .and_then(|n| n.trim().parse().ok());
            if let Some(tid) = tid {
                threads.push(ThreadStack {
                    tid,
                    frames: Vec::new(),
                });
            }
        } else if let (Some(rest), Some(t)) = (frame_body(line), threads.last_mut()) {
            let rest = rest.split_once(" in ").map_or(rest, |(_, r)| r);
            let name = rest.split([' ', '(']).next().unwrap_or("??");
            t.frames.push(name.to_string());
        }
    }
    threads
}

/// The text after `#<n>` of a frame line.
fn frame_body(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('#')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0).then(|| rest[digits..].trim())
}

/// Native functions that block on the GPU or on other ranks.
const NATIVE_WAITS: &[&str] = &[
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
    "hipDeviceSynchronize",
    "hipStreamSynchronize",
    "hipEventSynchronize",
    "ncclAllReduce",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclBroadcast",
    "ncclReduce",
    "ncclAlltoAll",
    "ncclSend",
    "ncclRecv",
    "ncclGroupEnd",
    "ncclCommInitRank",
    "ncclCommSplit",
    "device_synchronize",
    "WorkNCCL::wait",
    "WorkNCCL::synchronize",
    "ProcessGroupNCCL::barrier",
];

/// Python functions that are collectives or a GPU synchronize whatever file defines them.
const PY_COLLECTIVES: &[&str] = &[
    "all_reduce",
    "all_gather",
    "all_gather_object",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "monitored_barrier",
    "broadcast_object_list",
];

/// Python functions that wait only when torch defines them (`barrier`, `synchronize`, …).
const PY_TORCH_WAITS: &[&str] = &[
    "barrier",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "send",
    "recv",
    "synchronize",
    "wait",
];

/// Whether a frame blocks on the GPU or on other ranks. Generic waits (a futex, `poll`,
/// `threading.Condition.wait`, NCCL's own watchdog thread) do not count by themselves: idle
/// helper threads of a healthy job sit in them all day.
pub fn is_wait_frame(frame: &str) -> bool {
    if let Some((name, location)) = frame.split_once(" (") {
        // py-spy: `name (path/file.py:line)`
        let torch = location.contains("torch/distributed")
            || location.contains("torch/cuda")
            || location.contains("c10d");
        return PY_COLLECTIVES.contains(&name) || (torch && PY_TORCH_WAITS.contains(&name));
    }
    NATIVE_WAITS.iter().any(|w| frame.contains(w))
}

/// The first waiting thread of a process that shows the very same frames in both samples,
/// as `pid <pid> thread <tid>: <innermost waiting frame>`.
pub fn evidence(earlier: &[ProcessStacks], later: &[ProcessStacks]) -> Option<String> {
    for p in later {
        let Some(before) = earlier.iter().find(|e| e.proc == p.proc) else {
            continue;
        };
        for t in &p.threads {
            let Some(wait) = t.frames.iter().find(|f| is_wait_frame(f)) else {
                continue;
            };
            if before
                .threads
                .iter()
                .any(|b| b.tid == t.tid && b.frames == t.frames)
            {
                return Some(format!("pid {} thread {}: {wait}", p.proc.pid, t.tid));
            }
        }
    }
    None
}

/// The samples as one text: a header per process, then the sampler's own output.
pub fn render(label: &str, samples: &[ProcessStacks]) -> String {
    let mut out = String::new();
    for s in samples {
        out.push_str(&format!(
            "=== {label}: pid {} ({}) ===\n",
            s.proc.pid,
            s.sampler.name()
        ));
        out.push_str(s.text.trim_end());
        out.push_str("\n\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PY_SPY: &str = r#"Process 13006: /usr/bin/python3 /tmp/stub.py child
Python v3.11.7 (/usr/bin/python3.11)

Thread 13006 (idle): "MainThread"
    all_reduce (stub.py:3)
    <module> (stub.py:5)
Thread 0x7F3A2B5FF640 (idle): "Thread-1 (_pin_memory_loop)"
    wait (threading.py:324)
        Arguments:
            self: <Condition at 0x7f3a>
    _pin_memory_loop (torch/utils/data/_utils/pin_memory.py:51)
"#;

    const GDB: &str = r#"[Thread debugging using libthread_db enabled]
0x00007f57012a3d61 in __futex_abstimed_wait_common64 (private=0, cancel=true) at ./nptl/futex-internal.c:57

Thread 2 (Thread 0x7f56f9bff6c0 (LWP 4130) "pt_nccl_watchdg"):
#0  0x00007f57012a3d61 in __futex_abstimed_wait_common64 (private=0) at ./nptl/futex-internal.c:57
#1  0x00007f5701234567 in std::condition_variable::wait_for () from /lib/libstdc++.so.6
#2  0x00007f56e1234567 in c10d::ProcessGroupNCCL::ncclCommWatchdog() () from /torch/lib/libtorch_cuda.so

Thread 1 (Thread 0x7f5701a4e740 (LWP 4121) "python3"):
#0  0x00007f56d0012345 in ?? () from /lib/x86_64-linux-gnu/libcuda.so.1
#1  0x00007f56d0054321 in ?? () from /lib/x86_64-linux-gnu/libcuda.so.1
#2  0x00007f56e0a11111 in cudaDeviceSynchronize () from /torch/lib/libcudart.so.12
#3  0x00007f56e1222222 in c10::cuda::device_synchronize() () from /torch/lib/libc10_cuda.so
#4  _PyEval_EvalFrameDefault (tstate=0x1) at Python/ceval.c:5190
[Inferior 1 (process 4121) detached]
"#;

    const EU_STACK: &str = r#"PID 4121 - process
TID 4121:
#0  0x00007f56d0012345
#1  0x00007f56e0a11111 cudaStreamSynchronize
#2  0x00007f56e1222222 - 1 at::native::_local_scalar_dense_cuda
TID 4130:
#0  0x00007f57012a3d61 __futex_abstimed_wait_common64
#1  0x00007f56e1234567 c10d::ProcessGroupNCCL::ncclCommWatchdog()
"#;

    fn proc(pid: u32) -> ProcId {
        ProcId { pid, start_time: 7 }
    }

    fn stacks(text: &str, kind: SamplerKind) -> ProcessStacks {
        let threads = match kind {
            SamplerKind::PySpy => parse_py_spy(text),
            SamplerKind::EuStack => parse_eu_stack(text),
            SamplerKind::Gdb => parse_gdb(text),
        };
        ProcessStacks {
            proc: proc(4121),
            sampler: kind,
            text: text.to_string(),
            threads,
        }
    }

    #[test]
    fn py_spy_threads_and_frames_without_locals() {
        let t = parse_py_spy(PY_SPY);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[0],
            ThreadStack {
                tid: 13006,
                frames: vec![
                    "all_reduce (stub.py:3)".into(),
                    "<module> (stub.py:5)".into()
                ]
            }
        );
        assert_eq!(t[1].tid, 0x7F3A2B5FF640);
        assert_eq!(
            t[1].frames,
            [
                "wait (threading.py:324)",
                "_pin_memory_loop (torch/utils/data/_utils/pin_memory.py:51)"
            ]
        );
    }

    #[test]
    fn gdb_threads_and_function_names() {
        let t = parse_gdb(GDB);
        assert_eq!(t.iter().map(|t| t.tid).collect::<Vec<_>>(), [4130, 4121]);
        assert_eq!(
            t[0].frames,
            [
                "__futex_abstimed_wait_common64",
                "std::condition_variable::wait_for",
                "c10d::ProcessGroupNCCL::ncclCommWatchdog"
            ]
        );
        assert_eq!(
            t[1].frames,
            [
                "??",
                "??",
                "cudaDeviceSynchronize",
                "c10::cuda::device_synchronize",
                "_PyEval_EvalFrameDefault"
            ]
        );
    }

    #[test]
    fn eu_stack_threads_and_function_names() {
        let t = parse_eu_stack(EU_STACK);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[0].frames,
            [
                "??",
                "cudaStreamSynchronize",
                "at::native::_local_scalar_dense_cuda"
            ]
        );
        assert_eq!(
            t[1].frames,
            [
                "__futex_abstimed_wait_common64",
                "c10d::ProcessGroupNCCL::ncclCommWatchdog()"
            ]
        );
    }

    #[test]
    fn wait_frames_are_gpu_and_collective_waits_not_idle_helpers() {
        for yes in [
            "all_reduce (stub.py:3)",
            "synchronize (torch/cuda/__init__.py:985)",
            "barrier (torch/distributed/distributed_c10d.py:4159)",
            "cudaDeviceSynchronize",
            "hipStreamSynchronize",
            "ncclGroupEnd",
            "c10d::ProcessGroupNCCL::WorkNCCL::wait(std::chrono::duration<long, std::ratio<1l, 1000l> >)",
        ] {
            assert!(is_wait_frame(yes), "{yes}");
        }
        for no in [
            "wait (threading.py:324)",
            "barrier (myapp/sync.py:10)",
            "recv (socket.py:700)",
            "__futex_abstimed_wait_common64",
            "poll",
            "c10d::ProcessGroupNCCL::ncclCommWatchdog",
            "<module> (train.py:3)",
        ] {
            assert!(!is_wait_frame(no), "{no}");
        }
    }

    #[test]
    fn evidence_needs_the_same_waiting_stack_in_both_samples() {
        let a = [stacks(GDB, SamplerKind::Gdb)];
        assert_eq!(
            evidence(&a, &a).as_deref(),
            Some("pid 4121 thread 4121: cudaDeviceSynchronize")
        );
        // The same with eu-stack: the synchronize thread, not the watchdog's futex.
        let e = [stacks(EU_STACK, SamplerKind::EuStack)];
        assert_eq!(
            evidence(&e, &e).as_deref(),
            Some("pid 4121 thread 4121: cudaStreamSynchronize")
        );
        // A frame moved between the samples: progress, not a hang.
        let moved = [stacks(
            &GDB.replace("#4  _PyEval", "#4  _PyEval_Other"),
            SamplerKind::Gdb,
        )];
        assert_eq!(evidence(&a, &moved), None);
        // Another process (pid reused: other start time) is not the same process.
        let mut other = a.clone();
        other[0].proc.start_time = 8;
        assert_eq!(evidence(&a, &other), None);
        // Identical stacks that wait on nothing in particular are no evidence.
        let idle =
            "Thread 9 (idle): \"MainThread\"\n    wait (threading.py:324)\n    run (app.py:9)\n";
        let idle = [stacks(idle, SamplerKind::PySpy)];
        assert_eq!(evidence(&idle, &idle), None);
    }

    #[test]
    fn render_names_each_process_and_sampler() {
        let r = render("sample 2", &[stacks(PY_SPY, SamplerKind::PySpy)]);
        assert!(
            r.starts_with("=== sample 2: pid 4121 (py-spy) ===\nProcess 13006"),
            "{r}"
        );
    }

    #[test]
    fn discover_finds_py_spy_in_a_given_dir_first() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("py-spy");
        std::fs::write(&fake, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let found = discover(&[dir.path().to_path_buf()]);
        assert_eq!(
            found.first(),
            Some(&Sampler {
                kind: SamplerKind::PySpy,
                path: fake
            })
        );
        // Not executable: not a sampler.
        std::fs::set_permissions(
            dir.path().join("py-spy"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        assert!(discover(&[dir.path().to_path_buf()])
            .first()
            .is_none_or(|s| s.path.parent() != Some(dir.path())));
    }

    #[test]
    fn a_sampler_that_outlives_its_timeout_is_killed() {
        let start = Instant::now();
        assert_eq!(
            run_captured(Path::new("sleep"), &["5"], Duration::from_millis(200)),
            None
        );
        assert!(start.elapsed() < Duration::from_secs(2));
        assert_eq!(
            run_captured(Path::new("echo"), &["hi"], Duration::from_secs(5)).as_deref(),
            Some("hi\n")
        );
    }
}
