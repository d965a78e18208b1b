//! Reading a stopped tracee's memory: NUL-terminated paths and `struct open_how`.
//!
//! `process_vm_readv` copies a whole chunk in one call; reads never cross a page boundary, so
//! a path that ends just before an unmapped page is still read (a read spanning into the
//! unmapped page would fail as a whole). Where the call is unavailable (ENOSYS, or refused by
//! a sandbox) it falls back to `PTRACE_PEEKDATA`, a word at a time.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

const PATH_MAX: usize = libc::PATH_MAX as usize;
static NO_VM_READV: AtomicBool = AtomicBool::new(false);

fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    // SAFETY: sysconf has no memory-safety preconditions.
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    })
}

/// Copies up to `buf.len()` bytes from `addr` in `pid`; fewer only at a fault.
fn read_chunk(pid: libc::pid_t, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    if !NO_VM_READV.load(Ordering::Relaxed) {
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as usize as *mut _,
            iov_len: buf.len(),
        };
        // SAFETY: `local` describes `buf`, which we own mutably; the remote address is only
        // interpreted by the kernel in the other process.
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOSYS) | Some(libc::EPERM) => NO_VM_READV.store(true, Ordering::Relaxed),
            _ => return Err(e),
        }
    }
    peek(pid, addr, buf)
}

/// `PTRACE_PEEKDATA` fallback (the tracee is in a ptrace-stop, which it requires).
fn peek(pid: libc::pid_t, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    const W: usize = std::mem::size_of::<libc::c_long>();
    let mut done = 0;
    while done < buf.len() {
        // Aligned word reads: never touch the page after the one holding the last byte.
        let at = addr + done as u64;
        let base = at & !(W as u64 - 1);
        let skip = (at - base) as usize;
        // SAFETY: errno is thread-local; clearing it distinguishes a -1 word from an error.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: PEEKDATA only reads the tracee; the result is returned by value.
        let word = unsafe { libc::ptrace(libc::PTRACE_PEEKDATA, pid, base as usize, 0usize) };
        if word == -1 && io::Error::last_os_error().raw_os_error() != Some(0) {
            return if done > 0 {
                Ok(done)
            } else {
                Err(io::Error::last_os_error())
            };
        }
        let bytes = word.to_ne_bytes();
        let n = (W - skip).min(buf.len() - done);
        buf[done..done + n].copy_from_slice(&bytes[skip..skip + n]);
        done += n;
    }
    Ok(done)
}

/// The NUL-terminated string at `addr` (without the NUL), read page by page up to
/// `PATH_MAX`; `None` if unreadable or unterminated (the kernel will fail the call too).
pub(crate) fn read_path(pid: libc::pid_t, addr: u64) -> Option<Vec<u8>> {
    let page = page_size() as u64;
    let mut buf = [0u8; PATH_MAX];
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < PATH_MAX {
        let to_page_end = (page - at % page) as usize;
        let want = to_page_end.min(PATH_MAX - out.len());
        let n = read_chunk(pid, at, &mut buf[..want]).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = buf[..n].iter().position(|b| *b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Some(out);
        }
        out.extend_from_slice(&buf[..n]);
        at += n as u64;
    }
    None
}

/// A native-endian u64 at `addr` (`open_how.flags` is the struct's first field).
pub(crate) fn read_u64(pid: libc::pid_t, addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    (read_chunk(pid, addr, &mut b).ok()? == 8).then(|| u64::from_ne_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pages, the second inaccessible: strings that end right at the boundary are read,
    /// one that runs into the guard page is not.
    #[test]
    fn reads_up_to_a_guard_page_in_a_real_process() {
        let page = page_size();
        // SAFETY: anonymous private mapping of two pages; unmapped at the end of the test.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        // SAFETY: the first page is ours and writable; the second becomes a guard page.
        let first = unsafe {
            assert_eq!(
                libc::mprotect(base.cast::<u8>().add(page).cast(), page, 0),
                0
            );
            std::slice::from_raw_parts_mut(base.cast::<u8>(), page)
        };
        first.fill(b'a');
        first[page - 1] = 0;
        let addr = base as u64;
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        let tail = addr + page as u64 - 6;
        assert_eq!(read_path(me, tail).as_deref(), Some(&b"aaaaa"[..]));
        let long = read_path(me, addr + 10).unwrap();
        assert_eq!(long.len(), page - 11);
        assert_eq!(read_u64(me, addr), Some(u64::from_ne_bytes(*b"aaaaaaaa")));
        first[page - 1] = b'a';
        assert_eq!(read_path(me, tail), None, "runs into the guard page");
        assert_eq!(read_u64(me, addr + page as u64 - 4), None);
        // SAFETY: unmapping the mapping created above; `first` is not used afterwards.
        unsafe { libc::munmap(base, 2 * page) };
    }
}
