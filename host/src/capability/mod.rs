//! The capabilities guests may be given, one folder each: `file`,
//! `network`, `terminal`, `env`, `log`, `progress`. A folder holds the
//! capability's rules (no wasmtime), its imports and its sandbox parts.
//! Around them, what they plug into: a capability's table of a profile
//! (`section`), the permission profile (`profile`), a call's grants
//! (`grants`), and a guest store's data with the `Capability` trait
//! (`sandbox`). Listed once, in `list`.

mod all;
pub mod env;
pub mod file;
pub(crate) mod grants;
pub(crate) mod list;
pub(crate) mod log;
pub mod network;
pub(crate) mod profile;
pub(crate) mod progress;
pub(crate) mod sandbox;
pub mod section;
#[cfg(test)]
pub mod tally;
pub mod terminal;

#[cfg(test)]
mod robustness_tests;
#[cfg(test)]
mod tests;

pub(crate) use all::CAPABILITIES;
pub use grants::{ApprovalScope, Grants, InForce, SessionRef};
pub use log::{LogSink, with_log_sink};
pub use profile::{KeptBy, Profile, ToolRules};
pub use progress::{Progress, ProgressSink, with_progress_sink};
pub use sandbox::Sandbox;
pub use terminal::{MAX_PROCESSES, MAX_TERMINAL_SESSIONS, Terminals};
