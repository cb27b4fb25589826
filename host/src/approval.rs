//! Approvals: a human (or a script, or a protocol client) decides calls whose
//! permissions the profile marks `approval_required`, and dangerous commands
//! in `approve` mode. Answers are `once`, `session` (remembered for that
//! tenant and session), `always` (kept in an allowlist file, written
//! atomically) or `deny`; no answer in time is `deny`.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use futures::future::BoxFuture;

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
}

impl fmt::Display for ApprovalRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subject {
            Subject::Permission(permission) => write!(
                f,
                "tool {:?} wants {permission} (profile {:?} requires approval)",
                self.tool, self.profile
            ),
            Subject::DangerousCommand { command, findings } => {
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

/// Decides approval requests.
pub trait Approver: Send + Sync + 'static {
    /// Answers `request`. Taking longer than the configured timeout is a deny.
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval>;

    /// Says, in a refusal, how the caller could get this approved.
    fn how_to_allow(&self) -> &str {
        "approve it when asked"
    }
}

/// Denies everything: for servers with no channel to a human, and for
/// non-interactive use.
#[derive(Debug, Clone, Default)]
pub struct DenyApprover;

impl Approver for DenyApprover {
    fn approve<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async { Approval::Deny })
    }

    fn how_to_allow(&self) -> &str {
        "no one can be asked here (no interactive terminal); run toolhost interactively, \
         add the entry to the approvals allowlist file, or change the profile"
    }
}

/// Asks on the controlling terminal (`/dev/tty`), so it works even when
/// stdin and stdout carry a protocol.
#[derive(Debug, Clone, Default)]
pub struct TtyApprover;

impl TtyApprover {
    /// The terminal approver when there is a terminal, else [`DenyApprover`].
    pub fn or_deny() -> std::sync::Arc<dyn Approver> {
        if std::io::stderr().is_terminal() && Path::new("/dev/tty").exists() {
            std::sync::Arc::new(TtyApprover)
        } else {
            std::sync::Arc::new(DenyApprover)
        }
    }
}

impl Approver for TtyApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        let prompt =
            format!("\n⚠ approval needed: {request}\n  [o]nce, [s]ession, [a]lways, [d]eny? ");
        Box::pin(async move {
            tokio::task::spawn_blocking(move || ask_tty(&prompt))
                .await
                .unwrap_or(Approval::Deny)
        })
    }
}

fn ask_tty(prompt: &str) -> Approval {
    let Ok(mut tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return Approval::Deny;
    };
    if tty.write_all(prompt.as_bytes()).is_err() {
        return Approval::Deny;
    }
    let mut line = String::new();
    let mut reader = std::io::BufReader::new(tty);
    if reader.read_line(&mut line).is_err() {
        return Approval::Deny;
    }
    parse_answer(&line)
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

/// The approvals of one host: the approver, answers remembered per scope, and
/// the allowlist file.
pub struct Approvals {
    approver: std::sync::Arc<dyn Approver>,
    timeout: Duration,
    remembered: Mutex<HashSet<(String, String)>>,
    allowlist: Allowlist,
}

impl fmt::Debug for Approvals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Approvals")
            .field("timeout", &self.timeout)
            .field("allowlist", &self.allowlist.path)
            .finish_non_exhaustive()
    }
}

impl Approvals {
    /// Approvals asked of `approver`, with `timeout` per question and
    /// `always` answers kept in `allowlist` (`None`: kept in memory only).
    pub fn new(
        approver: std::sync::Arc<dyn Approver>,
        timeout: Duration,
        allowlist: Option<PathBuf>,
    ) -> Self {
        Self {
            approver,
            timeout,
            remembered: Mutex::default(),
            allowlist: Allowlist::load(allowlist),
        }
    }

    /// Denies everything, remembers nothing.
    pub fn deny_all() -> Self {
        Self::new(
            std::sync::Arc::new(DenyApprover),
            Duration::from_secs(1),
            None,
        )
    }

    /// `Ok` when `request` is approved (now or earlier in `scope`, or always);
    /// otherwise the refusal message.
    pub async fn check(&self, scope: &str, request: &ApprovalRequest) -> Result<(), String> {
        let key = request.key();
        if self.allowlist.contains(&key) {
            return Ok(());
        }
        {
            let remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
            if remembered.contains(&(scope.to_string(), key.clone())) {
                return Ok(());
            }
        }
        let answer = tokio::time::timeout(self.timeout, self.approver.approve(request))
            .await
            .unwrap_or(Approval::Deny);
        tracing::info!(%request, ?answer, "approval");
        match answer {
            Approval::Once => Ok(()),
            Approval::Session => {
                self.remembered
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert((scope.to_string(), key));
                Ok(())
            }
            Approval::Always => {
                if let Err(e) = self.allowlist.add(&key) {
                    tracing::warn!(error = %e, "could not save the approval to the allowlist file");
                }
                Ok(())
            }
            Approval::Deny => Err(format!(
                "{request} and was not approved: {}",
                self.approver.how_to_allow()
            )),
        }
    }

