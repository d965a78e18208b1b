//! Process descriptors (Linux ≥ 5.3): a handle on one process that a recycled pid can never
//! alias, readable once the process has exited. One place opens and waits on them: the trial
//! runner (run.rs), the tree's signals (tree.rs) and the probe's helper tools.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// A pidfd for `pid`; `Err` carries the errno (`ESRCH`: no such process; `ENOSYS`: a kernel
/// without pidfds).
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments; it returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Waits until `fd` is readable (for a pidfd: its process exited) or `timeout` passes, rounded
/// up to the next millisecond; a signal just ends the wait early.
pub fn wait_readable(fd: &OwnedFd, timeout: Duration) {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe {
        libc::poll(&mut pfd, 1, ms);
    }
}
