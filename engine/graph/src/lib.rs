//! The compile layer: a recipe and its inputs become trial keys and a content-addressed DAG.
//!
//! [`key`] defines what a trial key hashes; [`db`] memoizes the pipeline on salsa so an edit
//! that does not change any key (a comment) stops early; [`dag`] is the graph execution walks.

pub mod dag;
pub mod db;
pub mod inputs;
pub mod key;
mod plan_keys;

pub use aorta_store::Key;
pub use dag::{Artifact, Dag, Node, PlanIndex};
pub use db::{BuildInputs, CompileDb, SourceText};
pub use inputs::{expand_globs, hash_file, hash_inputs, InputsError};
pub use key::{
    canonical_json, hash_json, CellKeyer, EnvironmentDescriptor, ExecutionKey, HashError,
    KeyInputs, KeyedResources, WorkloadIdentity, KEY_SCHEMA_VERSION,
};
pub use plan_keys::{trial_count, trial_inputs, KeyContext, PlannedTrial, ResolvedWorkload};
