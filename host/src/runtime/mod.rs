//! Everything of wasmtime that is not a capability: the one `Engine` and
//! its `Linker` (`engine`), precompiled components on disk (`cache`), a
//! loaded plugin version and its calls (`plugin`), a guest store and its
//! instance (`instance`), instances made ahead (`ready`), stateful plugins'
//! instances kept per session (`stateful`), and calls in flight (`flight`).

mod cache;
mod engine;
mod flight;
pub(crate) mod instance;
mod plugin;
mod ready;
mod stateful;

pub use crate::contract::{
    CONTRACT_SERIES, CONTRACT_VERSION, CapabilityUse, ContentHash, TOOL_INTERFACE,
};
pub(crate) use cache::load_key;
pub use cache::{ArtifactCache, Compiled};
pub use engine::Runtime;
pub use flight::{Drained, Flight};
pub use plugin::{
    CAPTURED_FILE, CapturedPlugin, LoadError, PluginSource, PluginVersion, is_declarative_file,
    is_plugin_file, plugin_files, plugin_name_for,
};
pub use stateful::{MAX_SESSIONS, SessionState, session_key};
