//! Guest log lines of a call forwarded to the MCP client as
//! `notifications/message`, at or above the level it asked for.

// rmcp marks MCP logging deprecated (a later revision drops it); the
// revisions served here define it, and clients use it.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::Peer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::RoleServer;

use crate::serve::answers::Held;

/// Most bytes of log notifications one call sends, as JSON on the wire
/// (escaped control characters count six bytes each): past it, lines are
/// dropped and the client is told how many, once.
const MAX_SENT: usize = 1 << 20;

/// The guest log lines of one call on their way to the client: a task that
/// sends them in order, started by the first line (most calls log nothing
/// and pay nothing). Each line counts, as sent, against the call's
/// [`MAX_SENT`] and, over HTTP, the tenant's `answers_held` until the
/// request's answer is done; lines past either are dropped.
pub(super) struct LogForward {
    floor: Option<LoggingLevel>,
    peer: Peer<RoleServer>,
    held: Option<Held>,
    state: std::sync::Mutex<Forwarding>,
}

#[derive(Default)]
struct Forwarding {
    #[allow(clippy::type_complexity)]
    started: Option<(
        tokio::sync::mpsc::UnboundedSender<LoggingMessageNotificationParam>,
        tokio::task::JoinHandle<()>,
    )>,
    /// Bytes of lines sent (or queued).
    sent: usize,
    /// Lines dropped, and why the first was.
    dropped: usize,
    why: Option<String>,
}

impl LogForward {
    fn send(&self, line: LoggingMessageNotificationParam) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.dropped > 0 {
            state.dropped += 1;
            return;
        }
        let size = sent_size(&line);
        let refused = if state.sent + size > MAX_SENT {
            Some(format!(
                "the call's log notifications reached {MAX_SENT} bytes, the most one call sends"
            ))
        } else {
            self.held
                .as_ref()
                .and_then(|held| held.keep(size).err())
                .map(|refused| refused.message().to_string())
        };
        if let Some(why) = refused {
            state.dropped = 1;
            state.why = Some(why);
            return;
        }
        state.sent += size;
        let peer = &self.peer;
        let (sender, _) = state.started.get_or_insert_with(|| start(peer.clone()));
        let _ = sender.send(line);
    }

    /// Waits until every line sent so far has gone to the client, after
    /// telling it how many were dropped, if any.
    pub(super) async fn finish(&self) {
        let (started, dropped) = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let dropped = std::mem::take(&mut state.dropped);
            let why = state.why.take().unwrap_or_default();
            let notice = (dropped > 0).then(|| {
                LoggingMessageNotificationParam::new(
                    LoggingLevel::Warning,
                    serde_json::json!({
                        "message": format!("{dropped} log lines of this call were dropped: {why}"),
                    }),
                )
                .with_logger("toolhost".to_string())
            });
            if notice.is_some() && state.started.is_none() {
                state.started = Some(start(self.peer.clone()));
            }
            (state.started.take(), notice)
        };
        if let Some((sender, task)) = started {
            if let Some(notice) = dropped {
                let _ = sender.send(notice);
            }
            drop(sender);
            let _ = task.await;
        }
    }
}

/// The task sending lines to `peer` in order.
#[allow(clippy::type_complexity)]
fn start(
    peer: Peer<RoleServer>,
) -> (
    tokio::sync::mpsc::UnboundedSender<LoggingMessageNotificationParam>,
    tokio::task::JoinHandle<()>,
) {
    let (sender, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        while let Some(line) = lines.recv().await {
            if peer.notify_logging_message(line).await.is_err() {
                return;
            }
        }
    });
    (sender, task)
}

/// What `line` takes as JSON: its parameters and the notification's
/// framing.
fn sent_size(line: &LoggingMessageNotificationParam) -> usize {
    let mut size = crate::serve::answers::Counted(0);
    let _ = serde_json::to_writer(&mut size, line);
    size.0 + 64
}

/// A log sink sending guest log lines at or above `floor` (none: no line)
/// to `peer` as `notifications/message`, and the forwarding to finish before
/// answering.
pub(super) fn log_forwarder(
    floor: Option<LoggingLevel>,
    peer: Peer<RoleServer>,
    held: Option<Held>,
) -> (crate::capability::log::LogSink, Arc<LogForward>) {
    let forward = Arc::new(LogForward {
        floor,
        peer,
        held,
        state: std::sync::Mutex::new(Forwarding::default()),
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
