//! `log`: a guest's log lines, into the host's log (and a server's client
//! that asked for them), bounded in size and number per call. Every tool
//! has it: no permission, no table.

mod imports;
pub use imports::{LogSink, with_log_sink};

/// Log lines: every tool has them.
pub(crate) struct Log;
