//! `aorta bisect env`, `aorta bisect range` and `aorta reduce`: from "it fails there / since
//! then" to the one change that does it (docs/bisect.md).
//!
//! - [`ddmin`]: Zeller's delta debugging over a set of changes (env differences, mitigations).
//! - [`range`]: the first bad point of an ordered list, flaky-aware, boundary re-checked.
//! - [`judge`]: one probe's call against the good and bad ends with the sequential test of
//!   `trials: auto` (`aorta_report::sequential`), and the [`judge::Trials`] it reads.
//! - [`sim`]: simulated trials, for the tests and `bench/bisect`.
//! - [`sources`]: GOOD and BAD as env files or `aorta env probe -o` snapshots, and range lists.
//! - [`probe`]: trials from engine builds (a `BisectProbe` request per step), so every probe is
//!   a store hit on a rerun and runs under any executor.
//! - [`search`]: what the commands share; [`bisect_env`], [`bisect_range`], [`reduce`]: the
//!   commands; [`report`] renders `bisect.md` and `bisect.html`.

pub mod bisect_env;
pub mod bisect_range;
pub mod ddmin;
pub mod judge;
pub mod probe;
pub mod range;
pub mod reduce;
pub mod report;
pub mod search;
pub mod sim;
pub mod sources;
