//! How far the running call has come, for the caller to show while it waits.
//! Needs no permission.
//!
//! ```ignore
//! use toolhost_sdk::prelude::*;
//! use toolhost_sdk::progress;
//!
//! /// Index every file of a directory.
//! #[tool(permissions = ["file:read"], read_only)]
//! fn index(args: IndexArgs) -> Result<Value, ToolError> {
//!     let files = list_files(&args.dir)?;
//!     let total = files.len() as f64;
//!     for (done, file) in files.iter().enumerate() {
//!         index_one(file)?;
//!         progress::report(done as f64 + 1.0, Some(total), Some(&format!("indexed {file}")));
//!     }
//!     Ok(json!({ "indexed": files.len() }))
//! }
//! ```
//!
//! An MCP client that sent a `progressToken` with its call receives each
//! report as `notifications/progress`; without one, reports go nowhere, so a
//! tool reports whether anyone listens or not. `progress` must increase from
//! one report to the next (reports that do not are dropped), and the host
//! passes on at most one report every 50 ms, the latest, so reporting often
//! costs little.

use crate::__private::bindings::toolhost::plugin::progress;

/// Reports that the call has done `progress` of `total` (when the total is
/// known), with an optional message for people ("3 of 10 files").
pub fn report(progress: f64, total: Option<f64>, message: Option<&str>) {
    progress::report(progress, total, message);
}
