//! The plugins compiled into this binary by `host/build.rs` from `plugins/`,
//! so a fresh install serves useful tools with no plugin directory.

/// A plugin shipped inside the binary.
#[derive(Debug, Clone, Copy)]
pub struct BundledPlugin {
    /// Plugin name (its directory under `plugins/`).
    pub name: &'static str,
    /// The component's bytes.
    pub wasm: &'static [u8],
    /// The SHA-256 of `wasm`, computed when it was embedded (a start reads
    /// none of the bytes of a plugin it does not compile).
    pub hash: [u8; 32],
}

/// The bundled plugins' specs, captured from the compiled plugins (see
/// [`crate::runtime::CapturedPlugin`]): JSON, by plugin name.
pub static CAPTURED_SPECS: &str = include_str!("../bundled-specs.json");

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ContentHash;

    #[test]
    fn each_embedded_hash_is_that_of_its_bytes() {
        assert!(!PLUGINS.is_empty());
        for plugin in PLUGINS {
            assert_eq!(
                ContentHash(plugin.hash),
                ContentHash::of(plugin.wasm),
                "{}",
                plugin.name
            );
        }
    }
}
