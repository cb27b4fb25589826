//! `[tenant_caps]`: how much each tenant (and the local caller, counted as
//! one more) may make a server hold: narrowed sessions and how long an idle
//! one is kept, pending approvals, approval event streams, MCP sessions and open `/mcp` responses,
//! unread background output, audit log bytes a minute, and its share of
//! `sessions_memory`. Each is at least 1.

use std::time::Duration;

use serde::Deserialize;

use crate::policy::{ByteSize, Span};

/// `[tenant_caps]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantCapsConfig {
    /// Sessions one tenant may have narrowed (`POST /v1/sessions`) at once.
    #[serde(default)]
    pub narrowed_sessions: Option<usize>,
    /// How long a narrowed session no call used is kept.
    #[serde(default)]
    pub narrowing_idle: Option<Span>,
    /// Approvals of one tenant waiting for an answer at once.
    #[serde(default)]
    pub pending_approvals: Option<usize>,
    /// `GET /v1/approvals/events` streams one tenant may hold open.
    #[serde(default)]
    pub event_streams: Option<usize>,
    /// MCP sessions (`/mcp`) one tenant may hold open.
    #[serde(default)]
    pub mcp_sessions: Option<usize>,
    /// `/mcp` responses one tenant may have open at once, streams included.
    #[serde(default)]
    pub mcp_streams: Option<usize>,
    /// Unread output of one tenant's background processes, all together.
    #[serde(default)]
    pub background_output: Option<ByteSize>,
    /// Bytes of audit log one tenant's calls may add a minute.
    #[serde(default)]
    pub audit_per_minute: Option<ByteSize>,
    /// Memory one tenant's stateful sessions may hold together.
    #[serde(default)]
    pub sessions_memory: Option<ByteSize>,
    /// Bytes of `/v1/tool_calls` answers one tenant's requests may hold,
    /// being built or not yet sent.
    #[serde(default)]
    pub answers_held: Option<ByteSize>,
}

/// `[tenant_caps]`, validated, with the defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantCaps {
    /// Sessions one tenant may have narrowed at once (default 256).
    pub narrowed_sessions: usize,
    /// How long an unused narrowed session is kept (default 1 h).
    pub narrowing_idle: Duration,
    /// Approvals of one tenant waiting at once (default 64).
    pub pending_approvals: usize,
    /// Approval event streams one tenant may hold open (default 8).
    pub event_streams: usize,
    /// MCP sessions one tenant may hold open (default 64).
    pub mcp_sessions: usize,
    /// `/mcp` responses one tenant may have open at once, a stream
    /// (`subscriptions/listen`, a session's GET) until it ends (default 32).
    pub mcp_streams: usize,
    /// Unread background output of one tenant, in bytes (default 16 MiB).
    pub background_output: usize,
    /// Audit log bytes one tenant may add a minute (default 8 MiB).
    pub audit_per_minute: usize,
    /// Memory one tenant's stateful sessions may hold together; `None`:
    /// `sessions_memory` shared evenly by the tenants and the local caller.
    pub sessions_memory: Option<usize>,
    /// Bytes of `/v1/tool_calls` answers one tenant's requests may hold,
    /// being built or not yet sent (default 64 MiB).
    pub answers_held: usize,
}

impl Default for TenantCaps {
    fn default() -> Self {
        Self {
            narrowed_sessions: 256,
            narrowing_idle: Duration::from_secs(3600),
            pending_approvals: 64,
            event_streams: 8,
            mcp_sessions: 64,
            mcp_streams: 32,
            background_output: 16 << 20,
            audit_per_minute: 8 << 20,
            sessions_memory: None,
            answers_held: 64 << 20,
        }
    }
}

impl TenantCaps {
    /// The caps as written, each checked to be at least 1.
    pub(super) fn validate(
        written: &TenantCapsConfig,
        problems: &mut Vec<(String, String)>,
    ) -> Self {
        let defaults = Self::default();
        let mut count = |key: &str, value: Option<usize>, default: usize| match value {
            Some(0) => {
                problems.push((
                    format!("tenant_caps.{key}"),
                    "must be at least 1; leave it out for the default".into(),
                ));
                default
            }
            Some(n) => n,
            None => default,
        };
        let narrowed_sessions = count(
            "narrowed_sessions",
            written.narrowed_sessions,
            defaults.narrowed_sessions,
        );
        let pending_approvals = count(
            "pending_approvals",
            written.pending_approvals,
            defaults.pending_approvals,
        );
        let event_streams = count(
            "event_streams",
            written.event_streams,
            defaults.event_streams,
        );
        let mcp_sessions = count("mcp_sessions", written.mcp_sessions, defaults.mcp_sessions);
        let mcp_streams = count("mcp_streams", written.mcp_streams, defaults.mcp_streams);
        let bytes =
            |size: Option<ByteSize>| size.map(|s| usize::try_from(s.0).unwrap_or(usize::MAX));
        let background_output = count(
            "background_output",
            bytes(written.background_output),
            defaults.background_output,
        );
        let audit_per_minute = count(
            "audit_per_minute",
            bytes(written.audit_per_minute),
            defaults.audit_per_minute,
        );
        let answers_held = count(
            "answers_held",
            bytes(written.answers_held),
            defaults.answers_held,
        );
        let sessions_memory = written.sessions_memory.map(|size| {
            count(
                "sessions_memory",
                Some(usize::try_from(size.0).unwrap_or(usize::MAX)),
                1,
            )
        });
        let narrowing_idle = match written.narrowing_idle {
            Some(Span(idle)) if idle.is_zero() => {
                problems.push((
                    "tenant_caps.narrowing_idle".into(),
                    "must be longer than 0s; leave it out for the default".into(),
                ));
                defaults.narrowing_idle
            }
            Some(Span(idle)) => idle,
            None => defaults.narrowing_idle,
        };
        Self {
            narrowed_sessions,
            narrowing_idle,
            pending_approvals,
            event_streams,
            mcp_sessions,
            mcp_streams,
            background_output,
            audit_per_minute,
            sessions_memory,
            answers_held,
        }
    }

    /// One tenant's share of `total` bytes of `sessions_memory` on a server
    /// with `tenants` tenants: `tenant_caps.sessions_memory` if set, else
    /// an even share with the local caller counted as one more, so that
    /// every tenant at its share still leaves each other its own.
    pub fn sessions_memory_share(&self, total: usize, tenants: usize) -> usize {
        self.sessions_memory
            .unwrap_or(total / (tenants + 1))
            .clamp(1, total.max(1))
    }
}
