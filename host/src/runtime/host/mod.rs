//! The capabilities guests may be given: one module each, implementing
//! [`Capability`](crate::runtime::sandbox::Capability), listed once in
//! [`CAPABILITIES`].

mod env;
pub(crate) mod filesystem;
mod http;
mod log;
mod process_group;
mod progress;
pub(crate) mod terminal;
#[cfg(test)]
mod tests;

pub use log::{LogSink, with_log_sink};
pub use progress::{Progress, ProgressSink, with_progress_sink};
pub(crate) use terminal::session::check_container_engine;
pub use terminal::session::{MAX_PROCESSES, MAX_TERMINAL_SESSIONS, Terminals};

use crate::runtime::sandbox::Linked;

/// Ends every command still running and removes every terminal container,
/// for a process about to exit without dropping the calls that run them
/// (so that nothing of theirs outlives toolhost).
pub(crate) fn kill_commands() {
    process_group::kill_all();
    terminal::session::remove_containers();
}

/// Every capability, in the order it is linked (WASI before them).
pub(crate) static CAPABILITIES: &[Linked] = &[
    Linked::of::<filesystem::FileAccess>(),
    Linked::of::<env::Environment>(),
    Linked::of::<http::Fetch>(),
    Linked::of::<terminal::Terminal>(),
    Linked::of::<log::Log>(),
    Linked::of::<progress::Reports>(),
];
