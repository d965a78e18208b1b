//! Mitigation and environment registries: named data a recipe refers to.
//!
//! A *mitigation* is a pure env-var bundle applied to a trial (`tf32_off` = `DISABLE_TF32=1`);
//! an *environment* says where a trial runs (`docker`, `venv`, `buck_target`). Names come
//! from three sources, merged in this order: the built-in table ([`builtins`]), the project
//! registry (`aorta-registry.json` next to the recipe) and sidecar JSON files in command-line
//! order. A name defined twice anywhere is an error: there is no override, so what a cell
//! means never depends on which files happened to be passed.
//!
//! Unlike AORTA 0.2.1, which re-read plugins and sidecars on every lookup, a [`Registry`] is
//! loaded once and is immutable afterwards, so the set cannot change mid-run. Python
//! entry-point plugins have no equivalent here; sidecars are the extension point.

pub mod builtins;
mod load;
mod sanitizer;
mod sidecar;
mod suggest;
mod table;

use aorta_source::{Diag, DiagKind, SourceFile};
use serde::{Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

pub use load::project_registry_for;
pub use sanitizer::{
    find_rocjitsu_hook, Sanitizer, Vendor as SanitizerVendor, LOG_PREFIX as SANITIZER_LOG_PREFIX,
    ROCJITSU_HOOK, TIMEOUT_FACTOR as SANITIZER_TIMEOUT_FACTOR,
};

/// File name of the project registry looked up next to a recipe.
pub const PROJECT_REGISTRY_FILE: &str = "aorta-registry.json";

/// Where a registry entry was defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    BuiltIn,
    Sidecar { path: PathBuf },
    Project { path: PathBuf },
}

impl Source {
    /// The defining file, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Source::BuiltIn => None,
            Source::Sidecar { path } | Source::Project { path } => Some(path),
        }
    }
}

/// AORTA's SOURCE column: `aorta`, `sidecar:<basename>`, and our `project:<basename>`.
/// Basename only, because sidecars are copied into `<run>/sidecars/<basename>`.
impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let base = |p: &Path| {
            p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        };
        match self {
            Source::BuiltIn => f.write_str("aorta"),
            Source::Sidecar { path } => write!(f, "sidecar:{}", base(path)),
            Source::Project { path } => write!(f, "project:{}", base(path)),
        }
    }
}

/// Serialized as its display string, the same text the tables show.
impl Serialize for Source {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A named env-var bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mitigation {
    pub name: String,
    pub env: BTreeMap<String, String>,
    /// One line saying what the mitigation tests; empty for sidecar entries (AORTA's format
    /// has no place for it).
    pub description: String,
    pub source: Source,
}

impl Mitigation {
    /// Which GPU vendor a mitigation's env vars are for, if only one: ROCm's (`HIP_`, `HSA_`,
    /// `ROC`, `AMD_`, `MIOPEN_`, `HIPBLASLT_`, `TENSILE_`, `RCCL_`) or CUDA's (`CUDA_`, `NVIDIA_`,
    /// `CUBLAS`, `CUDNN_`). NCCL's and PyTorch's variables serve both.
    pub fn vendor(&self) -> Option<&'static str> {
        const AMD: [&str; 8] = [
            "HIP_",
            "HSA_",
            "ROC",
            "AMD_",
            "MIOPEN_",
            "HIPBLASLT_",
            "TENSILE_",
            "RCCL_",
        ];
        const NVIDIA: [&str; 4] = ["CUDA_", "NVIDIA_", "CUBLAS", "CUDNN_"];
        let any = |prefixes: &[&str]| {
            self.env
                .keys()
                .any(|k| prefixes.iter().any(|p| k.starts_with(p)))
        };
        match (any(&AMD), any(&NVIDIA)) {
            (true, false) => Some("amd"),
            (false, true) => Some("nvidia"),
            _ => None,
        }
    }
}

/// Where a trial runs. Metadata only at this layer; realising it is the engine's job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Environment {
    pub name: String,
    pub docker: Option<String>,
    pub venv: Option<String>,
    pub buck_target: Option<String>,
    pub description: String,
    pub source: Source,
}

/// The merged, immutable set of mitigations and environments.
#[derive(Debug, Clone)]
pub struct Registry {
    mitigations: BTreeMap<String, Mitigation>,
    environments: BTreeMap<String, Environment>,
    project: Option<PathBuf>,
    sidecars: Vec<PathBuf>,
}

