//! The narrowing an MCP client with a session chose in `initialize`
//! (`capabilities.experimental.toolhost.narrow`): the session's calls keep
//! only what it allows; one that cannot be read keeps no permission.

use rmcp::Peer;
use rmcp::service::RoleServer;

use crate::caller::SessionNarrowing;

/// The narrowing a client chose in `initialize`:
/// `capabilities.experimental.toolhost.narrow = {"allow": [...], "deny": [...]}`.
/// One that cannot be read keeps no permission (fail closed).
pub(super) fn session_narrowing(peer: &Peer<RoleServer>) -> SessionNarrowing {
    let mut session = SessionNarrowing::default();
    let written = peer.peer_info().and_then(|info| {
        info.capabilities
            .experimental
            .as_ref()?
            .get("toolhost")?
            .get("narrow")
            .cloned()
    });
    if let Some(value) = written {
        let keep_nothing = || crate::policy::Narrowing {
            allow: Some(Vec::new()),
            deny: Vec::new(),
        };
        let narrowing = match serde_json::from_value::<crate::policy::Narrowing>(value) {
            Ok(narrowing) => {
                match crate::caller::too_large(narrowing.patterns(), narrowing.bytes()) {
                    None => narrowing,
                    Some(why) => {
                        tracing::warn!("{why}: this session keeps no permission");
                        keep_nothing()
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%error, "an unreadable session narrowing keeps no permission");
                keep_nothing()
            }
        };
        session.push(narrowing);
    }
    session
}
