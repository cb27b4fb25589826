//! Everything that touches wasmtime: the engine, loaded plugin versions, the
//! per-call sandbox and the host side of the WIT imports.

mod cache;
mod engine;
mod flight;
mod grants;
mod host;
mod instance;
mod plugin;
mod ready;
mod sandbox;
mod stateful;

pub use crate::contract::{
    CONTRACT_SERIES, CONTRACT_VERSION, CapabilityUse, ContentHash, TOOL_INTERFACE,
};
pub(crate) use cache::load_key;
pub use cache::{ArtifactCache, Compiled};
pub use engine::Runtime;
pub use flight::{Drained, Flight};
pub use grants::{ApprovalScope, Grants, SessionRef};
pub use plugin::{
    CAPTURED_FILE, CapturedPlugin, LoadError, PluginSource, PluginVersion, human_bytes,
    is_declarative_file, is_plugin_file, plugin_files, plugin_name_for,
};
pub use sandbox::{Limits, Sandbox};
pub use stateful::{MAX_SESSIONS, SessionState, session_key};

pub use host::{
    LogSink, MAX_PROCESSES, MAX_TERMINAL_SESSIONS, Progress, ProgressSink, Terminals,
    with_log_sink, with_progress_sink,
};
pub(crate) use host::{check_container_engine, kill_commands};
