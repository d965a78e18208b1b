//! The environment key: which snapshot fields feed the hash that goes into every trial key.
//!
//! A snapshot is flattened to leaves addressed by dotted paths (`gpu.devices.0.arch`; an array
//! of scalars such as `host.cpu.simd` is one leaf). A leaf is keyed when
//!
//! ```text
//! !user.exclude(p) && (user.include(p) || (DEFAULT_INCLUDE(p) && !DEFAULT_EXCLUDE(p)))
//! ```
//!
//! so a recipe's `env_key: {include, exclude}` can pull in a default-excluded field (pin
//! results to one host with `include: [host.hostname]`) or drop a keyed one. Patterns are
//! dotted paths; a segment may contain `*` (any run of characters within one segment), and a
//! `**` segment matches any number of segments. A pattern that names an object covers
//! everything below it. The defaults key what changes results (versions, architecture, library
//! hashes, tracked env vars) and leave out what is unique to a machine or a moment (hostnames,
//! UUIDs, serials, container ids, paths, clocks, temperatures, free memory, probe timings), so
//! identical machines share results and an unrelated change re-runs nothing.

use crate::schema::Snapshot;
pub use aorta_fieldpattern::PatternError as KeyPatternError;
use aorta_fieldpattern::{match_segs, matches, reaches, segments, with_segs, Segments};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Sections keyed by default (everything below them, minus [`DEFAULT_EXCLUDE`]). Not keyed:
/// `captured_at`, `partial`, `partial_reasons`, `probe`.
pub const DEFAULT_INCLUDE: &[&str] = &[
    "schema_version",
    "host",
    "gpu",
    "cuda",
    "rocm",
    "python",
    "pytorch",
    "env_vars",
];

/// Machine- or moment-unique fields, and locations that do not change what runs.
pub const DEFAULT_EXCLUDE: &[&str] = &[
    "host.hostname",
    "host.kernel_version",
    "host.memory_total_bytes",
    "host.memory_available_bytes",
    "host.runtime.container_id",
    "host.runtime.venv_path",
    "host.runtime.conda_env",
    "host.runtime.python_env",
    // Where the probe ran, not what runs: the named container (`host.runtime.container`) is keyed.
    "host.runtime.container_detected",
    "host.runtime.namespace",
    // The module's version is `gpu.driver_version`; see `DriverIdentity`.
    "gpu.driver_identity",
    "gpu.source",
    "gpu.devices.*.uuid",
    "gpu.devices.*.serial",
    "gpu.devices.*.pci_bus_id",
    "gpu.devices.*.volatile",
    "gpu.topology.source",
    "gpu.topology.raw",
    "python.executable",
    "python.executable_resolved",
    "python.prefix",
    "python.base_prefix",
    "python.site_packages",
    "pytorch.torch_dir",
    "pytorch.collected",
    "rocm.root_source",
    "rocm.candidates",
    "env_vars.*_VISIBLE_DEVICES",
    "env_vars.CUDA_HOME",
    "env_vars.CUDA_PATH",
    "env_vars.CUDA_CACHE_PATH",
    "env_vars.ROCM_PATH",
    "env_vars.ROCM_HOME",
    "env_vars.HIP_PATH",
    "env_vars.NCCL_DEBUG_FILE",
    "env_vars.MIOPEN_USER_DB_PATH",
    "**.path",
    "**.root",
    "**.origin",
    "**.version_source",
    "**.candidates",
    "**.size_bytes",
    // A library's DT_RPATH/DT_RUNPATH are bytes of its file, keyed through `files[].blake3`.
    "**.linkage",
];

/// Domain tag hashed before the fields, so an env key can never collide with another hash.
pub const KEY_DOMAIN: &str = "aorta.env-key/1\0";

/// A recipe's `env_key: {include, exclude}`, applied on top of the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeyRules {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

impl KeyRules {
    pub fn new(include: Vec<String>, exclude: Vec<String>) -> Self {
        KeyRules { include, exclude }
    }

    /// Checks every pattern; the message names the bad pattern and says what is allowed (for
    /// the recipe loader's diagnostic).
    pub fn validate(&self) -> Result<(), KeyPatternError> {
        for p in self.include.iter().chain(&self.exclude) {
            aorta_fieldpattern::validate(p)?;
        }
        Ok(())
    }

