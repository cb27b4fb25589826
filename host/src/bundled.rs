//! The plugins compiled into this binary by `host/build.rs` from `plugins/`,
//! so a fresh install serves useful tools with no plugin directory.

/// A plugin shipped inside the binary.
#[derive(Debug, Clone, Copy)]
pub struct BundledPlugin {
    /// Plugin name (its directory under `plugins/`).
    pub name: &'static str,
    /// The component's bytes.
    pub wasm: &'static [u8],
}

/// The bundled plugins' specs, captured from the compiled plugins (see
/// [`crate::runtime::CapturedPlugin`]): JSON, by plugin name.
pub static CAPTURED_SPECS: &str = include_str!("../bundled-specs.json");

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
