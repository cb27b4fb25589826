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

pub(crate) use cache::load_key;
pub use cache::{ArtifactCache, Compiled};
pub use engine::Runtime;
pub use flight::{Drained, Flight};
pub use plugin::{CAPTURED_FILE, CapturedPlugin, PluginVersion};
pub(crate) use stateful::{HANDLE_SESSION, MCP_SESSION};
pub use stateful::{MAX_SESSIONS, SessionState, check_session_name, session_key};
