//! AORTA's own `env.json` (schema `1.N`: `1.7` from AORTA 0.2.1, `1.17` from 0.3.0) read into
//! an aorta [`Snapshot`], so `aorta env diff` compares it with aorta's snapshots and with other
//! AORTA files. This module is the edge: each AORTA field with a counterpart is read, typed, into
//! its aorta field; every field it does not read is listed in `probe.imported.not_compared` with
//! a digest of its value, so a diff says what it did not compare and, between two AORTA files,
//! which of those differ. What was read is recorded as it is read, so the list cannot drift
//! from the mapping.
//!
//! AORTA's probe is ROCm-centred: it records no NVIDIA device, driver or CUDA library, so an
//! imported snapshot of a CUDA machine holds the host, the runtime, torch and the env vars.

use crate::schema::{Imported, Linkage, NotCompared, PartialReason, Snapshot, SCHEMA_VERSION};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

/// `AORTA <release>` for the release that writes `schema`, where one release does: the one
/// place a file's origin is named (the import's `probe.imported.from`, the refusal to key).
pub(crate) fn release_label(schema: &str) -> Option<String> {
    let release = match schema {
        "1.7" => "0.2.1",
        "1.17" => "0.3.0",
        _ => return None,
    };
    Some(format!("AORTA {release}"))
}

/// AORTA's env.json schemas are `1.<minor>`.
pub(crate) fn is_aorta_schema(schema: &str) -> bool {
    schema
        .strip_prefix("1.")
        .is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
}

/// A field of AORTA's file that is not what AORTA writes there.
#[derive(Debug, thiserror::Error)]
#[error("field {path}: expected {expected}, found {found}")]
pub struct ImportError {
    /// AORTA's dotted path (`pytorch_build.debug`, `library_linkage.libraries.2.dt_tags`).
    pub path: String,
    pub expected: &'static str,
    pub found: &'static str,
}

/// Reads `doc`, AORTA's env.json with the given schema, into a snapshot.
pub(crate) fn import(doc: &Map<String, Value>, schema: &str) -> Result<Snapshot, ImportError> {
    let r = Reader {
        doc,
        read: RefCell::default(),
    };
    // Said in `probe.imported`.
    r.get("schema_version");
    let mut s = map(&r)?;
    s.probe.imported = Some(Imported {
        from: release_label(schema).unwrap_or_else(|| format!("AORTA (env.json schema {schema})")),
        schema_version: schema.to_string(),
        not_compared: not_compared(doc, &r.read.into_inner()),
    });
    Ok(s)
}

