//! Automatic answers (`approvals.auto`): rules that see an approval request
//! before anyone is asked and approve, deny, or leave it to the approver.
//!
//! `tool:NAME` hands the request to a tool that runs with no capability
//! (see [`ToolHook`]). The rule set shipped, `build-dirs`, approves recursive deletes of
//! well-known build and cache directories (`node_modules`, `target`, `dist`,
//! `build`, `__pycache__`, `.venv`, ...) inside a writable grant: a line that
//! is one `rm` with only recursive/force flags and such operands, nothing a
//! shell would expand (no variables, globs, quotes, substitutions,
//! redirections, `.` or `..`), each operand one name with no slash after it
//! (so `rm` follows no symlink, even one swapped in later), an existing
//! directory in the directory the command starts in, inside a directory the
//! command may write, and the line run by a new shell with the profile's
//! environment (in a session, an earlier command may have changed what
//! `rm` runs). Everything else is left to the approver.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use serde_json::Value;

use super::request::{ApprovalRequest, Subject};

/// What a rule says of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoAnswer {
    /// Approve this once.
    Approve,
    /// Refuse it.
    Deny,
    /// Leave it to the approver.
    Ask,
}

/// A rule that may answer approval requests itself.
pub trait AutoRule: Send + Sync + std::fmt::Debug {
    /// Its name, in the audit record and the config (`approvals.auto`).
    fn name(&self) -> &str;
    /// Its answer to `request`.
    fn judge<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, AutoAnswer>;
    /// Gives the rule a way to call tools (for `tool:NAME`).
    fn bind(&self, _tools: &Arc<dyn HookTools>) {}
}

/// How a hook rule calls its tool: with no capability, no approval, and
/// the host's usual limits. Implemented by the host.
pub trait HookTools: Send + Sync {
    /// Calls `tool` with `arguments`; its result, or why it failed.
    fn call<'a>(&'a self, tool: &'a str, arguments: Value) -> BoxFuture<'a, Result<Value, String>>;
}

/// The rule sets named in `approvals.auto`: `build-dirs`, or `tool:NAME`
/// (a tool that sees each request and answers approve, deny or ask).
pub fn rules(names: &[String]) -> Result<Vec<Arc<dyn AutoRule>>, String> {
    names
        .iter()
        .map(|name| match name.as_str() {
            "build-dirs" => Ok(Arc::new(BuildDirs) as Arc<dyn AutoRule>),
            other => match other.strip_prefix("tool:") {
                Some(tool) if !tool.is_empty() => Ok(Arc::new(ToolHook {
                    name: other.to_string(),
                    tool: tool.to_string(),
                    tools: OnceLock::new(),
                }) as Arc<dyn AutoRule>),
                _ => Err(format!(
                    "approvals.auto: unknown rule set {other:?}; known: build-dirs, tool:NAME"
                )),
            },
        })
        .collect()
}

/// `tool:NAME`: the tool gets the request (`tool`, `profile`, `tenant`,
/// `session`, `subject` with the permission or the command and the
/// detector's findings) and answers `{"decision": "approve" | "deny" |
/// "ask"}`. It runs under a profile that grants nothing, so a model can
/// judge through a tenant's own tool without being given any right. A
/// failure, a timeout or any other answer is `ask`.
#[derive(Debug)]
struct ToolHook {
    name: String,
    tool: String,
    tools: OnceLock<Arc<dyn HookTools>>,
}

impl std::fmt::Debug for dyn HookTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HookTools")
    }
}

impl AutoRule for ToolHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn judge<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, AutoAnswer> {
        Box::pin(async move {
            let Some(tools) = self.tools.get() else {
                return AutoAnswer::Ask;
            };
            match tools.call(&self.tool, request.to_json()).await {
                Ok(answer) => {
                    let decision = answer
                        .get("decision")
                        .unwrap_or(&answer)
                        .as_str()
                        .unwrap_or_default();
                    match decision {
                        "approve" => AutoAnswer::Approve,
                        "deny" => AutoAnswer::Deny,
                        _ => AutoAnswer::Ask,
                    }
                }
                Err(error) => {
                    tracing::warn!(hook = %self.tool, %error, "the approval hook failed; asking");
                    AutoAnswer::Ask
                }
            }
        })
    }

    fn bind(&self, tools: &Arc<dyn HookTools>) {
        let _ = self.tools.set(tools.clone());
    }
}

