//! The environment snapshot key. Until `aorta env probe` defines the full snapshot, the key
//! covers host basics that certainly change results (OS and CPU architecture), and nothing
//! machine-unique (hostnames, UUIDs), so two identical machines share results.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostBasics {
    pub schema: &'static str,
    pub os: &'static str,
    pub arch: &'static str,
    pub family: &'static str,
}

impl HostBasics {
    pub fn current() -> Self {
        HostBasics { schema: "host-basics/1", os: std::env::consts::OS, arch: std::env::consts::ARCH, family: std::env::consts::FAMILY }
    }

    pub fn key(&self) -> String {
        let json = serde_json::to_string(self).unwrap_or_default();
        blake3::hash(json.as_bytes()).to_hex().to_string()
    }
}
