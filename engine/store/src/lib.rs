//! placeholder until this crate lands
