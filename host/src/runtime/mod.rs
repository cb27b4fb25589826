//! Everything that touches wasmtime: the engine, loaded plugin versions, the
//! per-call sandbox and the host side of the WIT imports.

mod cache;
mod capture;
mod engine;
mod epoch;
mod flight;
mod grants;
mod host;
mod instance;
mod memory;
mod plugin;
mod ready;
mod sandbox;
mod session;

pub use crate::contract::{
    CONTRACT_SERIES, CONTRACT_VERSION, CapabilityUse, ContentHash, TOOL_INTERFACE,
};
pub(crate) use cache::load_key;
pub use cache::{ArtifactCache, Compiled};
pub use engine::Runtime;
pub use epoch::EPOCH_TICK;
pub use flight::{Drained, Flight};
pub use grants::{ApprovalScope, Grants, SessionRef};
pub use memory::{MAX_MEMORY, SessionMemory};
pub use plugin::{
    CAPTURED_FILE, CapturedPlugin, LoadError, PluginSource, PluginVersion, human_bytes,
    is_declarative_file, is_plugin_file, plugin_files, plugin_name_for,
};
pub use sandbox::{Limits, Sandbox};
pub(crate) use session::{HANDLE_SESSION, MCP_SESSION};
pub use session::{MAX_SESSIONS, SessionState, check_session_name, session_key};

pub(crate) use host::{
    ENV_READ, FILE_READ, FILE_WRITE, NETWORK_FETCH, check_container_engine, kill_commands,
    tls_config,
};
pub use host::{
    LogSink, MAX_PROCESSES, MAX_TERMINAL_SESSIONS, Progress, ProgressSink, Terminals,
    with_log_sink, with_progress_sink,
};