/// AORTA's fields, field by field, into aorta's (docs/env-snapshot.md, "Importing AORTA's
/// env.json", has the table).
fn map(r: &Reader) -> Result<Snapshot, ImportError> {
    let mut s = Snapshot {
        schema_version: SCHEMA_VERSION.to_string(),
        captured_at: r.scalar::<String>("captured_at")?,
        partial: r.scalar::<bool>("partial")?.unwrap_or(false),
        ..Snapshot::default()
    };
    // "field: reason" prose, AORTA's field paths kept.
    s.partial_reasons = r
        .strings("partial_reasons")?
        .into_iter()
        .map(|t| match t.split_once(": ") {
            Some((f, why)) => PartialReason {
                field: f.to_string(),
                reason: why.to_string(),
            },
            None => PartialReason {
                field: String::new(),
                reason: t,
            },
        })
        .collect();

    let h = &mut s.host;
    h.kernel_release = r.scalar::<String>("host.kernel_release")?;
    h.kernel_version = r.scalar::<String>("host.kernel_version")?;
    h.machine = r.scalar::<String>("host.machine")?;
    h.glibc_version = r.scalar::<String>("host.glibc_version")?;
    let rt = &mut h.runtime;
    rt.container = r.scalar::<String>("runtime_context.type")?;
    rt.python_env = r.scalar::<String>("runtime_context.python_env")?;
    rt.venv_path = r.scalar::<String>("runtime_context.venv_path")?;
    rt.conda_env = r.scalar::<String>("runtime_context.conda_env_name")?;
    rt.container_id = r.scalar::<String>("docker.container_id")?;
    rt.container_detected = r.scalar::<bool>("container_detected")?;
    rt.namespace = r.scalar::<String>("probe_namespace")?;
    // aorta writes no invocation for a plain probe.
    s.probe.invocation = r
        .scalar::<String>("execution_context.probe_invocation")?
        .filter(|i| i != "direct");

    // The amdgpu kernel module (the host's, also from inside a container). AORTA's package and
    // modinfo fields read this filesystem's package database and /lib/modules, not the loaded
    // module: no counterpart.
    let kmd = r.scalar::<String>("amdgpu_driver.kmd_version")?;
    let kfd = r.scalar::<bool>("amdgpu_driver.kfd_device_present")?;
    if kmd.is_some() || kfd == Some(true) {
        let d = &mut s.gpu.driver_identity;
        d.module = Some("amdgpu".into());
        d.module_version_source = kmd.as_ref().map(|_| "/sys/module/amdgpu/version".into());
        d.module_version = kmd;
        d.device_node = kfd;
    }

    let rocm = &mut s.rocm;
    rocm.version = r.scalar::<String>("rocm.version")?;
    rocm.version_dev = r.scalar::<String>("rocm.version_dev")?;
    rocm.kmd_version = r.scalar::<String>("rocm.kmd_version")?;
    // `none` means AORTA found no ROCm and wrote its default root anyway.
    let root = r.scalar::<String>("rocm.root")?;
    rocm.root_source = match r.scalar::<String>("rocm.root_source")?.as_deref() {
        None | Some("none") => None,
        Some("opt_rocm") => Some("/opt/rocm".into()),
        Some(s) if s.starts_with("import:") => Some("wheel".into()),
        Some(s) => Some(s.to_string()),
    };
    rocm.root = root.filter(|_| rocm.root_source.is_some());
    rocm.hip_platform = r.scalar::<String>("hip.platform")?;
    rocm.gpu_arch.agent_count = r.scalar::<u32>("gpu_arch.agent_count")?;
    rocm.gpu_arch.gfx_targets = r.strings("gpu_arch.gfx_targets")?;
    rocm.gpu_arch.agent_arch_counts = r.entries("gpu_arch.agent_arch_counts")?;
    let libs = &mut rocm.libraries;
    // `hipconfig --version`: `6.4.43482-0f2d60242`, the version and HIP's git hash, which aorta
    // reads from hip_version.h as `version` and `build`.
    if let Some(v) = r.scalar::<String>("hip.version")? {
        let hip = libs.entry("hip".to_string()).or_default();
        let (version, build) = match v.split_once('-') {
            Some((a, b)) => (a.to_string(), Some(b.to_string())),
            None => (v, None),
        };
        hip.version = Some(version);
        hip.build = build;
    }
    for (aorta, ours) in [
        ("hipblaslt", "hipblaslt"),
        ("rocblas", "rocblas"),
        ("miopen", "miopen"),
    ] {
        let lib = libs.entry(ours.to_string()).or_default();
        lib.version = r.scalar::<String>(&format!("{aorta}.package_version"))?;
        lib.build = r.scalar::<String>(&format!("{aorta}.rocm_release_tweak"))?;
    }
    let rccl = libs.entry("rccl".to_string()).or_default();
    rccl.version = r.scalar::<String>("rccl.version")?;
    let ck = libs.entry("composable_kernel".to_string()).or_default();
    ck.version = r.scalar::<String>("composable_kernel.system.version")?;
    ck.build = r.scalar::<String>("composable_kernel.system.commit")?;
    // The named ROCm libraries' search-path tags (0.3.0); AORTA records which tags, not the
    // paths, and reads torch's own library too, which aorta does not describe.
    for i in r.indices("library_linkage.libraries")? {
        let at = |f: &str| format!("library_linkage.libraries.{i}.{f}");
        let ours = match r.scalar::<String>(&at("name"))?.as_deref() {
            Some("libamdhip64.so") => "hip",
            Some("libhipblaslt.so") => "hipblaslt",
            Some("librocblas.so") => "rocblas",
            Some("libMIOpen.so") => "miopen",
            Some("librccl.so") => "rccl",
            _ => continue,
        };
        let path = r.scalar::<String>(&at("path"))?;
        let tags = r.strings(&at("dt_tags"))?;
        let error = r.scalar::<String>(&at("reason"))?;
        let effective = r
            .scalar::<String>(&at("effective_tag"))?
            .filter(|t| t != "unknown");
        // A library AORTA did not find has no linkage here either (its reason says so).
        if path.is_some() {
            let lib = libs.entry(ours.to_string()).or_default();
            lib.path = path;
            lib.linkage = Linkage {
                tags,
                effective,
                rpath: None,
                runpath: None,
                error,
            };
        }
    }

    s.python.version = r.scalar::<String>("python_version")?;
    let t = &mut s.pytorch;
    t.version = r.scalar::<String>("pytorch_version")?;
    t.git_commit = r.scalar::<String>("pytorch_build.git_commit")?;
    t.hip_version = r.scalar::<String>("pytorch_build.hip_version")?;
    t.cuda_version = r.scalar::<String>("pytorch_build.cuda_version")?;
    t.debug = r.scalar::<bool>("pytorch_build.debug")?;
    t.triton_version = r.scalar::<String>("triton.package_version")?;
    t.build.settings = r
        .entries::<Option<String>>("pytorch_build.flags.build_settings")?
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect();
    // A define without a value is `null` in AORTA's map, `true` in aorta's.
    t.build.cxx_defines = r
        .entries::<Option<String>>("pytorch_build.flags.cxx_defines")?
        .into_iter()
        .map(|(k, v)| (k, v.map_or(Value::Bool(true), Value::String)))
        .collect();
    t.build.arch_list = r.strings("pytorch_build.flags.gpu_arch_list")?;
    t.build.flags = r.entries("pytorch_build.build_flags")?;
    let sdpa = |f: &str| r.scalar(&format!("pytorch_sdpa.backends_enabled.{f}_sdp_enabled"));
    t.sdpa.flash = sdpa("flash")?;
    t.sdpa.mem_efficient = sdpa("mem_efficient")?;
    t.sdpa.math = sdpa("math")?;
    t.sdpa.cudnn = sdpa("cudnn")?;

    s.env_vars = r.entries("env_vars")?;
    Ok(s)
}

