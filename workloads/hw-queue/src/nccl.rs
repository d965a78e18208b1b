//! NCCL, loaded by full path: the pip wheel ships only `libnccl.so.2`, a name cudarc's loader
//! does not try, so the library is found here (AORTA_NCCL_LIB, NCCL_LIB, then the
//! site-packages of python3 and /opt/torch/.venv, then the loader's own search) and called
//! through cudarc's NCCL types.

use std::ffi::{c_int, c_void, CStr};
use std::path::PathBuf;

use cudarc::nccl::sys::{
    cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId,
};
use libloading::Library;

type Buf = *const c_void;
type MutBuf = *mut c_void;

pub struct Nccl {
    _lib: Library,
    pub path: String,
    get_version: unsafe extern "C" fn(*mut c_int) -> ncclResult_t,
    get_unique_id: unsafe extern "C" fn(*mut ncclUniqueId) -> ncclResult_t,
    comm_init_rank:
        unsafe extern "C" fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int) -> ncclResult_t,
    comm_destroy: unsafe extern "C" fn(ncclComm_t) -> ncclResult_t,
    error_string: unsafe extern "C" fn(ncclResult_t) -> *const std::ffi::c_char,
    all_reduce: unsafe extern "C" fn(
        Buf,
        MutBuf,
        usize,
        ncclDataType_t,
        ncclRedOp_t,
        ncclComm_t,
        cudaStream_t,
    ) -> ncclResult_t,
    all_gather: unsafe extern "C" fn(
        Buf,
        MutBuf,
        usize,
        ncclDataType_t,
        ncclComm_t,
        cudaStream_t,
    ) -> ncclResult_t,
    reduce_scatter: unsafe extern "C" fn(
        Buf,
        MutBuf,
        usize,
        ncclDataType_t,
        ncclRedOp_t,
        ncclComm_t,
        cudaStream_t,
    ) -> ncclResult_t,
    send: unsafe extern "C" fn(
        Buf,
        usize,
        ncclDataType_t,
        c_int,
        ncclComm_t,
        cudaStream_t,
    ) -> ncclResult_t,
    recv: unsafe extern "C" fn(
        MutBuf,
        usize,
        ncclDataType_t,
        c_int,
        ncclComm_t,
        cudaStream_t,
    ) -> ncclResult_t,
    group_start: unsafe extern "C" fn() -> ncclResult_t,
    group_end: unsafe extern "C" fn() -> ncclResult_t,
}

/// Where to look for libnccl, in order.
pub fn candidates(get: impl Fn(&str) -> Option<String>, python_site: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["AORTA_NCCL_LIB", "NCCL_LIB"]
        .iter()
        .filter_map(|k| get(k))
        .map(PathBuf::from)
        .collect();
    for site in python_site {
        out.push(site.join("nvidia/nccl/lib/libnccl.so.2"));
    }
    out.extend(["libnccl.so.2", "libnccl.so"].map(PathBuf::from));
    out
}

