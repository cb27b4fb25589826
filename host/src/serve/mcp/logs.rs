//! Guest log lines of a call forwarded to the MCP client as
//! `notifications/message`, at or above the level it asked for.

// rmcp marks MCP logging deprecated (a later revision drops it); the
// revisions served here define it, and clients use it.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::Peer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::RoleServer;

/// The guest log lines of one call on their way to the client: a task that
/// sends them in order, started by the first line (most calls log nothing
/// and pay nothing).
pub(super) struct LogForward {
    floor: Option<LoggingLevel>,
    peer: Peer<RoleServer>,
    #[allow(clippy::type_complexity)]
    started: std::sync::Mutex<
        Option<(
            tokio::sync::mpsc::UnboundedSender<LoggingMessageNotificationParam>,
            tokio::task::JoinHandle<()>,
        )>,
    >,
}

impl LogForward {
    fn send(&self, line: LoggingMessageNotificationParam) {
        let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        let (sender, _) = started.get_or_insert_with(|| {
            let (sender, mut lines) = tokio::sync::mpsc::unbounded_channel();
            let peer = self.peer.clone();
            let task = tokio::spawn(async move {
                while let Some(line) = lines.recv().await {
                    if peer.notify_logging_message(line).await.is_err() {
                        return;
                    }
                }
            });
            (sender, task)
        });
        let _ = sender.send(line);
    }

    /// Waits until every line sent so far has gone to the client.
    pub(super) async fn finish(&self) {
        let started = self
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((sender, task)) = started {
            drop(sender);
            let _ = task.await;
        }
    }
}

/// A log sink sending guest log lines at or above `floor` (none: no line)
/// to `peer` as `notifications/message`, and the forwarding to finish before
/// answering.
pub(super) fn log_forwarder(
    floor: Option<LoggingLevel>,
    peer: Peer<RoleServer>,
) -> (crate::capability::log::LogSink, Arc<LogForward>) {
    let forward = Arc::new(LogForward {
        floor,
        peer,
        started: std::sync::Mutex::new(None),
    });
    let lines = forward.clone();
    let sink: crate::capability::log::LogSink = Arc::new(move |level, plugin, tool, message| {
        let level = match level {
            "error" => LoggingLevel::Error,
            "warn" => LoggingLevel::Warning,
            "info" => LoggingLevel::Info,
            _ => LoggingLevel::Debug,
        };
        if lines
            .floor
            .is_none_or(|floor| severity(level) < severity(floor))
        {
            return;
        }
        let data = serde_json::json!({ "plugin": plugin, "tool": tool, "message": message });
        // `-`: outside a tool (a stateful plugin's session setup).
        let logger = match tool {
            "-" => plugin.to_string(),
            tool => format!("{plugin}/{tool}"),
        };
        lines.send(LoggingMessageNotificationParam::new(level, data).with_logger(logger));
    });
    (sink, forward)
}

/// The order of MCP log levels, least severe first.
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