/// Typed reads of AORTA's document by dotted path, each path remembered (array indices as `*`)
/// so what was not read can be listed.
struct Reader<'a> {
    doc: &'a Map<String, Value>,
    read: RefCell<BTreeSet<String>>,
}

impl Reader<'_> {
    /// The value at `path`, `None` when a step is missing or null; marks the path read.
    fn get(&self, path: &str) -> Option<&Value> {
        self.read.borrow_mut().insert(normalise(path));
        self.at(path)
    }

    /// [`Reader::get`] without marking: a walk through, not a read.
    fn at(&self, path: &str) -> Option<&Value> {
        let mut segs = path.split('.');
        let mut cur = self.doc.get(segs.next()?)?;
        for seg in segs {
            cur = match cur {
                Value::Object(m) => m.get(seg)?,
                Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        (!cur.is_null()).then_some(cur)
    }

    fn bad(path: &str, expected: &'static str, found: &Value) -> ImportError {
        ImportError {
            path: path.to_string(),
            expected,
            found: kind(found),
        }
    }

    /// The scalar at `path`; `None` when it is missing or null.
    fn scalar<T: Scalar>(&self, path: &str) -> Result<Option<T>, ImportError> {
        match self.get(path) {
            None => Ok(None),
            Some(v) => T::from_json(v)
                .map(Some)
                .ok_or_else(|| Self::bad(path, T::OR_NULL, v)),
        }
    }

    /// An array of strings; `null` is empty.
    fn strings(&self, path: &str) -> Result<Vec<String>, ImportError> {
        let Some(v) = self.get(path) else {
            return Ok(Vec::new());
        };
        let bad = || Self::bad(path, "an array of strings or null", v);
        v.as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(bad))
            .collect()
    }

    /// The indices of the array at `path` (none for `null`); its elements' fields are read one
    /// by one.
    fn indices(&self, path: &str) -> Result<std::ops::Range<usize>, ImportError> {
        match self.at(path) {
            None => Ok(0..0),
            Some(Value::Array(a)) => Ok(0..a.len()),
            Some(v) => Err(Self::bad(path, "an array or null", v)),
        }
    }

    fn object(&self, path: &str) -> Result<Option<&Map<String, Value>>, ImportError> {
        match self.get(path) {
            None => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(v) => Err(Self::bad(path, "an object or null", v)),
        }
    }

    /// An object of scalars (`Option<_>` where an entry may be null); `null` is empty.
    fn entries<T: Scalar>(&self, path: &str) -> Result<BTreeMap<String, T>, ImportError> {
        let Some(m) = self.object(path)? else {
            return Ok(BTreeMap::new());
        };
        m.iter()
            .map(|(k, v)| {
                T::from_json(v)
                    .map(|x| (k.clone(), x))
                    .ok_or_else(|| Self::bad(&format!("{path}.{k}"), T::EXPECTED, v))
            })
            .collect()
    }
}