/// site-packages of `python3` on PATH and of /opt/torch/.venv (glob over python3.*).
pub fn python_sites() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for py in ["python3", "/opt/torch/.venv/bin/python3"] {
        let r = std::process::Command::new(py)
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ])
            .stderr(std::process::Stdio::null())
            .output();
        if let Ok(o) = r {
            let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if o.status.success() && !p.is_empty() {
                out.push(PathBuf::from(p));
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir("/opt/torch/.venv/lib") {
        out.extend(rd.flatten().map(|e| e.path().join("site-packages")));
    }
    out
}

macro_rules! sym {
    ($lib:expr, $name:literal) => {
        // SAFETY: the signature matches nccl.h (as cudarc's bindings declare it).
        *unsafe { $lib.get($name) }
            .map_err(|e| format!("{}: {e}", String::from_utf8_lossy($name)))?
    };
}

impl Nccl {
    pub fn load(paths: &[PathBuf]) -> Result<Nccl, String> {
        let mut tried = Vec::new();
        for p in paths {
            let is_path = p.components().count() > 1;
            if is_path && !p.exists() {
                continue;
            }
            // SAFETY: loading NCCL runs its (trusted) initialisers only.
            match unsafe { Library::new(p) } {
                Ok(lib) => return Self::bind(lib, p.display().to_string()),
                Err(e) => tried.push(format!("{}: {e}", p.display())),
            }
        }
        Err(format!(
            "NCCL (libnccl.so.2) was not found{}: set AORTA_NCCL_LIB to its full path, e.g. \
             <site-packages>/nvidia/nccl/lib/libnccl.so.2 from the nvidia-nccl wheel",
            if tried.is_empty() {
                String::new()
            } else {
                format!(" ({})", tried.join("; "))
            }
        ))
    }

    fn bind(lib: Library, path: String) -> Result<Nccl, String> {
        Ok(Nccl {
            get_version: sym!(lib, b"ncclGetVersion"),
            get_unique_id: sym!(lib, b"ncclGetUniqueId"),
            comm_init_rank: sym!(lib, b"ncclCommInitRank"),
            comm_destroy: sym!(lib, b"ncclCommDestroy"),
            error_string: sym!(lib, b"ncclGetErrorString"),
            all_reduce: sym!(lib, b"ncclAllReduce"),
            all_gather: sym!(lib, b"ncclAllGather"),
            reduce_scatter: sym!(lib, b"ncclReduceScatter"),
            send: sym!(lib, b"ncclSend"),
            recv: sym!(lib, b"ncclRecv"),
            group_start: sym!(lib, b"ncclGroupStart"),
            group_end: sym!(lib, b"ncclGroupEnd"),
            _lib: lib,
            path,
        })
    }

    pub fn ck(&self, r: ncclResult_t, what: &str) -> Result<(), String> {
        if r == ncclResult_t::ncclSuccess {
            return Ok(());
        }
        // SAFETY: NCCL returns a static string.
        let s = unsafe { CStr::from_ptr((self.error_string)(r)) }
            .to_string_lossy()
            .into_owned();
        Err(format!("{what}: {r:?} ({s})"))
    }

    /// Opens a group: the calls up to [`Nccl::group_end`] are issued together (several ranks
    /// driven from one thread, or grouped sends and receives).
    pub fn group_start(&self) -> Result<(), String> {
        // SAFETY: no arguments.
        self.ck(unsafe { (self.group_start)() }, "ncclGroupStart")
    }

    /// Closes the group [`Nccl::group_start`] opened, launching its calls.
    pub fn group_end(&self) -> Result<(), String> {
        // SAFETY: no arguments.
        self.ck(unsafe { (self.group_end)() }, "ncclGroupEnd")
    }

    pub fn version(&self) -> Result<i32, String> {
        let mut v = 0;
        // SAFETY: valid out-pointer.
        self.ck(unsafe { (self.get_version)(&mut v) }, "ncclGetVersion")?;
        Ok(v)
    }

    pub fn unique_id(&self) -> Result<[u8; 128], String> {
        // SAFETY: ncclUniqueId is a plain C array of bytes: all zeroes is a valid value.
        let mut id: ncclUniqueId = unsafe { std::mem::zeroed() };
        // SAFETY: a valid out-pointer to an ncclUniqueId.
        self.ck(unsafe { (self.get_unique_id)(&mut id) }, "ncclGetUniqueId")?;
        Ok(id.internal.map(|c| c as u8))
    }

    /// Collective: every rank calls it with the same id (a CUDA context must be current).
    pub fn init(&self, id: &[u8; 128], world: u32, rank: u32) -> Result<ncclComm_t, String> {
        // SAFETY: ncclUniqueId is a plain C array of bytes: all zeroes is a valid value.
        let mut cid: ncclUniqueId = unsafe { std::mem::zeroed() };
        for (d, s) in cid.internal.iter_mut().zip(id) {
            *d = *s as std::ffi::c_char;
        }
        let mut comm = std::ptr::null_mut();
        self.ck(
            // SAFETY: valid out-pointer; id from ncclGetUniqueId on rank 0.
            unsafe { (self.comm_init_rank)(&mut comm, world as c_int, cid, rank as c_int) },
            "ncclCommInitRank",
        )?;
        Ok(comm)
    }

    /// # Safety
    /// `comm` comes from `init` and is not used afterwards.
    pub unsafe fn destroy(&self, comm: ncclComm_t) {
        // SAFETY: the caller's contract above: `comm` is a live communicator from `init`.
        unsafe { (self.comm_destroy)(comm) };
    }

    // The collectives.
    // # Safety (all): device pointers of at least the given counts, a live communicator, a
    // stream of the current context.
    /// # Safety
    /// See above.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn all_reduce(
        &self,
        s: Buf,
        r: MutBuf,
        n: usize,
        dt: ncclDataType_t,
        op: ncclRedOp_t,
        c: ncclComm_t,
        st: cudaStream_t,
    ) -> Result<(), String> {
        self.ck(
            // SAFETY: the caller upholds this function's contract (see "The collectives").
            unsafe { (self.all_reduce)(s, r, n, dt, op, c, st) },
            "ncclAllReduce",
        )
    }
    /// # Safety
    /// See above.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn all_gather(
        &self,
        s: Buf,
        r: MutBuf,
        n: usize,
        dt: ncclDataType_t,
        c: ncclComm_t,
        st: cudaStream_t,
    ) -> Result<(), String> {
        self.ck(
            // SAFETY: the caller upholds this function's contract (see "The collectives").
            unsafe { (self.all_gather)(s, r, n, dt, c, st) },
            "ncclAllGather",
        )
    }
    /// # Safety
    /// See above.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn reduce_scatter(
        &self,
        s: Buf,
        r: MutBuf,
        n: usize,
        dt: ncclDataType_t,
        c: ncclComm_t,
        st: cudaStream_t,
    ) -> Result<(), String> {
        self.ck(
            // SAFETY: the caller upholds this function's contract (see "The collectives").
            unsafe { (self.reduce_scatter)(s, r, n, dt, ncclRedOp_t::ncclSum, c, st) },
            "ncclReduceScatter",
        )
    }
    /// all_to_all as grouped send/recv of `chunk` elements per peer (`bytes` per element).
    /// # Safety
    /// See above; the counts are `world * chunk` elements in each of `s` and `r`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn all_to_all(
        &self,
        s: u64,
        r: u64,
        chunk: usize,
        bytes: usize,
        world: u32,
        dt: ncclDataType_t,
        c: ncclComm_t,
        st: cudaStream_t,
    ) -> Result<(), String> {
        self.group_start()?;
        for j in 0..world as usize {
            let off = (j * chunk * bytes) as u64;
            // SAFETY: the caller's contract: `s` and `r` hold `world * chunk` elements of `bytes`
            // bytes, so peer j's `chunk` elements at `off` are in bounds; live communicator, stream.
            let a = self.ck(
                unsafe { (self.send)((s + off) as Buf, chunk, dt, j as c_int, c, st) },
                "ncclSend",
            );
            // SAFETY: as for the send just above.
            let b = self.ck(
                unsafe { (self.recv)((r + off) as MutBuf, chunk, dt, j as c_int, c, st) },
                "ncclRecv",
            );
            if let Err(e) = a.and(b) {
                let _ = self.group_end();
                return Err(e);
            }
        }
        self.group_end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_order_is_env_then_sites_then_loader() {
        let c = candidates(
            |k| (k == "NCCL_LIB").then(|| "/x/libnccl.so.2".into()),
            &[PathBuf::from("/site")],
        );
        assert_eq!(c[0], PathBuf::from("/x/libnccl.so.2"));
        assert_eq!(c[1], PathBuf::from("/site/nvidia/nccl/lib/libnccl.so.2"));
        assert_eq!(c.last().unwrap(), &PathBuf::from("libnccl.so"));
    }

    #[test]
    fn missing_nccl_is_a_clear_error() {
        let e = Nccl::load(&[
            PathBuf::from("/nonexistent/libnccl.so.2"),
            PathBuf::from("libnccl-not-here.so.2"),
        ])
        .err()
        .unwrap();
        assert!(e.contains("AORTA_NCCL_LIB"), "{e}");
    }
}
