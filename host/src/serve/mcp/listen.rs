//! A `subscriptions/listen` stream (MCP 2026-07-28): the tool list's
//! changes, when the client asked for them, and status notices of the
//! caller's tasks the stream names (the Tasks extension's filter).

use rmcp::service::SubscriptionContext;

use crate::caller::Caller;
use crate::host::Host;

/// Serves the stream of `context` for `caller` until it ends.
pub(super) async fn serve(host: &Host, caller: &Caller, context: SubscriptionContext) {
    let mut events = host.events();
    let list_changes = context.accepted().tools_list_changed == Some(true);
    // Each named task's state now, then at each change.
    let wanted = super::tasks::listened(context.request_context());
    let mut changes = host.tasks().0.changes();
    for id in &wanted {
        if super::tasks::notice(host, caller, id, &context)
            .await
            .is_err()
        {
            return;
        }
    }
    loop {
        let mut told: Vec<&str> = Vec::new();
        tokio::select! {
            () = context.cancelled() => return,
            changed = changes.recv(), if !wanted.is_empty() => match changed {
                Ok(id) => told.extend(wanted.iter().map(String::as_str).filter(|w| *w == &*id)),
                // Fallen behind: each is told its state now.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    told.extend(wanted.iter().map(String::as_str));
                }
                Err(_) => {}
            },
            event = events.recv() => match event {
                Ok(event) if !event.changes_tools() => {}
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    if list_changes && context.sink().notify_tool_list_changed().await.is_err() {
                        return;
                    }
                }
                Err(_) => return,
            },
        }
        for id in told {
            if super::tasks::notice(host, caller, id, &context)
                .await
                .is_err()
            {
                return;
            }
        }
    }
}