/// Directories every build or package tool recreates.
const BUILD_DIRS: &[&str] = &[
    "node_modules",
    "target",
    "dist",
    "build",
    "__pycache__",
    ".venv",
    "venv",
    ".pytest_cache",
    ".mypy_cache",
    ".next",
    ".turbo",
    ".gradle",
    "coverage",
];

/// See the module's documentation.
#[derive(Debug, Clone, Copy)]
pub struct BuildDirs;

impl AutoRule for BuildDirs {
    fn name(&self) -> &str {
        "build-dirs"
    }

    fn judge<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, AutoAnswer> {
        let answer = judge_build_dirs(request);
        Box::pin(std::future::ready(answer))
    }
}

/// The `build-dirs` answer (see the module's documentation).
fn judge_build_dirs(request: &ApprovalRequest) -> AutoAnswer {
    let Subject::DangerousCommand {
        command,
        findings,
        workdir: Some(workdir),
        writable,
        fresh_shell: true,
    } = &request.subject
    else {
        return AutoAnswer::Ask;
    };
    let only_deletes = findings
        .iter()
        .all(|(category, _)| category == "recursive_delete" || category == "forced_delete");
    if only_deletes && removes_only_build_dirs(command, workdir, writable) {
        AutoAnswer::Approve
    } else {
        AutoAnswer::Ask
    }
}

fn removes_only_build_dirs(line: &str, workdir: &Path, writable: &[PathBuf]) -> bool {
    // Nothing a shell would read as more than words: no globs (`*?[`),
    // variables, quotes, substitutions, separators or redirections.
    if !line
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b" _-./".contains(&b))
    {
        return false;
    }
    // Relative operands are resolved where the command starts, which must
    // itself be reached through no symbolic link.
    if workdir.canonicalize().ok().as_deref() != Some(workdir) {
        return false;
    }
    let mut words = line.split_ascii_whitespace();
    if words.next() != Some("rm") {
        return false;
    }
    let mut operands = Vec::new();
    let mut recursive = false;
    for word in words {
        match word {
            "-r" | "-R" | "-rf" | "-fr" | "-Rf" | "-fR" | "--recursive" => recursive = true,
            "-f" | "--force" => {}
            flag if flag.starts_with('-') => return false,
            operand => operands.push(operand),
        }
    }
    recursive
        && !operands.is_empty()
        && operands
            .iter()
            .all(|operand| is_build_dir_inside(operand, workdir, writable))
}

