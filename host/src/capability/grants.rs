//! What one call may do, decided before it runs: its profile, the
//! permissions its tool declared (a capability is granted when one of its
//! permissions is declared and the profile allows it), the environment
//! variables it requires, and who approves dangerous commands.

use std::sync::Arc;

use crate::approval::Approvals;
use crate::capability::Profile;
use crate::contract::spec::ToolSpec;
use crate::policy::{PermissionDecision, PermissionPattern};

/// The capabilities of one call (or one stateful session).
#[derive(Debug, Clone)]
pub struct Grants {
    /// The profile the call runs under.
    pub profile: Arc<Profile>,
    /// The permissions the tools declare (patterns such as `file:*`);
    /// each capability asks [`Grants::allows`] for its own.
    pub declared: Vec<PermissionPattern>,
    /// Environment variables the tools require, which the environment
    /// capability passes when granted.
    pub requires_env: Vec<String>,
    /// Who approves dangerous commands, and the scope answers are kept in.
    pub approvals: Option<ApprovalScope>,
    /// The tool (or, for a stateful session, the plugin) the grants are for.
    pub subject: String,
    /// The caller's session, whose terminal the call's commands share
    /// (`None`: the call has a terminal of its own).
    pub session: Option<SessionRef>,
}

/// The caller's session: its key (`tenant\0session`) and the host's store
/// of what sessions keep (the terminal capability's `Terminals`). The store
/// is typed by the capability that uses it, not here, so that the grants
/// depend on no capability.
#[derive(Clone)]
pub struct SessionRef {
    pub key: String,
    pub store: Arc<dyn std::any::Any + Send + Sync>,
}

impl std::fmt::Debug for SessionRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRef")
            .field("key", &self.key)
            .finish()
    }
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
    /// Whether the rules the call was made under still hold once an
    /// approval asked during it is answered (a reload or a narrowing may
    /// have come meanwhile).
    pub in_force: Option<InForce>,
}

impl Grants {
    /// No capabilities at all.
    pub fn none(profile: Arc<Profile>) -> Self {
        Self {
            profile,
            declared: Vec::new(),
            requires_env: Vec::new(),
            approvals: None,
            subject: String::new(),
            session: None,
        }
    }

    /// The grants of `tools` (one tool, or every tool of a stateful plugin)
    /// under `profile`, with who approves dangerous commands.
    pub fn for_tools<'a>(
        profile: Arc<Profile>,
        tools: impl IntoIterator<Item = &'a ToolSpec>,
        approvals: Option<ApprovalScope>,
        subject: &str,
    ) -> Self {
        let mut declared = Vec::new();
        let mut requires_env = Vec::new();
        for tool in tools {
            declared.extend(
                tool.permissions
                    .iter()
                    .filter_map(|p| PermissionPattern::parse(p).ok()),
            );
            requires_env.extend(tool.requires_env.iter().cloned());
        }
        declared.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        declared.dedup();
        requires_env.sort();
        requires_env.dedup();
        Self {
            profile,
            declared,
            requires_env,
            approvals,
            subject: subject.to_string(),
            session: None,
        }
    }

    /// Whether `permission` is granted: a tool declares it and the profile
    /// allows it (or requires approval for it, which the dispatcher has
    /// obtained).
    pub fn allows(&self, permission: &str) -> bool {
        self.declared.iter().any(|p| p.matches(permission))
            && matches!(
                self.profile.permissions.decide(permission),
                PermissionDecision::Allowed | PermissionDecision::NeedsApproval { .. }
            )
    }

    /// Whether an instance made with `self` serves a call with `other`: the
    /// same profile, permissions and required variables.
    pub(crate) fn builds_like(&self, other: &Grants) -> bool {
        Arc::ptr_eq(&self.profile, &other.profile)
            && self.declared == other.declared
            && self.requires_env == other.requires_env
    }
}

/// Whether a caller made for a call is still the one its session would
/// give now, or the rules a call was made under still the running ones:
/// `Err` says why not.
#[derive(Clone)]
pub struct InForce(Arc<dyn Fn() -> Result<(), String> + Send + Sync>);

impl InForce {
    pub(crate) fn new(check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(check))
    }

    /// `Err` says why what a call was made under no longer holds.
    pub(crate) fn check(&self) -> Result<(), String> {
        (self.0)()
    }
}

impl std::fmt::Debug for InForce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InForce")
    }
}
