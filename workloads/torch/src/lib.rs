//! AORTA's torch workloads on libtorch (tch): `training`, `inference` and `llm_determinism`
//! (spec §8.2–8.4), each an `aorta-workload-<name>` binary speaking the workload protocol
//! (docs/workload-protocol.md). The `aorta` binary never links this crate.

pub mod checksum;
pub mod common;
pub mod config;
pub mod determinism;
pub mod device;
pub mod inference;
pub mod model;
pub mod optim;
pub mod profile;
pub mod protocol;
pub mod stats;
pub mod training;
