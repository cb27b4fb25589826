//! The vocabulary of approvals: what is asked, the answers, and who answers.

use std::fmt;
use std::path::PathBuf;

use futures::future::BoxFuture;

/// Most bytes of an answer read from a webhook or an approval hook tool;
/// a longer one answers nothing (the approval is left to the others).
pub const MAX_ANSWER: usize = 64 << 10;

/// What is being asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A tool with a permission the profile marks `approval_required`.
    Permission(String),
    /// A command the dangerous-command detector flagged.
    DangerousCommand {
        /// The command line.
        command: String,
        /// What the detector found: `(category, reason)`.
        findings: Vec<(String, String)>,
        /// Where it would run (for automatic rules), when known.
        workdir: Option<PathBuf>,
        /// The directories it may write, for automatic rules.
        writable: Vec<PathBuf>,
        /// Whether it starts in a new shell with the profile's environment,
        /// not in a session whose earlier commands may have changed what
        /// its words run (`PATH`, functions).
        fresh_shell: bool,
    },
}

/// A question for the approver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The tool asking.
    pub tool: String,
    /// The profile it runs under.
    pub profile: String,
    /// The tenant, if any.
    pub tenant: Option<String>,
    /// The session, if any.
    pub session: Option<String>,
    /// What needs approval.
    pub subject: Subject,
    /// The change in the configuration after which it is not asked (for
    /// example `remove "file:write" from approval_required under
    /// [profiles.p]`), named in a refusal with the configuration's file.
    pub config_change: Option<String>,
}

impl ApprovalRequest {
    /// What an answer is remembered under: the tool and permission, or the
    /// exact command line.
    pub fn key(&self) -> String {
        match &self.subject {
            Subject::Permission(permission) => format!("tool {} {permission}", self.tool),
            Subject::DangerousCommand { command, .. } => format!("command {command}"),
        }
    }

    /// The request as JSON, as approvers (the API, webhooks, hook tools)
    /// see it.
    pub fn to_json(&self) -> serde_json::Value {
        let subject = match &self.subject {
            Subject::Permission(permission) => serde_json::json!({ "permission": permission }),
            Subject::DangerousCommand {
                command, findings, ..
            } => serde_json::json!({
                "command": command,
                "findings": findings
                    .iter()
                    .map(|(category, reason)| {
                        serde_json::json!({ "category": category, "reason": reason })
                    })
                    .collect::<Vec<_>>(),
            }),
        };
        serde_json::json!({
            "tenant": self.tenant,
            "session": self.session,
            "tool": self.tool,
            "profile": self.profile,
            "subject": subject,
            "question": self.to_string(),
        })
    }
}

impl fmt::Display for ApprovalRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subject {
            Subject::Permission(permission) => write!(
                f,
                "tool {:?} wants {permission} (profile {:?} requires approval)",
                self.tool, self.profile
            ),
            Subject::DangerousCommand {
                command, findings, ..
            } => {
                let reasons: Vec<&str> = findings.iter().map(|(_, r)| r.as_str()).collect();
                write!(
                    f,
                    "tool {:?} wants to run a dangerous command ({}): {command}",
                    self.tool,
                    reasons.join(", ")
                )
            }
        }
    }
}

/// An answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Allow this one call.
    Once,
    /// Allow for the rest of this session (or tenant).
    Session,
    /// Allow from now on; kept in the allowlist file.
    Always,
    /// Refuse.
    Deny,
}

impl Approval {
    /// `once`, `session`, `always` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Session => "session",
            Self::Always => "always",
            Self::Deny => "deny",
        }
    }
}

/// Decides approval requests.
pub trait Approver: Send + Sync + 'static {
    /// Answers `request`. Taking longer than the configured timeout is a deny.
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval>;

    /// Answers `request`, or says why it cannot be asked now (then it is
    /// refused for that reason). By default it is always asked.
    fn ask<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Result<Approval, String>> {
        Box::pin(async move { Ok(self.approve(request).await) })
    }

    /// Says, in a refusal, why it was not approved and how this approver
    /// could approve it (the allowlist entry and the configuration change
    /// follow, from the request).
    fn how_to_allow(&self) -> &str {
        "approve it when asked"
    }
}

/// `o`/`once`, `s`/`session`, `a`/`always`; anything else denies.
pub fn parse_answer(answer: &str) -> Approval {
    match answer.trim().to_ascii_lowercase().as_str() {
        "o" | "once" | "y" | "yes" => Approval::Once,
        "s" | "session" => Approval::Session,
        "a" | "always" => Approval::Always,
        _ => Approval::Deny,
    }
}

#[cfg(test)]
impl ApprovalRequest {
    /// A recursive delete by `run` under profile `p`, for tests.
    pub(crate) fn recursive_delete(
        command: &str,
        workdir: Option<PathBuf>,
        writable: Vec<PathBuf>,
    ) -> Self {
        Self {
            tool: "run".into(),
            profile: "p".into(),
            tenant: None,
            session: None,
            subject: Subject::DangerousCommand {
                command: command.into(),
                findings: vec![("recursive_delete".into(), "recursive delete".into())],
                workdir,
                writable,
                fresh_shell: true,
            },
            config_change: None,
        }
    }
}
