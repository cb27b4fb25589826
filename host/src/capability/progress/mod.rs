//! `progress`: a guest's progress reports, passed to the server's client
//! that asked for them. Every tool has it: no permission, no table.

mod imports;
pub use imports::{Progress, ProgressSink, with_progress_sink};

/// Progress reports: every tool has them.
pub(crate) struct Reports;
