//! Everything that touches wasmtime: the engine, loaded plugin versions, the
//! per-call sandbox and the host side of the WIT imports.

pub(crate) mod bindings;
mod cache;
mod capture;
mod engine;
mod flight;
mod grants;
mod host;
mod plugin;
mod ready;
mod sandbox;
mod session;

pub use cache::{ArtifactCache, Compiled};
pub use engine::{EPOCH_TICK, MAX_MEMORY, Runtime};
pub use flight::{Drained, Flight};
pub use grants::{ApprovalScope, CapabilityUse, Grants};
pub use plugin::{
    CONTRACT_SERIES, CONTRACT_VERSION, ContentHash, LoadError, PluginSource, PluginVersion,
    TOOL_INTERFACE, human_bytes, is_declarative_file, is_plugin_file, plugin_files,
    plugin_name_for,
};
pub use sandbox::{Limits, Sandbox};
pub use session::{MAX_SESSIONS, SessionMemory};

pub(crate) use host::kill_commands;
pub use host::{LogSink, Progress, ProgressSink, with_log_sink, with_progress_sink};