impl Registry {
    /// Only the built-in table; cannot fail.
    pub fn builtin() -> Registry {
        let mitigations = builtins::mitigations()
            .map(|b| {
                let env = b
                    .env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                let m = Mitigation {
                    name: b.name.into(),
                    env,
                    description: b.description.into(),
                    source: Source::BuiltIn,
                };
                (m.name.clone(), m)
            })
            .collect();
        let environments = builtins::ENVIRONMENTS
            .iter()
            .map(|(name, description)| {
                let e = Environment {
                    name: name.to_string(),
                    docker: None,
                    venv: None,
                    buck_target: None,
                    description: description.to_string(),
                    source: Source::BuiltIn,
                };
                (e.name.clone(), e)
            })
            .collect();
        Registry {
            mitigations,
            environments,
            project: None,
            sidecars: Vec::new(),
        }
    }

    /// Built-ins, then the project registry (if given), then sidecars in order. The first
    /// problem found is returned as a located diagnostic; nothing is partially loaded.
    pub fn load(project: Option<&Path>, sidecars: &[PathBuf]) -> Result<Registry, Box<Diag>> {
        load::load(project, sidecars)
    }

    /// Like [`Registry::load`], from files already read (path, text).
    pub fn from_sources(
        project: Option<(&Path, SourceFile)>,
        sidecars: &[(PathBuf, SourceFile)],
    ) -> Result<Registry, Box<Diag>> {
        load::from_sources(project, sidecars)
    }

    pub fn mitigation(&self, name: &str) -> Option<&Mitigation> {
        self.mitigations.get(name)
    }

    pub fn environment(&self, name: &str) -> Option<&Environment> {
        self.environments.get(name)
    }

    /// Sorted by name.
    pub fn mitigations(&self) -> impl Iterator<Item = &Mitigation> {
        self.mitigations.values()
    }

    /// Sorted by name.
    pub fn environments(&self) -> impl Iterator<Item = &Environment> {
        self.environments.values()
    }

    /// The project registry that was loaded, if any.
    pub fn project(&self) -> Option<&Path> {
        self.project.as_deref()
    }

    /// Sidecar paths as given, in load order (the runner copies them into the run dir).
    pub fn sidecars(&self) -> &[PathBuf] {
        &self.sidecars
    }

    /// Every env var name some registered mitigation sets. The env probe captures these on
    /// top of its canonical list, so a snapshot can prove which mitigation was active
    /// (AORTA 0.2.1 missed 11 of its own, spec §12.8.1).
    pub fn mitigation_env_vars(&self) -> BTreeSet<String> {
        self.mitigations
            .values()
            .flat_map(|m| m.env.keys().cloned())
            .collect()
    }

    /// Help text for an unknown mitigation: close matches first, then every name.
    pub fn unknown_mitigation_hint(&self, name: &str) -> String {
        suggest::hint(name, self.mitigations.keys().map(String::as_str))
    }

    /// For a diagnostic axis: mitigations and the sanitizers it may also name.
    pub fn unknown_diagnostic_hint(&self, name: &str) -> String {
        let sanitizers: Vec<String> = Sanitizer::ALL.iter().map(|s| s.name()).collect();
        suggest::hint(
            name,
            self.mitigations
                .keys()
                .map(String::as_str)
                .chain(sanitizers.iter().map(String::as_str)),
        )
    }

    pub fn unknown_environment_hint(&self, name: &str) -> String {
        suggest::hint(name, self.environments.keys().map(String::as_str))
    }

    /// `unknown mitigation '<name>'` with the hint; the caller adds the recipe location.
    pub fn unknown_mitigation(&self, name: &str) -> Diag {
        Diag::new(
            DiagKind::UnknownName,
            format!("unknown mitigation '{name}'"),
        )
        .with_help(self.unknown_mitigation_hint(name))
    }

    pub fn unknown_environment(&self, name: &str) -> Diag {
        Diag::new(
            DiagKind::UnknownName,
            format!("unknown environment '{name}'"),
        )
        .with_help(self.unknown_environment_hint(name))
    }

    /// `NAME  SOURCE  ENV  DESCRIPTION`, one row per mitigation, sorted by name.
    pub fn mitigations_table(&self) -> String {
        table::mitigations(self.mitigations())
    }

    /// `NAME  SOURCE  DOCKER  VENV  BUCK_TARGET  DESCRIPTION`, sorted by name.
    pub fn environments_table(&self) -> String {
        table::environments(self.environments())
    }
}

/// A POSIX portable env var name, `^[A-Za-z_][A-Za-z0-9_]*$`. Anything else (`A=B`, empty,
/// spaces) cannot be set reliably and used to fail late inside the child's environment.
pub fn is_posix_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