    /// The allowlist file, if answers are kept in one.
    pub fn allowlist_path(&self) -> Option<&Path> {
        self.allowlist.path.as_deref()
    }
}

/// `always` answers, kept in a JSON file written atomically.
struct Allowlist {
    path: Option<PathBuf>,
    entries: Mutex<BTreeSet<String>>,
}

#[derive(Serialize, Deserialize)]
struct AllowlistFile {
    approved: BTreeSet<String>,
}

impl Allowlist {
    fn load(path: Option<PathBuf>) -> Self {
        let entries = path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| match serde_json::from_str::<AllowlistFile>(&text) {
                Ok(file) => Some(file.approved),
                Err(e) => {
                    tracing::warn!(error = %e, "ignoring a malformed approvals allowlist file");
                    None
                }
            })
            .unwrap_or_default();
        Self {
            path,
            entries: Mutex::new(entries),
        }
    }

    fn contains(&self, key: &str) -> bool {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(key)
    }

    fn add(&self, key: &str) -> std::io::Result<()> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.insert(key.to_string());
        let Some(path) = &self.path else {
            return Ok(());
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut file = tempfile::NamedTempFile::new_in(dir)?;
        let body = AllowlistFile {
            approved: entries.clone(),
        };
        serde_json::to_writer_pretty(&mut file, &body)?;
        file.write_all(b"\n")?;
        file.as_file().sync_data()?;
        file.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// Answers from a script, in order; then denies. For tests and automation.
#[derive(Debug, Default)]
pub struct ScriptedApprover {
    answers: Mutex<std::collections::VecDeque<Approval>>,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl ScriptedApprover {
    /// Gives `answers` to the next questions, in order.
    pub fn new(answers: impl IntoIterator<Item = Approval>) -> Self {
        Self {
            answers: Mutex::new(answers.into_iter().collect()),
            asked: Mutex::default(),
        }
    }

    /// The questions asked so far.
    pub fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Approver for ScriptedApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(request.clone());
        let answer = self
            .answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
            .unwrap_or(Approval::Deny);
        Box::pin(async move { answer })
    }
}

impl Approver for std::sync::Arc<ScriptedApprover> {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        (**self).approve(request)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn request(command: &str) -> ApprovalRequest {
        ApprovalRequest {
            tool: "run".into(),
            profile: "p".into(),
            tenant: None,
            session: None,
            subject: Subject::DangerousCommand {
                command: command.into(),
                findings: vec![("recursive_delete".into(), "recursive delete".into())],
            },
        }
    }

    #[tokio::test]
    async fn once_session_always_and_deny() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("allow.json");
        let script = Arc::new(ScriptedApprover::new([
            Approval::Once,
            Approval::Session,
            Approval::Always,
            Approval::Deny,
        ]));
        let approvals = Approvals::new(script.clone(), Duration::from_secs(5), Some(file.clone()));
        let a = request("rm -rf a");
        assert!(approvals.check("s1", &a).await.is_ok()); // once
        assert!(approvals.check("s1", &a).await.is_ok()); // asked again: session
        assert!(approvals.check("s1", &a).await.is_ok()); // remembered, not asked
        assert!(approvals.check("s2", &a).await.is_ok()); // other scope: always
        assert_eq!(script.asked().len(), 3);
        let b = request("rm -rf b");
        let denied = approvals.check("s1", &b).await.unwrap_err();
        assert!(denied.contains("was not approved"), "{denied}");
        // `always` was written to the file and survives a restart.
        let reloaded = Approvals::new(Arc::new(DenyApprover), Duration::from_secs(1), Some(file));
        assert!(reloaded.check("s9", &a).await.is_ok());
        assert!(reloaded.check("s9", &b).await.is_err());
    }

    #[tokio::test]
    async fn no_answer_in_time_is_deny() {
        struct Silent;
        impl Approver for Silent {
            fn approve<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
                Box::pin(std::future::pending())
            }
        }
        let approvals = Approvals::new(Arc::new(Silent), Duration::from_millis(50), None);
        assert!(approvals.check("s", &request("x")).await.is_err());
    }

    #[test]
    fn answers_parse() {
        assert_eq!(parse_answer("o\n"), Approval::Once);
        assert_eq!(parse_answer("Session"), Approval::Session);
        assert_eq!(parse_answer("a"), Approval::Always);
        assert_eq!(parse_answer(""), Approval::Deny);
        assert_eq!(parse_answer("whatever"), Approval::Deny);
    }
}
