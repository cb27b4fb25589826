//! Approvals: a human (or a script, or a protocol client) decides calls whose
//! permissions the profile marks `approval_required`, and dangerous commands
//! in `approve` mode. Answers are `once`, `session` (remembered for that
//! tenant and session), `always` (kept in an allowlist file, written
//! atomically) or `deny`; no answer in time is `deny`.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use futures::future::BoxFuture;

pub mod auto;
pub(crate) mod hint;
pub mod pending;
mod request;
pub mod webhook;

pub use hint::ConfigSource;
pub use request::{Approval, ApprovalRequest, Approver, MAX_ANSWER, Subject, parse_answer};

/// Denies everything: for servers with no channel to a human, and for
/// non-interactive use.
#[derive(Debug, Clone, Default)]
pub struct DenyApprover;

impl Approver for DenyApprover {
    fn approve<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async { Approval::Deny })
    }

    fn how_to_allow(&self) -> &str {
        "no one can be asked here (no interactive terminal; run toolhost in one to be asked)"
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
        // The request names a command line or arguments a guest chose: shown
        // escaped, they cannot move the cursor or repaint the question.
        let prompt = format!(
            "\n⚠ approval needed: {}\n  [o]nce, [s]ession, [a]lways, [d]eny? ",
            crate::escape::escape(&request.to_string())
        );
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

/// Most `session` answers one caller's approvals remember, and most
/// allowlist entries `always` answers add for one tenant.
pub const MAX_REMEMBERED: usize = 1024;

/// Longest request (its key, such as `command LINE`) a `session` or
/// `always` answer is remembered for: with [`MAX_REMEMBERED`], what one
/// tenant's answers keep is at most 4 MiB. A longer one's answer counts once.
pub const MAX_REMEMBERED_KEY: usize = 4096;

/// The approvals of one host: the approver, answers remembered per scope, and
/// the allowlist file.
pub struct Approvals {
    approver: std::sync::Arc<dyn Approver>,
    auto: Vec<std::sync::Arc<dyn auto::AutoRule>>,
    timeout: Duration,
    remembered: Mutex<HashSet<(String, String)>>,
    allowlist: std::sync::Arc<Allowlist>,
    /// The configuration refusals name for changes, if the host has one.
    config: Option<ConfigSource>,
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
            auto: Vec::new(),
            timeout,
            remembered: Mutex::default(),
            allowlist: std::sync::Arc::new(Allowlist::load(allowlist)),
            config: None,
        }
    }

    /// The same approvals, naming the configuration `source` in refusals
    /// (where the change that stops the asking is made).
    pub fn editing(mut self, source: Option<ConfigSource>) -> Self {
        self.config = source;
        self
    }

    /// How `request` could run without being asked: the allowlist entry
    /// and the configuration change that apply, each in its file.
    fn without_asking(&self, request: &ApprovalRequest) -> String {
        let mut ways = Vec::new();
        if let Some(path) = &self.allowlist.path {
            ways.push(hint::allowlist_entry(request, path));
        }
        if let Some(change) = &request.config_change {
            ways.push(hint::in_config(change, self.config.as_ref()));
        }
        if ways.is_empty() {
            return String::new();
        }
        format!("; to allow it without asking, {}", ways.join(", or "))
    }

    /// The same approvals, keeping `always` answers in `allowlist`, loaded
    /// once and shared (by the tenants of a server, each under its name).
    pub(crate) fn sharing(mut self, allowlist: std::sync::Arc<Allowlist>) -> Self {
        self.allowlist = allowlist;
        self
    }

    /// Denies everything, remembers nothing.
    pub fn deny_all() -> Self {
        Self::new(
            std::sync::Arc::new(DenyApprover),
            Duration::from_secs(1),
            None,
        )
    }

    /// The same approvals, with `rules` answering before anyone is asked.
    pub fn with_auto(mut self, rules: Vec<std::sync::Arc<dyn auto::AutoRule>>) -> Self {
        self.auto = rules;
        self
    }

    /// `Ok` when `request` is approved (now or earlier in `scope`, or always),
    /// with the automatic rule that approved it, if one did; otherwise the
    /// refusal message.
    pub async fn check(
        &self,
        scope: &str,
        request: &ApprovalRequest,
    ) -> Result<Option<String>, String> {
        let key = request.key();
        let tenant = request.tenant.as_deref();
        if self.allowlist.contains(tenant, &key) {
            return Ok(None);
        }
        {
            let remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
            if remembered.contains(&(scope.to_string(), key.clone())) {
                return Ok(None);
            }
        }
        for rule in &self.auto {
            match rule.judge(request).await {
                auto::AutoAnswer::Ask => {}
                auto::AutoAnswer::Approve => {
                    tracing::info!(%request, rule = rule.name(), "approved by an automatic rule");
                    return Ok(Some(format!(
                        "approved by approvals.auto rule {}",
                        rule.name()
                    )));
                }
                auto::AutoAnswer::Deny => {
                    return Err(format!(
                        "{request} and approvals.auto rule {} denied it{}",
                        rule.name(),
                        self.without_asking(request)
                    ));
                }
            }
        }
        let Ok(answer) = tokio::time::timeout(self.timeout, self.approver.ask(request)).await
        else {
            tracing::info!(%request, "approval timed out");
            return Err(format!(
                "{request} and no answer came within {:?} (approvals.timeout), so it was \
                 denied{}",
                self.timeout,
                self.without_asking(request)
            ));
        };
        let answer = answer.map_err(|why| {
            format!(
                "{request}, and it was not asked: {why}{}",
                self.without_asking(request)
            )
        })?;
        tracing::info!(%request, ?answer, "approval");
        let answer = match answer {
            Approval::Session | Approval::Always if key.len() > MAX_REMEMBERED_KEY => {
                tracing::warn!(
                    bytes = key.len(),
                    "the approved request is longer than the {MAX_REMEMBERED_KEY} bytes an \
                     answer is remembered for; this answer counts once"
                );
                Approval::Once
            }
            answer => answer,
        };
        match answer {
            Approval::Once => Ok(None),
            Approval::Session => {
                let mut remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
                if remembered.len() < MAX_REMEMBERED {
                    remembered.insert((scope.to_string(), key));
                } else {
                    tracing::warn!(
                        %request,
                        "{MAX_REMEMBERED} `session` answers are remembered already for this \
                         caller, the most kept; this one counts once"
                    );
                }
                Ok(None)
            }
            Approval::Always => {
                if self.allowlist.count(tenant) >= MAX_REMEMBERED {
                    tracing::warn!(
                        %request,
                        "the allowlist holds {MAX_REMEMBERED} entries for this caller, the most \
                         added by answers; this `always` counts once (edit the file to add more)"
                    );
                } else if let Err(e) = self.allowlist.add(tenant, &key) {
                    tracing::warn!(error = %e, "could not save the approval to the allowlist file");
                }
                Ok(None)
            }
            Approval::Deny => Err(format!(
                "{request} and was not approved: {}{}",
                self.approver.how_to_allow(),
                self.without_asking(request)
            )),
        }
    }

    /// The allowlist file, if answers are kept in one.
    pub fn allowlist_path(&self) -> Option<&Path> {
        self.allowlist.path.as_deref()
    }
}

