//! The host side of each WIT import, one file per interface.

pub(crate) mod filesystem;
mod http;
mod log;
mod process_group;
mod progress;

pub use log::{LogSink, with_log_sink};
pub(crate) use process_group::kill_all as kill_commands;
pub use progress::{Progress, ProgressSink, with_progress_sink};
mod terminal;
