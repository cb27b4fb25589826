//! What one call may do, decided before it runs: its profile, the
//! capabilities its tool declared that the profile allows, the environment
//! variables it receives, who approves dangerous commands; and the record of
//! what it used or was refused, for the audit line.

use std::sync::Arc;

use crate::approval::Approvals;
use crate::contract::spec::ToolSpec;
use crate::policy::{PermissionDecision, PermissionPattern, Profile};

/// The capabilities of one call (or one stateful session).
#[derive(Debug, Clone)]
pub struct Grants {
    /// The profile the call runs under.
    pub profile: Arc<Profile>,
    /// The tool may read granted files.
    pub file_read: bool,
    /// The tool may write granted files.
    pub file_write: bool,
    /// The tool may fetch from allowed hosts.
    pub network: bool,
    /// The tool may run commands.
    pub terminal: bool,
    /// Environment variables the guest sees, with their values.
    pub env: Vec<(String, String)>,
    /// Who approves dangerous commands, and the scope answers are kept in.
    pub approvals: Option<ApprovalScope>,
    /// The tool (or, for a stateful session, the plugin) the grants are for.
    pub subject: String,
}

/// The approver and the scope (tenant, session) its `session` answers apply to.
#[derive(Debug, Clone)]
pub struct ApprovalScope {
    /// The approvals of the caller.
    pub approvals: Arc<Approvals>,
    /// Tenant name or `-`, then session id or `-`.
    pub scope: String,
    /// The tenant, if any.
    pub tenant: Option<String>,
}

impl Grants {
    /// No capabilities at all.
    pub fn none(profile: Arc<Profile>) -> Self {
        Self {
            profile,
            file_read: false,
            file_write: false,
            network: false,
            terminal: false,
            env: Vec::new(),
            approvals: None,
            subject: String::new(),
        }
    }

    /// The capabilities of `tools` (one tool, or every tool of a stateful
    /// plugin) under `profile`: each known permission that a tool declares and
    /// the profile allows (or requires approval for, which the dispatcher has
    /// obtained) is granted; env vars are those the tools require, the
    /// profile passes, and the host has.
    pub fn for_tools<'a>(
        profile: Arc<Profile>,
        tools: impl IntoIterator<Item = &'a ToolSpec> + Clone,
        approvals: Option<ApprovalScope>,
        subject: &str,
    ) -> Self {
        let granted = |permission: &str| {
            tools.clone().into_iter().any(|tool| {
                tool.permissions.iter().any(|declared| {
                    PermissionPattern::parse(declared).is_ok_and(|p| p.matches(permission))
                })
            }) && matches!(
                profile.permissions.decide(permission),
                PermissionDecision::Allowed | PermissionDecision::NeedsApproval { .. }
            )
        };
        let env = if granted("env:read") {
            let mut env: Vec<(String, String)> = tools
                .clone()
                .into_iter()
                .flat_map(|tool| tool.requires_env.iter())
                .filter(|name| profile.allows_env(name))
                .filter_map(|name| std::env::var(name).ok().map(|value| (name.clone(), value)))
                .collect();
            env.sort();
            env.dedup();
            env
        } else {
            Vec::new()
        };
        Self {
            file_read: granted("file:read"),
            file_write: granted("file:write"),
            network: granted("network:fetch"),
            terminal: granted("terminal:execute"),
            env,
            approvals,
            subject: subject.to_string(),
            profile,
        }
    }
}