/// `always` answers, kept in a JSON file: the local caller's under
/// `approved`, each tenant's under `tenants.NAME` (never shared). Writes
/// hold a lock on `FILE.lock`, merge with what is on disk (another process
/// may have added entries) and replace the file atomically; a lookup that
/// misses re-reads the file when it changed.
pub(crate) struct Allowlist {
    path: Option<PathBuf>,
    state: Mutex<(AllowlistFile, Option<std::time::SystemTime>)>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct AllowlistFile {
    #[serde(default)]
    approved: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tenants: BTreeMap<String, BTreeSet<String>>,
}

impl AllowlistFile {
    fn entries(&mut self, tenant: Option<&str>) -> &mut BTreeSet<String> {
        match tenant {
            None => &mut self.approved,
            Some(tenant) => self.tenants.entry(tenant.to_string()).or_default(),
        }
    }

    fn contains(&self, tenant: Option<&str>, key: &str) -> bool {
        match tenant {
            None => self.approved.contains(key),
            Some(tenant) => self
                .tenants
                .get(tenant)
                .is_some_and(|keys| keys.contains(key)),
        }
    }

    fn merge(&mut self, other: AllowlistFile) {
        self.approved.extend(other.approved);
        for (tenant, keys) in other.tenants {
            self.tenants.entry(tenant).or_default().extend(keys);
        }
    }
}

impl Allowlist {
    pub(crate) fn load(path: Option<PathBuf>) -> Self {
        let (file, modified) = path.as_deref().map(read_allowlist).unwrap_or_default();
        Self {
            path,
            state: Mutex::new((file, modified)),
        }
    }

