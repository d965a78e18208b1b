//! The remote tier's configuration error, shared by the settings (config.rs) and the signing
//! key they load (sign.rs).

/// A bad remote-cache setting: what is wrong and how to fix it (the CLI shows both, exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    pub message: String,
    pub help: String,
}

impl ConfigError {
    pub(crate) fn new(message: impl Into<String>, help: impl Into<String>) -> Self {
        ConfigError {
            message: message.into(),
            help: help.into(),
        }
    }
}
