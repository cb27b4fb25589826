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

pub mod approval;
pub mod audit;
mod availability;
pub mod bundled;
mod caller;
pub mod check;
pub mod cli;
pub mod config;
pub mod confine;
pub mod contract;
mod declarative;
mod dispatch;
mod error;
pub mod escape;
pub mod handles;
pub mod hooks;
mod host;
pub mod policy;
pub mod registry;
pub mod reload;
pub mod runtime;
pub mod scaffold;
pub mod serve;
pub mod tasks;
pub mod toolsets;
pub mod trace;

pub use caller::Caller;
pub use contract::ToolSpec;
pub use dispatch::{Arguments, CallRequest};
pub use error::{CallError, ErrorKind, MAX_ERROR_MESSAGE};
pub use hooks::{CallHook, CallInfo};
pub use host::{
    DEFAULT_BATCH_CONCURRENCY, DEFAULT_SESSION_IDLE, DEFAULT_SESSIONS_MEMORY, Host, HostBuilder,
    Listed,
};
pub use policy::Profile;
pub use runtime::{Limits, LoadError, PluginSource, PluginVersion};
pub use toolsets::{CompositeToolset, Selection};
