//! The recipe language: AORTA's schema_version 1 in both modes, validated with located
//! diagnostics, resolved against the registries into cells with concrete env vars.
//!
//! The compile database (aorta-graph) loads a file with [`parse_recipe`], builds one the
//! command line describes ([`RecipeRequest`]: flag mode, `aorta run`, an agent look) and lays
//! CLI settings over a file ([`Overlays`]); [`load_recipe`] is for tools and tests outside it.

mod blocks;
mod cells;
mod check;
mod common;
mod flags;
mod limits;
mod load;
mod model;
mod names;
mod probe;
mod request;
mod resources;

pub use blocks::{compile_regex, COLLECTORS, REGEX_BACKTRACK_LIMIT};
pub use flags::{override_collect, FlagRecipe, Overlays, ProbeOverlays};
pub use limits::{
    planned_trials, MAX_CELLS, MAX_CELL_SETTINGS_BYTES, MAX_PLANNED_TRIALS, MAX_RECIPE_BYTES,
};
pub use load::{
    load_recipe, load_redaction, parse_recipe, peek_mode, Loaded, PeekedMode, PROBE_KEYS,
    TRIAGE_KEYS,
};
pub use model::*;
pub use names::{
    inline_environment_name, safe_slug, segment, valid_cell_name, RESERVED_CELL_NAMES,
};
pub use request::{agent_cell_name, AgentLook, BisectCell, BisectProbe, RecipeRequest, RunRequest};
pub use resources::{parse_slurm_time, RESOURCE_KEYS};

/// The only recipe schema version this build understands.
pub const SCHEMA_VERSION: i64 = 1;