/// A value of AORTA's file that [`Reader::scalar`] and [`Reader::entries`] read: one
/// conversion and one message per type.
trait Scalar: Sized {
    /// What a value must be, for messages (`a count`).
    const EXPECTED: &'static str;
    /// The same where `null` is also taken (a path's value: `a count or null`).
    const OR_NULL: &'static str;
    /// The value, or `None` when it is of another type.
    fn from_json(v: &Value) -> Option<Self>;
}

impl Scalar for String {
    const EXPECTED: &'static str = "a string";
    const OR_NULL: &'static str = "a string or null";
    fn from_json(v: &Value) -> Option<Self> {
        v.as_str().map(str::to_string)
    }
}

impl Scalar for bool {
    const EXPECTED: &'static str = "true or false";
    const OR_NULL: &'static str = "true, false or null";
    fn from_json(v: &Value) -> Option<Self> {
        v.as_bool()
    }
}

impl Scalar for u32 {
    const EXPECTED: &'static str = "a count";
    const OR_NULL: &'static str = "a count or null";
    fn from_json(v: &Value) -> Option<Self> {
        v.as_u64().and_then(|n| u32::try_from(n).ok())
    }
}

/// An entry that may be null (a define without a value, an unset variable).
impl<T: Scalar> Scalar for Option<T> {
    const EXPECTED: &'static str = T::OR_NULL;
    const OR_NULL: &'static str = T::OR_NULL;
    fn from_json(v: &Value) -> Option<Self> {
        match v {
            Value::Null => Some(None),
            v => T::from_json(v).map(Some),
        }
    }
}

/// AORTA's build flags: booleans, strings (`BUILD_TYPE`) or `null`, kept as aorta keeps them.
impl Scalar for Value {
    const EXPECTED: &'static str = "true, false, a string or null";
    const OR_NULL: &'static str = "true, false, a string or null";
    fn from_json(v: &Value) -> Option<Self> {
        matches!(v, Value::Null | Value::Bool(_) | Value::String(_)).then(|| v.clone())
    }
}

/// JSON's name for a value's type, for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A dotted path with array indices as `*`.
fn normalise(path: &str) -> String {
    path.split('.')
        .map(
            |s| match !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                true => "*",
                false => s,
            },
        )
        .collect::<Vec<_>>()
        .join(".")
}

/// Every part of `doc` that no read reached, each as the shortest path under which nothing
/// was read, with the blake3 of its leaves (path and value, in order): equal digests, equal
/// values.
fn not_compared(doc: &Map<String, Value>, read: &BTreeSet<String>) -> Vec<NotCompared> {
    let read: Vec<Vec<&str>> = read.iter().map(|p| p.split('.').collect()).collect();
    let starts = |path: &[&str], prefix: &[&str]| {
        path.len() >= prefix.len() && path[..prefix.len()] == *prefix
    };
    let mut groups: BTreeMap<String, BTreeMap<String, &Value>> = BTreeMap::new();
    let mut leaves = Vec::new();
    for (k, v) in doc {
        leaves_of(v, k.clone(), &mut leaves);
    }
    for (path, value) in leaves {
        let norm = normalise(&path);
        let segs: Vec<&str> = norm.split('.').collect();
        // Read itself, below a read, or on the way to one (a null block whose field is read).
        if read.iter().any(|r| starts(&segs, r) || starts(r, &segs)) {
            continue;
        }
        let depth = (1..=segs.len())
            .find(|&n| !read.iter().any(|r| starts(r, &segs[..n])))
            .unwrap_or(segs.len());
        groups
            .entry(segs[..depth].join("."))
            .or_default()
            .insert(path, value);
    }
    groups
        .into_iter()
        .map(|(field, leaves)| {
            // Strings and JSON values only: serialising cannot fail.
            let canonical = serde_json::to_string(&leaves).unwrap_or_default();
            NotCompared {
                field,
                digest: blake3::hash(canonical.as_bytes()).to_hex()[..16].to_string(),
            }
        })
        .collect()
}

/// Leaves by dotted path: objects by key, arrays by index; empty containers and scalars are
/// leaves.
fn leaves_of<'v>(v: &'v Value, path: String, out: &mut Vec<(String, &'v Value)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves_of(x, format!("{path}.{k}"), out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                leaves_of(x, format!("{path}.{i}"), out);
            }
        }
        _ => out.push((path, v)),
    }
}
