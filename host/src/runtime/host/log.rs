use crate::error::bounded;
use crate::runtime::bindings::toolhost::plugin::log::{Host, Level};
use crate::runtime::sandbox::Sandbox;

/// Longest log message kept, in bytes.
const MAX_MESSAGE: usize = 4096;

impl Host for Sandbox {
    async fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        if !self.count_log_record() {
            return Ok(());
        }
        let plugin = &*self.identity.plugin;
        let tool = self.identity.tool.as_deref().unwrap_or("-");
        let message = bounded(&message, MAX_MESSAGE);
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
