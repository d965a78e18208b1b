//! Trial keys: blake3 over a canonical, versioned encoding of exactly what determines a
//! trial's result. The encoding is JSON with sorted keys behind a domain tag, so
//! `aorta explain` can print the very bytes that were hashed.

use aorta_store::Key;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Bump when the meaning of any key input changes: every cached result becomes a miss.
pub const KEY_SCHEMA_VERSION: u32 = 2;

const DOMAIN: &[u8] = b"aorta.trial-key\0";

/// A value that could not be encoded for hashing. Key inputs are strings, numbers and
/// string-keyed maps, so this never happens in practice; it is still an error, never the hash
/// of an empty string.
#[derive(Debug, thiserror::Error)]
#[error("cannot encode {what} for hashing: {source}")]
pub struct HashError {
    pub what: &'static str,
    #[source]
    pub source: serde_json::Error,
}

/// blake3 over `domain` then the canonical JSON of `value`, streamed into the hasher.
pub fn hash_json(
    domain: &[u8],
    what: &'static str,
    value: &impl Serialize,
) -> Result<Key, HashError> {
    let mut h = blake3::Hasher::new();
    h.update(domain);
    serde_json::to_writer(&mut h, value).map_err(|source| HashError { what, source })?;
    Ok(Key::from_hash(h.finalize()))
}

/// What a trial runs. Names of cells and mitigations are deliberately absent: two cells that
/// resolve to the same env share results.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkloadIdentity {
    /// A workload executable speaking the workload protocol.
    Workload {
        name: String,
        version: String,
        executable_blake3: Option<String>,
    },
    /// The user's command: argv byte-for-byte, plus content hashes of the files it names
    /// (argv elements that are existing files, and declared inputs).
    Command {
        argv: Vec<String>,
        inputs: BTreeMap<String, String>,
    },
}

/// Where a trial runs: the descriptor's content, not the environment's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct EnvironmentDescriptor {
    pub docker: Option<String>,
    pub venv: Option<String>,
    pub buck_target: Option<String>,
}

/// How a trial is run, beyond what it runs: the limits and policies that can change its
/// verdict (docs/cache-keys.md has the table of every recipe field and flag, keyed or not).
/// Placement that cannot change a verdict (account, `--jobs`, `--gpus` ids) is not here.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Default)]
pub struct ExecutionKey {
    /// The cell's resources: a GPU count, CPU count, memory or time limit can turn a pass into
    /// an OOM kill or a TIMEOUT; partition, constraint and extra sbatch flags pick the hardware.
    pub resources: KeyedResources,
    /// `--kill-on-hang` (command trials): a hang becomes a kill instead of a timeout.
    pub kill_on_hang: bool,
    /// `--trial-timeout` (workload trials), in milliseconds.
    pub workload_timeout_ms: Option<u64>,
    /// `AORTA_CONTAINMENT=off`: teardown by process-tree rules only, no cgroup.
    pub containment_off: bool,
}

/// The resource keys of a cell that can change a trial's verdict ([`ExecutionKey`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Default)]
pub struct KeyedResources {
    pub gpus_per_trial: Option<u32>,
    pub cpus_per_trial: Option<u32>,
    pub mem_per_trial: Option<String>,
    pub time_limit_secs: Option<u64>,
    pub partition: Option<String>,
    pub constraint: Option<String>,
    pub sbatch_args: Option<Vec<String>>,
}

/// Everything a trial key is made of. Serialised in field order with sorted maps (an `Arc`
/// serialises as what it points to). Everything but the trial index is shared by a cell's
/// trials, so a 10,000-trial plan holds one copy per cell, not per trial.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct KeyInputs {
    pub key_schema: u32,
    pub workload: Arc<WorkloadIdentity>,
    /// Canonical JSON (sorted keys) of the effective workload config; for the subprocess flow,
    /// the classifier and timeout settings that decide the verdict.
    pub config: Arc<str>,
    /// The cell's resolved env vars: values, not mitigation names.
    pub env: Arc<BTreeMap<String, String>>,
    pub environment: Arc<EnvironmentDescriptor>,
    /// The environment snapshot's key (aorta-probe's `EnvKey` under the recipe's rules).
    pub env_snapshot: Arc<str>,
    pub execution: Arc<ExecutionKey>,
    /// Last: [`KeyInputs::keyer`] hashes everything before it once per cell.
    pub trial_index: u32,
}

impl KeyInputs {
    /// The exact bytes hashed (after the domain tag), for `aorta explain`.
    pub fn canonical_json(&self) -> Result<String, HashError> {
        serde_json::to_string(self).map_err(|source| HashError {
            what: "trial key inputs",
            source,
        })
    }

    pub fn key(&self) -> Result<Key, HashError> {
        hash_json(DOMAIN, "trial key inputs", self)
    }

