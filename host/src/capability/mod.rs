//! The capabilities guests may be given, one folder each: `file`,
//! `network`, `terminal`, `env`, `log`, `progress`. A folder holds the
//! capability's imports and its sandbox parts. Around them, what they plug
//! into: a call's grants (`grants`), and a guest store's data with the
//! `Capability` trait (`sandbox`). Listed once, in `all`.

mod all;
mod env;
pub(crate) mod file;
pub(crate) mod grants;
pub(crate) mod log;
mod network;
pub(crate) mod progress;
pub(crate) mod sandbox;
pub(crate) mod terminal;

#[cfg(test)]
mod tests;

pub(crate) use all::CAPABILITIES;
pub use grants::{ApprovalScope, Grants, SessionRef};
pub use log::{LogSink, with_log_sink};
pub use progress::{Progress, ProgressSink, with_progress_sink};
pub use sandbox::Sandbox;
pub use terminal::{MAX_PROCESSES, MAX_TERMINAL_SESSIONS, Terminals};
