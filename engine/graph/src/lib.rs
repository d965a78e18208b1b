//! The compile layer: a recipe and its inputs become trial keys and a content-addressed DAG.
//!
//! [`key`] defines what a trial key hashes; [`db`] memoizes the pipeline on salsa so an edit
//! that does not change any key (a comment) stops early; [`dag`] is the graph execution walks.

pub mod dag;
pub mod db;
pub mod host;
pub mod inputs;
pub mod key;
mod plan_keys;

pub use dag::{Dag, Node};
pub use db::{BuildInputs, CompileDb, PlannedTrial, SourceText};
pub use host::HostBasics;
pub use inputs::{hash_file, hash_inputs};
pub use key::{canonical_json, CellKeyer, EnvironmentDescriptor, KeyInputs, TrialKey, WorkloadIdentity, KEY_SCHEMA_VERSION};
pub use plan_keys::{trial_count, trial_inputs, KeyContext};