    /// A keyer for the trials of one cell: [`key`](Self::key) for any `trial_index`, with the
    /// shared inputs serialised and hashed once. The encoding ends in `"trial_index":N}` (the
    /// last field), so only that tail differs; the keys are byte-for-byte the same as `key`'s.
    /// (Serialising a 900 KB config once per trial made planning 200 trials take seconds.)
    pub fn keyer(&self) -> Result<CellKeyer, HashError> {
        let json = self.canonical_json()?;
        let tail = trial_index_tail(self.trial_index);
        match json.strip_suffix(&tail) {
            Some(prefix) => {
                let mut h = blake3::Hasher::new();
                h.update(DOMAIN);
                h.update(prefix.as_bytes());
                Ok(CellKeyer::Prefix(Box::new(h)))
            }
            None => Ok(CellKeyer::Whole(self.clone())),
        }
    }
}

fn trial_index_tail(index: u32) -> String {
    format!("\"trial_index\":{index}}}")
}

/// See [`KeyInputs::keyer`].
pub enum CellKeyer {
    /// The hasher state after the domain tag and everything before the trial index.
    Prefix(Box<blake3::Hasher>),
    /// The encoding did not end as expected: serialise each trial in full.
    Whole(KeyInputs),
}

impl CellKeyer {
    pub fn key(&self, trial_index: u32) -> Result<Key, HashError> {
        match self {
            CellKeyer::Prefix(prefix) => {
                let mut h = (**prefix).clone();
                h.update(trial_index_tail(trial_index).as_bytes());
                Ok(Key::from_hash(h.finalize()))
            }
            CellKeyer::Whole(inputs) => KeyInputs {
                trial_index,
                ..inputs.clone()
            }
            .key(),
        }
    }
}

/// JSON with object keys sorted at every level, so equal configs hash equally. A value that
/// cannot be serialised is an error, never an empty string hashed.
pub fn canonical_json<T: serde::Serialize + ?Sized>(v: &T) -> Result<String, HashError> {
    let error = |source| HashError {
        what: "a trial's config",
        source,
    };
    let v = serde_json::to_value(v).map_err(error)?;
    serde_json::to_string(&aorta_recipe::sorted_json(&v)).map_err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> KeyInputs {
        KeyInputs {
            key_schema: KEY_SCHEMA_VERSION,
            workload: Arc::new(WorkloadIdentity::Command {
                argv: vec!["true".into()],
                inputs: BTreeMap::new(),
            }),
            config: "{}".into(),
            env: Arc::new(BTreeMap::from([("A".into(), "1".into())])),
            environment: Arc::new(EnvironmentDescriptor {
                docker: None,
                venv: None,
                buck_target: None,
            }),
            env_snapshot: "host".into(),
            execution: Arc::new(ExecutionKey::default()),
            trial_index: 0,
        }
    }

    #[test]
    fn the_cell_keyer_gives_the_same_keys() {
        let mut i = inputs();
        i.config = format!("{{\"blob\":\"{}\"}}", "x\"é".repeat(1000)).into();
        let keyer = i.keyer().unwrap();
        assert!(matches!(keyer, CellKeyer::Prefix(_)));
        for index in [0, 1, 9, 10, 123_456, u32::MAX] {
            i.trial_index = index;
            assert_eq!(keyer.key(index).unwrap(), i.key().unwrap(), "{index}");
        }
    }

    #[test]
    fn every_input_changes_the_key() {
        let base = inputs().key().unwrap();
        assert_eq!(base, inputs().key().unwrap(), "deterministic");
        assert_eq!(base.as_str().len(), 64);
        let mut i = inputs();
        i.trial_index = 1;
        assert_ne!(i.key().unwrap(), base);
        let mut i = inputs();
        Arc::make_mut(&mut i.env).insert("A".into(), "2".into());
        assert_ne!(i.key().unwrap(), base);
        let mut i = inputs();
        i.config = "{\"x\":1}".into();
        assert_ne!(i.key().unwrap(), base);
        let mut i = inputs();
        i.env_snapshot = "other".into();
        assert_ne!(i.key().unwrap(), base);
        let mut i = inputs();
        Arc::make_mut(&mut i.environment).docker = Some("img".into());
        assert_ne!(i.key().unwrap(), base);
        let mut i = inputs();
        i.workload = WorkloadIdentity::Command {
            argv: vec!["false".into()],
            inputs: BTreeMap::new(),
        }
        .into();
        assert_ne!(i.key().unwrap(), base);
        let mut i = inputs();
        i.key_schema = KEY_SCHEMA_VERSION + 1;
        assert_ne!(i.key().unwrap(), base);
        let mut i = inputs();
        Arc::make_mut(&mut i.execution).kill_on_hang = true;
        assert_ne!(i.key().unwrap(), base);
        let mut i = inputs();
        Arc::make_mut(&mut i.execution).resources.time_limit_secs = Some(60);
        assert_ne!(i.key().unwrap(), base);
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let a = canonical_json(&serde_json::json!({"b": {"y": 1, "x": 2}, "a": 1})).unwrap();
        assert_eq!(a, r#"{"a":1,"b":{"x":2,"y":1}}"#);
    }
}
