use std::future::Future;
use std::sync::Arc;

use crate::contract::bindings::toolhost::plugin::log::{Host, Level};
use crate::error::bounded;
use crate::runtime::sandbox::Sandbox;

/// Longest log message kept, in bytes.
const MAX_MESSAGE: usize = 4096;

/// Where the guest log lines of calls go besides the server's log: a server
/// passes one for a client that asked for log messages. Called with the
/// level (`trace`, `debug`, `info`, `warn`, `error`), the plugin, the tool
/// and the message.
pub type LogSink = Arc<dyn Fn(&'static str, &str, &str, &str) + Send + Sync>;

tokio::task_local! {
    static LOG_SINK: LogSink;
}

/// Runs `calls` (calls dispatched on this task) with their guests' log lines
/// also going to `sink`.
pub async fn with_log_sink<F: Future>(sink: LogSink, calls: F) -> F::Output {
    LOG_SINK.scope(sink, calls).await
}

impl Host for Sandbox {
    async fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        if !self.count_log_record() {
            return Ok(());
        }
        let plugin = &*self.identity.plugin;
        let tool = self.identity.tool.as_deref().unwrap_or("-");
        let message = bounded(&message, MAX_MESSAGE);
        let name = match level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        let _ = LOG_SINK.try_with(|sink| sink(name, plugin, tool, &message));
        match level {
            Level::Trace => tracing::trace!(target: "toolhost::guest", plugin, tool, "{message}"),
            Level::Debug => tracing::debug!(target: "toolhost::guest", plugin, tool, "{message}"),
            Level::Info => tracing::info!(target: "toolhost::guest", plugin, tool, "{message}"),
            Level::Warn => tracing::warn!(target: "toolhost::guest", plugin, tool, "{message}"),
            Level::Error => tracing::error!(target: "toolhost::guest", plugin, tool, "{message}"),
        }
        Ok(())
    }
}
