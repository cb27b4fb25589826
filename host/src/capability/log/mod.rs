//! `log`: a guest's log lines, into the host's log (and a server's client
//! that asked for them), bounded in size and number per call.

use std::future::Future;
use std::sync::Arc;

use wasmtime::component::Linker;
use wasmtime_wasi::WasiCtxBuilder;

use crate::capability::grants::Grants;
use crate::capability::sandbox::{Capability, CapabilityInfo, InRoom, Room, Sandbox};
use crate::contract::bindings::toolhost::plugin::log::{self as wit, Host, Level};
use crate::error::bounded;

/// Longest log message kept, in bytes.
const MAX_MESSAGE: usize = 4096;

/// How many `log` records one instance may write per call before the rest
/// are dropped.
const MAX_LOG_RECORDS: u32 = 1000;

/// Log lines: every tool has them.
pub(crate) struct Log;

impl Capability for Log {
    const INFO: CapabilityInfo = CapabilityInfo {
        name: "log",
        permissions: &[],
        section: None,
        description: "log lines into the host's log, at most 1000 per call",
        each: &[],
    };
    /// Records written in the current call.
    type State = u32;

    fn state(_: &Grants, _: &mut WasiCtxBuilder) -> u32 {
        0
    }

    fn begin_call(records: &mut u32) {
        *records = 0;
    }

    fn add_to_linker(linker: &mut Linker<Sandbox>) -> wasmtime::Result<()> {
        wit::add_to_linker::<_, InRoom<Self>>(linker, Sandbox::room::<Self>)?;
        // The same functions under contract 0.1's name.
        crate::contract::adapter::v0_1::add_log_to_linker::<_, InRoom<Self>>(
            linker,
            Sandbox::room::<Self>,
        )
    }
}

impl Room<'_, Log> {
    /// Counts one record; false once the call has written more than
    /// [`MAX_LOG_RECORDS`] (warned about once).
    fn count_record(&mut self) -> bool {
        *self.state += 1;
        if *self.state == MAX_LOG_RECORDS + 1 {
            tracing::warn!(
                plugin = %self.call.identity.plugin,
                "guest wrote more than {MAX_LOG_RECORDS} log records in one call; dropping the rest"
            );
        }
        *self.state <= MAX_LOG_RECORDS
    }
}

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

impl Host for Room<'_, Log> {
    async fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        if !self.count_record() {
            return Ok(());
        }
        let plugin = &*self.call.identity.plugin;
        let tool = self.call.identity.tool_name();
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