    /// Whether a leaf these rules key can only be filled by `import torch`
    /// ([`crate::IMPORT_ONLY_FIELDS`]): then the probe behind the key must be a deep one
    /// (`ProbeOptions::deep`), or the key would hold `null`s for them. The defaults never need
    /// it; an include such as `pytorch.build.flags`, `pytorch.sdpa` or `pytorch` does, unless
    /// an exclude removes the whole field again.
    pub fn needs_deep(&self) -> bool {
        crate::schema::IMPORT_ONLY_FIELDS.iter().any(|field| {
            let f: Vec<&str> = field.split('.').collect();
            let excluded = self.exclude.iter().any(|p| matches(p, &f));
            !excluded && self.include.iter().any(|p| reaches(p, &f))
        })
    }

    /// Whether the leaf at `path` feeds the key.
    pub fn is_keyed(&self, path: &str) -> bool {
        self.matcher().is_keyed(path)
    }

    /// The rules with every pattern split into segments once, for matching many leaves: a
    /// snapshot's ~300 leaves each meet ~50 patterns (0.6 ms per key, split per match).
    pub(crate) fn matcher(&self) -> KeyMatcher<'_> {
        fn split(pats: &[String]) -> Vec<Segments<'_>> {
            pats.iter().map(|p| segments(p)).collect()
        }
        KeyMatcher {
            include: split(&self.include),
            exclude: split(&self.exclude),
        }
    }
}

/// The default patterns, split once per process.
struct Defaults {
    include: Vec<Segments<'static>>,
    exclude: Vec<Segments<'static>>,
    import_only: Vec<Segments<'static>>,
}

fn defaults() -> &'static Defaults {
    static DEFAULTS: std::sync::OnceLock<Defaults> = std::sync::OnceLock::new();
    DEFAULTS.get_or_init(|| {
        let split = |pats: &[&'static str]| pats.iter().map(|p| segments(p)).collect();
        Defaults {
            include: split(DEFAULT_INCLUDE),
            exclude: split(DEFAULT_EXCLUDE),
            import_only: split(&crate::schema::IMPORT_ONLY_FIELDS),
        }
    })
}

/// [`KeyRules`] ready to match ([`KeyRules::matcher`]).
pub(crate) struct KeyMatcher<'r> {
    include: Vec<Segments<'r>>,
    exclude: Vec<Segments<'r>>,
}

impl KeyMatcher<'_> {
    /// [`KeyRules::is_keyed`].
    pub(crate) fn is_keyed(&self, path: &str) -> bool {
        with_segs(path, |segs| {
            let any = |pats: &[Segments<'_>]| pats.iter().any(|p| match_segs(p, segs));
            if any(&self.exclude) {
                return false;
            }
            let d = defaults();
            // Import-only (`--deep`) fields are never keyed by default either.
            any(&self.include) || (any(&d.include) && !any(&d.exclude) && !any(&d.import_only))
        })
    }
}

/// The key and exactly the fields that fed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvKey {
    /// blake3 hex of [`KEY_DOMAIN`] followed by the canonical JSON of `fields`.
    pub hash: String,
    pub fields: BTreeMap<String, Value>,
}

impl EnvKey {
    /// `blake3:` and the first 12 hex digits, for one-line displays.
    pub fn short(&self) -> String {
        format!("blake3:{}", &self.hash[..12.min(self.hash.len())])
    }
}

impl Snapshot {
    /// The environment key under `rules` (`KeyRules::default()` for the documented defaults).
    pub fn key(&self, rules: &KeyRules) -> EnvKey {
        // Derived Serialize impls and string-keyed maps only: to_value cannot fail, and a key
        // must never be the hash of something else than the snapshot.
        let value = serde_json::to_value(self).expect("a Snapshot is plain JSON data");
        key_of_value(&value, rules)
    }
}

pub(crate) fn key_of_value(value: &Value, rules: &KeyRules) -> EnvKey {
    let matcher = rules.matcher();
    let fields: BTreeMap<String, Value> = flatten(value)
        .into_iter()
        .filter(|(p, _)| matcher.is_keyed(p))
        .collect();
    EnvKey {
        hash: hash_fields(&fields),
        fields,
    }
}

/// The key of exactly these keyed fields.
pub(crate) fn hash_fields(fields: &BTreeMap<String, Value>) -> String {
    // String keys and JSON values: serializing cannot fail, and an empty string must never be
    // hashed in its place.
    let canonical = serde_json::to_string(fields).expect("keyed fields are plain JSON data");
    let mut h = blake3::Hasher::new();
    h.update(KEY_DOMAIN.as_bytes());
    h.update(canonical.as_bytes());
    h.finalize().to_hex().to_string()
}

