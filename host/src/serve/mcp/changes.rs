//! What an MCP server tells its client of itself over time: its session's
//! id, and `notifications/tools/list_changed` after each reload.

use rmcp::service::{Peer, RoleServer};

use crate::host::Host;

/// Sends `notifications/tools/list_changed` to `peer` after each reload of
/// `host`, until the client goes away.
pub(super) fn notify_changes(host: &Host, peer: Peer<RoleServer>) {
    let mut events = host.events();
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) if event.changes_tools() => {
                    if peer.is_transport_closed() || peer.notify_tool_list_changed().await.is_err()
                    {
                        return;
                    }
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    if peer.notify_tool_list_changed().await.is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    });
}

/// A new MCP session's id: in the ids toolhost makes, which no session a
/// caller names can spell (see [`crate::runtime::check_session_name`]).
pub(super) fn session_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let prefix = crate::runtime::MCP_SESSION;
    format!("{prefix}{now:x}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}