    fn contains(&self, tenant: Option<&str>, key: &str) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.0.contains(tenant, key) {
            return true;
        }
        let Some(path) = &self.path else { return false };
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        if modified.is_some() && modified != state.1 {
            // Replaced while a command could write the new file: not read
            // (it was set aside).
            if crate::policy::own::set_aside_if_replaced(path).is_some() {
                state.1 = None;
                return state.0.contains(tenant, key);
            }
            let (on_disk, modified) = read_allowlist(path);
            state.0.merge(on_disk);
            state.1 = modified;
        }
        state.0.contains(tenant, key)
    }

    /// How many entries `tenant` has.
    fn count(&self, tenant: Option<&str>) -> usize {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match tenant {
            None => state.0.approved.len(),
            Some(tenant) => state.0.tenants.get(tenant).map_or(0, BTreeSet::len),
        }
    }

    fn add(&self, tenant: Option<&str>, key: &str) -> std::io::Result<()> {
        use std::io::{Read as _, Seek as _};
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.0.entries(tenant).insert(key.to_string());
        let Some(path) = &self.path else {
            return Ok(());
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        // Replaced while a command could write the new file: set aside
        // unread, and written anew from what toolhost holds.
        let _ = crate::policy::own::set_aside_if_replaced(path);
        // Rewritten in place under a lock of the file itself: a rename
        // would put another file at its name, which a terminal sandbox
        // masking the old one would then show. Never through a link at its
        // name.
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)?;
        lock(&file, libc::LOCK_EX)?;
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        state.0.merge(parse_allowlist(&text, path));
        let mut json = serde_json::to_vec_pretty(&state.0)?;
        json.push(b'\n');
        file.set_len(0)?;
        file.rewind()?;
        file.write_all(&json)?;
        file.sync_data()?;
        state.1 = file.metadata().and_then(|m| m.modified()).ok();
        Ok(())
    }
}

/// Takes the advisory lock `operation` of `file` (released when it closes).
fn lock(file: &std::fs::File, operation: libc::c_int) -> std::io::Result<()> {
    // SAFETY: flock on a descriptor this function borrows.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(file), operation) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The file's entries and modification time; a missing file (or an empty
/// one) is empty, a malformed one is ignored with a warning.
fn read_allowlist(path: &Path) -> (AllowlistFile, Option<std::time::SystemTime>) {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    // Never through a link at its name (see `Allowlist::add`).
    let Ok(mut file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    else {
        return (AllowlistFile::default(), None);
    };
    let mut text = String::new();
    let read = lock(&file, libc::LOCK_SH).and_then(|()| file.read_to_string(&mut text));
    let modified = file.metadata().and_then(|m| m.modified()).ok();
    if read.is_err() {
        return (AllowlistFile::default(), modified);
    }
    (parse_allowlist(&text, path), modified)
}

fn parse_allowlist(text: &str, path: &Path) -> AllowlistFile {
    if text.trim().is_empty() {
        return AllowlistFile::default();
    }
    match serde_json::from_str::<AllowlistFile>(text) {
        Ok(file) => file,
        Err(e) => {
            tracing::warn!(error = %e, path = %path.display(), "ignoring a malformed approvals allowlist file");
            AllowlistFile::default()
        }
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
        ApprovalRequest::recursive_delete(command, None, Vec::new())
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
    async fn remembered_answers_stop_at_their_cap() {
        // Always `session`, then always `always`: one answer per question.
        struct Answers(Approval);
        impl Approver for Answers {
            fn approve<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
                let answer = self.0;
                Box::pin(async move { answer })
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("allow.json");
        for (answer, allowlist) in [(Approval::Session, None), (Approval::Always, Some(file))] {
            let approvals =
                Approvals::new(Arc::new(Answers(answer)), Duration::from_secs(5), allowlist);
            for n in 0..=MAX_REMEMBERED {
                approvals
                    .check("s", &request(&format!("rm -rf d{n}")))
                    .await
                    .unwrap();
            }
            let remembered = approvals.remembered.lock().unwrap().len();
            let listed = approvals.allowlist.count(None);
            assert_eq!(remembered.max(listed), MAX_REMEMBERED, "{answer:?}");
        }
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
