//! The log capability's imports: `impl Capability` for [`Log`], and the WIT
//! interface `log`, each line bounded, into the host's log or a sink.

use std::future::Future;
use std::sync::Arc;

use wasmtime::component::Linker;
use wasmtime_wasi::WasiCtxBuilder;

use super::Log;
use crate::capability::grants::Grants;
use crate::capability::sandbox::{Capability, CapabilityInfo, InRoom, Room, Sandbox};
use crate::contract::bindings::toolhost::plugin::log::{self as wit, Host, Level};
use crate::error::bounded;

/// Longest log message kept, in bytes.
const MAX_MESSAGE: usize = 4096;

/// How many `log` records one instance may write per call before the rest
/// are dropped.
const MAX_LOG_RECORDS: u32 = 1000;

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

/// Most bytes of guest log messages a plugin writes into the host's log
/// per second; past them its lines are dropped until the next second, which
/// says how many were.
const HOST_LOG_PER_SECOND: usize = 64 << 10;

/// What a log line costs beyond its message: time, level, target and the
/// plugin and tool fields.
const LINE_OVERHEAD: usize = 128;

/// The guest lines each plugin wrote into the host's log this second.
static HOST_LOG: HostLog = HostLog(std::sync::Mutex::new(None));

struct HostLog(
    #[allow(clippy::type_complexity)]
    std::sync::Mutex<
        Option<std::collections::HashMap<String, (std::time::Instant, usize, usize)>>,
    >,
);

impl HostLog {
    /// Whether `plugin` may write `bytes` more into the host's log now. A
    /// plugin's guests cannot fill the disk the log is on, whoever calls.
    fn admit(&self, plugin: &str, bytes: usize) -> bool {
        let mut plugins = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let plugins = plugins.get_or_insert_with(Default::default);
        let now = std::time::Instant::now();
        if !plugins.contains_key(plugin) {
            // Plugins come and go with reloads: the table holds those of
            // the last second or so.
            plugins.retain(|_, (since, _, _)| now.duration_since(*since).as_secs() < 2);
            plugins.insert(plugin.to_string(), (now, 0, 0));
        }
        let (since, written, dropped) = plugins.get_mut(plugin).expect("inserted above");
        if now.duration_since(*since).as_secs() >= 1 {
            if *dropped > 0 {
                tracing::warn!(
                    plugin,
                    dropped = *dropped,
                    "guest log lines dropped: the plugin wrote more than {HOST_LOG_PER_SECOND} \
                     bytes a second into this log"
                );
            }
            (*since, *written, *dropped) = (now, 0, 0);
        }
        if *written + bytes > HOST_LOG_PER_SECOND {
            *dropped += 1;
            return false;
        }
        *written += bytes;
        true
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
/// also going to `sink`. (Not an `async fn`: that would hold `calls`
/// twice, once as its argument and once inside the scope.)
pub fn with_log_sink<F: Future>(sink: LogSink, calls: F) -> impl Future<Output = F::Output> {
    LOG_SINK.scope(sink, calls)
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
        // Charged as written: control characters escaped (`\x01`, four
        // bytes) and each line's time, level and fields.
        let written =
            message.len() + 3 * message.chars().filter(|c| c.is_control()).count() + LINE_OVERHEAD;
        if !HOST_LOG.admit(plugin, written) {
            return Ok(());
        }
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
