//! Running trial processes correctly (Linux).
//!
//! - [`run`] executes one [`ProcessSpec`] (started without a fork of aorta: `spawn.rs`): the
//!   child gets its own session and process group,
//!   its stdout/stderr go straight to files, and every process of its tree — including
//!   grandchildren that daemonise with `setsid` or a double fork — is tracked by (pid, start
//!   time) and torn down on timeout, cancel, hang kill, or when the root exits and leaves
//!   strays behind: SIGTERM to group and members → `kill_grace` → SIGSTOP freeze, rescan,
//!   SIGKILL; then reap. aorta's own group is never signalled.
//! - Where the machine allows it, each trial runs in a cgroup of its own ([`containment`],
//!   `contain.rs`): members that left the session and cleared their environment are still
//!   found, and a keeper process ends every trial process if aorta is killed.
//! - A hang monitor ([`HangConfig`]) samples the whole tree: output files, `/proc/<pid>/io`,
//!   CPU time, and an optional GPU probe; [`hang_predicate`] is the pure vote. A silent tree
//!   that burns CPU is judged by its stacks (py-spy, eu-stack or gdb): the same thread waiting
//!   in a synchronize or collective a window apart is a hang ([`HangReport`]).
//! - [`CancelToken`] and [`install_interrupt_handler`]: first Ctrl-C tears trials down
//!   gracefully, the second SIGKILLs every live tree.
//! - [`Pool`] runs trials in parallel within [`Slots`], giving GPU trials exclusive devices
//!   through `CUDA_VISIBLE_DEVICES` / `HIP_VISIBLE_DEVICES`; a slot is held only by a trial's
//!   process ([`Pool::submit_staged`], [`SlotRelease`]). [`start`] and [`Started::wait`] are
//!   [`run`] in two halves for it.
//!
//! - [`pidfd_open`] and [`wait_readable`]: the one way the project opens and waits on process
//!   descriptors (the runner, the tree's signals, the probe's helper tools).
//!
//! `docs/exec.md` describes the protocol and how it differs from AORTA 0.2.1.

mod cancel;
mod contain;
mod hang;
mod pidfd;
mod pool;
mod procfs;
mod program;
mod run;
mod slots;
mod spawn;
mod stacks;
mod tree;

pub use cancel::{install_interrupt_handler, kill_all_trials, live_trials, CancelToken};
pub use contain::{containment, shutdown as shutdown_containment, Containment, CONTAINMENT_VAR};
pub use hang::{
    hang_predicate, GpuIdleFn, HangConfig, HangDetector, HangReport, HangSample, HangSignals,
};
pub use pidfd::{pidfd_open, wait_readable};
pub use pool::{Pool, SlotRelease};
pub use program::{find_cuda_tool, find_program, is_executable_file};
pub use run::{
    is_posix_name, prepare, resolve_program, run, start, thread_cpu_time, validate_env, Prepared,
    ProcessOutcome, ProcessSpec, SpawnError, Started, DEFAULT_KILL_GRACE, EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND, EXIT_TIMEOUT, HANG_STACKS_FILE,
};
pub use slots::{Lease, SlotError, SlotRequest, Slots};
pub use spawn::spawns_into_cgroup;
pub use stacks::{
    discover as discover_stack_samplers, is_wait_frame, Sampler as StackSampler,
    SamplerKind as StackSamplerKind,
};
pub use tree::{ensure_subreaper, ProcId, TOKEN_VAR};
