//! toolhost runs LLM-agent tools as sandboxed WebAssembly components.
//!
//! A tool plugin is one `.wasm` component built against the contract in
//! `wit/`. The [`Host`] loads plugins, lists their tools and runs every call in
//! a fresh sandbox with memory and time limits:
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let host = toolhost::Host::builder()
//!     .bundled(true)
//!     .plugin_dir("plugins")
//!     .build()
//!     .await?;
//! for tool in host.tools() {
//!     println!("{}: {}", tool.name, tool.description);
//! }
//! match host.call("echo", r#"{"text": "hi"}"#).await {
//!     Ok(result) => println!("{}", result.get()),
//!     Err(error) => println!("{}", error.to_json()),
//! }
//! # Ok(())
//! # }
//! ```

// The modules by floor, lowest first: each imports only modules listed
// before it (`tests/all/layout.rs` checks that no two import each other,
// directly or around a circle).

// Imports nothing of ours.
pub mod bundled;
pub mod contract;
mod error;
pub mod escape;
mod telemetry;
mod tls;

// Rules and parts with no capability in them.
pub mod approval;
pub mod audit;
mod availability;
mod caller;
pub mod policy;
pub mod store;
pub mod toolsets;
pub mod trace;

// The capabilities, and the configuration that grants them.
pub mod capability;
pub mod config;

// Where plugins come from, and wasmtime without capabilities.
pub mod runtime;
pub mod source;

// What the host keeps of its plugins and calls.
pub mod check;
mod cluster;
pub mod handles;
pub mod hooks;
pub mod registry;
pub mod tasks;

// The host.
mod host;

// Wire formats and servers, the command line.
pub mod cli;
pub mod scaffold;
pub mod serve;

pub use caller::Caller;
pub use capability::Profile;
pub use config::{DEFAULT_BATCH_CONCURRENCY, DEFAULT_SESSION_IDLE, DEFAULT_SESSIONS_MEMORY};
pub use contract::ToolSpec;
pub use error::{CallError, ErrorKind, MAX_ERROR_MESSAGE};
pub use hooks::{CallHook, CallInfo};
pub use host::{
    Arguments, CallRequest, DEFAULT_DEBOUNCE, DEFAULT_GRACE, Host, HostBuilder, Listed,
    WatchOptions, Watcher,
};
pub use policy::Limits;
pub use registry::ReloadEvent;
pub use runtime::PluginVersion;
pub use source::{LoadError, PluginSource};
pub use toolsets::{CompositeToolset, Selection};