/// Whether `operand` names, from `workdir`, an existing build directory
/// inside a writable grant, every step of the way a real directory: a
/// symbolic link anywhere (`target -> src`, `sub/node_modules -> ../src`)
/// means the delete would reach somewhere else than it says, and a path
/// that does not exist cannot be judged; both are left to the approver.
fn is_build_dir_inside(operand: &str, workdir: &Path, writable: &[PathBuf]) -> bool {
    if operand.starts_with('/') {
        return false;
    }
    // One name, with no slash after it: `rm` then never follows a
    // symlink, even one swapped in after this judgement (it removes the
    // link itself). `web/dist` or `target/` could follow one; asked.
    let name = operand.strip_prefix("./").unwrap_or(operand);
    if name.contains('/') || !BUILD_DIRS.contains(&name) {
        return false;
    }
    let steps = [name];
    let mut at = workdir.to_path_buf();
    for step in steps {
        at.push(step);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_dir() => {}
            // A symbolic link, a file, or nothing there.
            _ => return false,
        }
    }
    writable
        .iter()
        .any(|grant| at.starts_with(grant) && at != *grant)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(command: &str, workdir: &Path, writable: &[PathBuf]) -> ApprovalRequest {
        ApprovalRequest::recursive_delete(command, Some(workdir.to_path_buf()), writable.to_vec())
    }

    #[test]
    fn build_dirs_inside_a_writable_grant_are_approved_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("node_modules/x")).unwrap();
        std::fs::create_dir_all(ws.join("web/dist")).unwrap();
        std::fs::create_dir_all(ws.join("__pycache__")).unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(root.join("outside/node_modules")).unwrap();
        std::os::unix::fs::symlink(root.join("outside"), ws.join("target")).unwrap();
        let writable = [ws.clone()];
        let judge = |line: &str| judge_build_dirs(&request(line, &ws, &writable));

        for approved in [
            "rm -rf node_modules",
            "rm -r -f ./node_modules __pycache__",
            "rm --recursive --force __pycache__",
        ] {
            assert_eq!(judge(approved), AutoAnswer::Approve, "{approved}");
        }
        for asked in [
            "rm -rf src",
            "rm -rf node_modules src",
            "rm -rf ../outside/node_modules",
            "rm -rf /tmp/node_modules",
            "rm -rf target", // a symlink out of the grant
            "rm -rf node_modules; rm -rf src",
            "rm -rf $HOME/node_modules",
            "rm -rf node_*",
            "rm -rf 'node_modules'",
            "rm -rf --no-preserve-root node_modules",
            "rm node_modules",
            "sudo rm -rf node_modules",
            "rm -rf node_modules > /dev/null",
            // Could follow a symlink swapped in after the judgement.
            "rm -rf node_modules/",
            "rm -rf web/dist",
        ] {
            assert_eq!(judge(asked), AutoAnswer::Ask, "{asked}");
        }
        // In a session, whose PATH or functions may name another `rm`: asked.
        let mut session = request("rm -rf node_modules", &ws, &writable);
        if let Subject::DangerousCommand { fresh_shell, .. } = &mut session.subject {
            *fresh_shell = false;
        }
        assert_eq!(judge_build_dirs(&session), AutoAnswer::Ask);
        // The same line where the directory is not writable asks.
        let read_only = judge_build_dirs(&request("rm -rf node_modules", &ws, &[]));
        assert_eq!(read_only, AutoAnswer::Ask);
        // Permissions are not commands: asked.
        let mut permission = request("x", &ws, &writable);
        permission.subject = Subject::Permission("file:write".into());
        assert_eq!(judge_build_dirs(&permission), AutoAnswer::Ask);
    }

    #[test]
    fn an_operand_that_is_or_passes_through_a_symlink_or_is_missing_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        for made in ["src/lib", "sub/real", "real/node_modules", "web/dist"] {
            std::fs::create_dir_all(ws.join(made)).unwrap();
        }
        std::fs::write(ws.join("build"), "a file").unwrap();
        let link =
            |target: &str, at: &str| std::os::unix::fs::symlink(target, ws.join(at)).unwrap();
        link("src", "target");
        link("../src", "sub/node_modules");
        link("real", "via");
        link("web", "weblink");
        let writable = [ws.clone()];
        let judge =
            |line: &str, workdir: &Path| judge_build_dirs(&request(line, workdir, &writable));

        for asked in [
            "rm -rf target",
            "rm -rf target/",
            "rm -rf ./target//",
            "rm -rf sub/node_modules",
            "rm -rf via/node_modules",
            "rm -rf weblink/dist",
            "rm -rf ./target/../src",
            "rm -rf target/.",
            "rm -rf ./././target",
            "rm -rf targ*",
            "rm -rf target?",
            "rm -rf [t]arget",
            "rm -rf dist",  // does not exist
            "rm -rf build", // a file, not a directory
            "rm -rf -- dist",
        ] {
            assert_eq!(judge(asked, &ws), AutoAnswer::Ask, "{asked}");
        }
        // Real directories, but a slash on the way: asked (`rm` would
        // follow a symlink swapped in after the judgement).
        assert_eq!(
            judge("rm -rf web/dist real/node_modules", &ws),
            AutoAnswer::Ask
        );
        assert_eq!(judge("rm -rf dist", &ws.join("web")), AutoAnswer::Approve);
        // Judged where the command starts: in sub, node_modules is the link.
        assert_eq!(
            judge("rm -rf node_modules", &ws.join("sub")),
            AutoAnswer::Ask
        );
        assert_eq!(
            judge("rm -rf node_modules", &ws.join("real")),
            AutoAnswer::Approve
        );
        // A start reached through a link is not judged.
        assert_eq!(
            judge("rm -rf node_modules", &ws.join("via")),
            AutoAnswer::Ask
        );
        assert!(ws.join("src/lib").exists());
    }

    #[test]
    fn unknown_rule_sets_are_refused_by_name() {
        assert!(rules(&["build-dirs".into()]).is_ok());
        let error = rules(&["yolo".into()]).unwrap_err();
        assert!(
            error.contains("\"yolo\"") && error.contains("build-dirs"),
            "{error}"
        );
        assert!(rules(&["tool:judge".into()]).is_ok());
        assert!(rules(&["tool:".into()]).is_err());
    }
}
