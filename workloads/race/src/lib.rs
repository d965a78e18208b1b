//! aorta-race: the `race` workload (docs/race.md). Buffers carry known patterns that depend on
//! rank and iteration; copies, collectives and GEMMs overlap on three streams; a planted bug
//! (`missing_sync`) drops the waits between producing and consuming streams, and every
//! iteration is verified so the resulting silent corruption is counted.

pub mod config;
pub mod gpu;
pub mod hazard;
pub mod launch;
pub mod pattern;
pub mod plan;
pub mod protocol;
pub mod rendezvous;
pub mod runner;
pub mod sim;
pub mod timing;