/// Leaves by dotted path. Objects recurse; arrays of objects/arrays recurse by index; arrays of
/// scalars and empty containers are leaves. Object keys are sorted for a canonical result.
pub fn flatten(v: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    walk(v, String::new(), &mut out);
    out
}

fn walk(v: &Value, prefix: String, out: &mut BTreeMap<String, Value>) {
    let join = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                walk(child, join(k), out);
            }
        }
        Value::Array(a) if a.iter().any(|e| e.is_object() || e.is_array()) => {
            for (i, child) in a.iter().enumerate() {
                walk(child, join(&i.to_string()), out);
            }
        }
        Value::Object(_) => {
            out.insert(prefix, Value::Object(Default::default()));
        }
        _ => {
            out.insert(prefix, v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_precedence() {
        let d = KeyRules::default();
        assert!(d.is_keyed("gpu.devices.0.arch"));
        assert!(!d.is_keyed("gpu.devices.0.uuid"));
        assert!(!d.is_keyed("captured_at"));
        let r = KeyRules::new(
            vec!["host.hostname".into()],
            vec!["env_vars.NCCL_DEBUG".into(), "host.hostname.x".into()],
        );
        assert!(r.is_keyed("host.hostname"));
        assert!(!r.is_keyed("env_vars.NCCL_DEBUG"));
        let both = KeyRules::new(vec!["gpu".into()], vec!["gpu.devices".into()]);
        assert!(
            !both.is_keyed("gpu.devices.0.arch"),
            "exclude wins over include"
        );
    }

    #[test]
    fn import_only_fields_are_never_keyed_by_default() {
        let d = KeyRules::default();
        for f in crate::schema::IMPORT_ONLY_FIELDS {
            assert!(!d.is_keyed(&format!("{f}.x")) && !d.is_keyed(f), "{f}");
        }
        assert!(!d.is_keyed("pytorch.build.flags.USE_CUDA"));
        assert!(!d.is_keyed("pytorch.allocator.backend"));
        assert!(d.is_keyed("pytorch.allocator.conf"));
        assert!(d.is_keyed("pytorch.record_blake3"));
        assert!(!d.is_keyed("pytorch.collected"));
        assert!(!d.needs_deep());
    }

    #[test]
    fn rules_that_key_import_only_fields_need_a_deep_probe() {
        let inc = |p: &[&str]| KeyRules::new(p.iter().map(|s| s.to_string()).collect(), vec![]);
        for p in [
            "pytorch",
            "pytorch.build",
            "pytorch.build.flags.USE_FLASH_ATTENTION",
            "pytorch.build.settings.*",
            "pytorch.*.flash",
            "pytorch.numerics.matmul_allow_tf32",
            "pytorch.allocator",
            "**.backend",
        ] {
            assert!(inc(&[p]).needs_deep(), "{p}");
        }
        for p in [
            "host.hostname",
            "pytorch.version",
            "pytorch.allocator.conf",
            "cuda.libraries.*.version",
            "env_vars.TORCH_*",
        ] {
            assert!(!inc(&[p]).needs_deep(), "{p}");
        }
        let all_but = KeyRules::new(vec!["pytorch.sdpa".into()], vec!["pytorch.sdpa".into()]);
        assert!(!all_but.needs_deep(), "excluded again");
    }

    #[test]
    fn validation() {
        assert!(KeyRules::new(
            vec!["cuda.libraries.*.version".into(), "**.blake3".into()],
            vec![]
        )
        .validate()
        .is_ok());
        assert_eq!(
            KeyRules::new(vec!["a..b".into()], vec![]).validate(),
            Err(KeyPatternError::EmptySegment("a..b".into()))
        );
        assert!(KeyRules::new(vec!["a..b".into()], vec![])
            .validate()
            .unwrap_err()
            .to_string()
            .contains("empty segment"));
        assert!(KeyRules::new(vec![], vec!["a.b c".into()])
            .validate()
            .unwrap_err()
            .to_string()
            .contains("' '"));
        assert!(KeyRules::new(vec![], vec!["a.x**".into()])
            .validate()
            .is_err());
    }

    #[test]
    fn flatten_shapes() {
        let v = serde_json::json!({"b": {"x": [1, 2], "y": [{"z": null}], "e": {}}, "a": []});
        let f = flatten(&v);
        assert_eq!(f.keys().collect::<Vec<_>>(), ["a", "b.e", "b.x", "b.y.0.z"]);
    }
}
