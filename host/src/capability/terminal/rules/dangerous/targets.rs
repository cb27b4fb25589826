//! Where a command writes or deletes: targets with `~` and `$HOME` expanded,
//! and whether they are the root, a home directory, a system file or a device.

use std::path::{Component, Path, PathBuf};

use super::finding::{DangerCategory, Finding};
use crate::capability::file::rules::normalize;

/// The finding for writing to `target`: a device, a credential store, an
/// agent's configuration, a shell history or a system file.
pub(super) fn write(target: &str, verb: &str) -> Option<Finding> {
    if let Some(finding) = protected(target, verb) {
        return Some(finding);
    }
    let path = absolute(target)?;
    if is_device(&path) {
        Some(Finding::new(
            DangerCategory::RawDiskWrite,
            format!("{verb} device {}", path.display()),
        ))
    } else {
        system_file(&path)
            .map(|what| Finding::new(DangerCategory::SystemWrite, format!("{verb} {what}")))
    }
}

/// Credential stores under a home directory: writing one plants or replaces
/// keys and tokens.
const CREDENTIAL_DIRS: &[&[&str]] = &[
    &[".ssh"],
    &[".aws"],
    &[".gnupg"],
    &[".kube"],
    &[".docker"],
    &[".azure"],
    &[".config", "gh"],
    &[".config", "gcloud"],
    &[".config", "hub"],
    &[".netrc"],
    &[".git-credentials"],
    &[".pgpass"],
    &[".npmrc"],
    &[".pypirc"],
];

/// Agents' own configuration under a home directory (and the variables that
/// name it): writing one can turn off an agent's approvals.
const AGENT_DIRS: &[&[&str]] = &[
    &[".hermes"],
    &[".codex"],
    &[".claude"],
    &[".config", "goose"],
    &[".openhands"],
];
const AGENT_HOME_VARS: &[&str] = &["HERMES_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR"];

/// Shell and tool histories: overwriting or deleting one hides what ran.
#[rustfmt::skip]
const HISTORY_FILES: &[&str] = &[
    ".bash_history", ".zsh_history", ".history", ".sh_history", ".python_history",
    ".mysql_history", ".psql_history", ".node_repl_history",
];

/// The finding for writing or deleting `target` if it is a credential store,
/// a `.env` secrets file (in any directory), an agent's configuration or a
/// shell history.
pub(super) fn protected(target: &str, verb: &str) -> Option<Finding> {
    let name = target.rsplit('/').next().unwrap_or(target);
    if HISTORY_FILES.contains(&name) {
        return Some(Finding::new(
            DangerCategory::HistoryWipe,
            format!("{verb} the history file {target}"),
        ));
    }
    if is_env_file(name) {
        return Some(Finding::new(
            DangerCategory::CredentialWrite,
            format!("{verb} the secrets file {target}"),
        ));
    }
    let agent_var = AGENT_HOME_VARS.iter().any(|var| {
        [format!("${var}"), format!("${{{var}}}")]
            .iter()
            .any(|prefix| {
                target
                    .strip_prefix(prefix.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            })
    });
    if let Some(path) = credential_store(target) {
        return Some(Finding::new(
            DangerCategory::CredentialWrite,
            format!("{verb} the credential store {path}"),
        ));
    }
    if agent_var || in_home(target, AGENT_DIRS).is_some() {
        return Some(Finding::new(
            DangerCategory::AgentConfigWrite,
            format!("{verb} an agent's configuration {target}"),
        ));
    }
    None
}

/// True for a `.env` secrets file name (`.env`, `.env.production`; not
/// `.env.example` and the like).
pub(super) fn is_env_file(name: &str) -> bool {
    name == ".env"
        || name.strip_prefix(".env.").is_some_and(|suffix| {
            let kind = suffix.split('.').next().unwrap_or_default();
            !kind.is_empty() && !matches!(kind, "example" | "sample" | "template" | "dist")
        })
}

/// `target` as an absolute path if it lies in a credential store under a
/// home directory (`~/.ssh`, `~/.aws`, `~/.netrc`, ...).
pub(super) fn credential_store(target: &str) -> Option<String> {
    in_home(target, CREDENTIAL_DIRS)
}

/// `target` as an absolute path if it lies in one of `dirs` under a home
/// directory.
fn in_home(target: &str, dirs: &[&[&str]]) -> Option<String> {
    let path = absolute(target)?;
    let parts = components(&path);
    let rest = match parts.as_slice() {
        [root, rest @ ..] if root == "root" => rest,
        [home, _, rest @ ..] if home == "home" || home == "Users" => rest,
        _ => return None,
    };
    dirs.iter()
        .any(|dir| rest.len() >= dir.len() && rest.iter().zip(dir.iter()).all(|(a, b)| a == b))
        .then(|| path.display().to_string())
}

/// The finding for a redirection that writes (`>`, `>>`, `&>`, `>|`, `<>`, `>&file`).
pub(super) fn redirect(op: &str, target: &str) -> Option<Finding> {
    let op = op.trim_start_matches(|c: char| c.is_ascii_digit());
    let writes = match op {
        ">" | ">>" | ">|" | "&>" | "&>>" | "<>" => true,
        // `>&file` writes a file; `>&2` and `>&-` only move fds.
        ">&" => target != "-" && !target.bytes().all(|b| b.is_ascii_digit()),
        _ => false,
    };
    if target.starts_with("/dev/tcp/") || target.starts_with("/dev/udp/") {
        return Some(Finding::new(
            DangerCategory::ReverseShell,
            format!("connects the command's input or output to the network ({target})"),
        ));
    }
    if writes {
        write(target, "redirect output to")
    } else {
        None
    }
}

/// `target` as a normalized absolute path, with `~`, `~user` and `$HOME`
/// expanded to `/home/...`; `None` for relative paths.
pub(super) fn absolute(target: &str) -> Option<PathBuf> {
    let home_rest = ["${HOME}", "$HOME"].iter().find_map(|var| {
        target
            .strip_prefix(var)
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
    });
    let expanded = if let Some(rest) = home_rest {
        format!("/home/~{rest}")
    } else if let Some(rest) = target.strip_prefix('~') {
        // `~` -> /home/~, `~bob/x` -> /home/bob/x
        if rest.is_empty() || rest.starts_with('/') {
            format!("/home/~{rest}")
        } else {
            format!("/home/{rest}")
        }
    } else if target.starts_with('/') {
        target.to_owned()
    } else {
        return None;
    };
    Some(normalize(Path::new(&expanded)))
}

fn components(path: &Path) -> Vec<String> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

/// Top-level directories whose loss breaks the machine or a user.
#[rustfmt::skip]
const TOP_DIRS: &[&str] = &[
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt", "opt",
    "proc", "root", "run", "sbin", "snap", "srv", "sys", "usr", "var", "applications", "library",
    "system", "users", "volumes", "private", "nix",
];

/// Describes `path` if deleting it wipes the root, a home directory or a
/// top-level system directory.
pub(super) fn root_target(path: &Path) -> Option<String> {
    let parts = components(path);
    let lower: Vec<String> = parts.iter().map(|p| p.to_lowercase()).collect();
    let lower: Vec<&str> = lower.iter().map(String::as_str).collect();
    let is_glob = |part: &str| part.contains(['*', '?', '[']);
    let described = match lower.as_slice() {
        [] => "the root directory /".to_owned(),
        [first, ..] if is_glob(first) => format!("everything under / ({})", path.display()),
        ["root"] | ["root", "*"] | ["home" | "users", _] | ["home" | "users", _, "*"] => {
            format!("a home directory ({})", path.display())
        }
        [top] | [top, "*"] if TOP_DIRS.contains(top) => {
            format!("the system directory /{}", parts[0])
        }
        _ => return None,
    };
    Some(described)
}

/// Shell startup files: writing one runs code in every future shell.
#[rustfmt::skip]
const STARTUP_FILES: &[&str] = &[
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
    ".zprofile", ".zlogin", ".kshrc", ".cshrc", ".tcshrc", ".xprofile",
];

/// Describes `path` if writing or deleting it changes the system or a user's
/// login: system directories, SSH configuration, shell startup files.
pub(super) fn system_file(path: &Path) -> Option<String> {
    let parts = components(path);
    let lower: Vec<String> = parts.iter().map(|p| p.to_lowercase()).collect();
    let lower: Vec<&str> = lower.iter().map(String::as_str).collect();
    let home_rest: Option<&[&str]> = match lower.as_slice() {
        ["root", rest @ ..] | ["home" | "users", _, rest @ ..] => Some(rest),
        _ => None,
    };
    if let Some(rest) = home_rest {
        return match rest {
            [file] if STARTUP_FILES.contains(file) => {
                Some(format!("shell startup file {}", path.display()))
            }
            [".config", "fish", "config.fish"] => {
                Some(format!("shell startup file {}", path.display()))
            }
            _ => None,
        };
    }
    let system = matches!(
        lower.as_slice(),
        [
            "etc"
                | "boot"
                | "usr"
                | "bin"
                | "sbin"
                | "lib"
                | "lib32"
                | "lib64"
                | "libx32"
                | "sys"
                | "proc"
                | "system",
            ..
        ] | ["private", "etc", ..]
            | ["var", "log" | "spool", ..]
    );
    system.then(|| format!("system file {}", path.display()))
}

/// True for a device node other than the harmless pseudo-devices.
pub(super) fn is_device(path: &Path) -> bool {
    let Ok(rest) = path.strip_prefix("/dev") else {
        return false;
    };
    let rest = rest.to_string_lossy();
    if rest.is_empty() {
        return false;
    }
    let harmless = matches!(
        rest.as_ref(),
        "null"
            | "zero"
            | "full"
            | "random"
            | "urandom"
            | "stdin"
            | "stdout"
            | "stderr"
            | "tty"
            | "console"
            | "ptmx"
    ) || ["tty", "pts/", "fd/", "shm/", "tcp/", "udp/", "mqueue/"]
        .iter()
        .any(|prefix| rest.starts_with(prefix));
    !harmless
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> PathBuf {
        absolute(text).expect("absolute test path")
    }

    #[test]
    fn absolute_expands_home_forms_and_normalizes() {
        assert_eq!(absolute("/a/../b/./c"), Some(PathBuf::from("/b/c")));
        assert_eq!(absolute("~"), Some(PathBuf::from("/home/~")));
        assert_eq!(absolute("~/x"), Some(PathBuf::from("/home/~/x")));
        assert_eq!(absolute("~bob/x"), Some(PathBuf::from("/home/bob/x")));
        assert_eq!(absolute("$HOME/.ssh"), Some(PathBuf::from("/home/~/.ssh")));
        assert_eq!(absolute("${HOME}"), Some(PathBuf::from("/home/~")));
        assert_eq!(absolute("$HOME/.."), Some(PathBuf::from("/home")));
        assert_eq!(absolute("$HOMEDIR/x"), None);
        assert_eq!(absolute("relative/path"), None);
        assert_eq!(absolute("./x"), None);
    }

    #[test]
    fn root_targets() {
        for target in [
            "/",
            "/*",
            "/.",
            "/e*",
            "/etc",
            "/usr/*",
            "/ETC",
            "/home",
            "/home/bob",
            "/root",
            "~",
            "/Users/me",
        ] {
            assert!(root_target(&path(target)).is_some(), "{target}");
        }
        for target in [
            "/tmp",
            "/tmp/*",
            "/etc/hosts",
            "/home/bob/project",
            "/srv/app/data",
            "/opt/x",
        ] {
            assert!(root_target(&path(target)).is_none(), "{target}");
        }
    }

    #[test]
    fn system_files() {
        for target in [
            "/etc/hosts",
            "/boot/grub/grub.cfg",
            "/usr/local/bin/x",
            "/bin/sh",
            "/proc/sysrq-trigger",
            "/var/log/syslog",
            "~/.bashrc",
            "/root/.profile",
            "/home/bob/.zshrc",
            "~/.config/fish/config.fish",
            "/private/etc/hosts",
        ] {
            assert!(system_file(&path(target)).is_some(), "{target}");
        }
        for target in [
            "/tmp/x",
            "/home/bob/notes.txt",
            "~/project/.bashrc.bak",
            "/srv/www/index.html",
            "/var/tmp/x",
        ] {
            assert!(system_file(&path(target)).is_none(), "{target}");
        }
    }

    #[test]
    fn protected_files() {
        let category = |target: &str| protected(target, "write").map(|f| f.category);
        for target in [
            "~/.ssh/authorized_keys",
            "~/.aws",
            "$HOME/.aws/credentials",
            "${HOME}/.kube/config",
            "~/.config/gcloud/x",
            "/root/.netrc",
            ".env",
            "app/.env.production",
            "$HERMES_HOME/.env",
        ] {
            assert_eq!(
                category(target),
                Some(DangerCategory::CredentialWrite),
                "{target}"
            );
        }
        for target in [
            "~/.hermes/config.yaml",
            "$CODEX_HOME/config.toml",
            "~/.claude",
        ] {
            assert_eq!(
                category(target),
                Some(DangerCategory::AgentConfigWrite),
                "{target}"
            );
        }
        assert_eq!(
            category("~/.bash_history"),
            Some(DangerCategory::HistoryWipe)
        );
        for target in [
            "~/.aws-backup/token",
            "~/.aws#backup",
            ".env#backup",
            ".env.example",
            "config.yaml",
            "~/.config/nvim/init.lua",
            "/tmp/token-copy",
            "$HERMES_HOMEDIR/x",
        ] {
            assert_eq!(category(target), None, "{target}");
        }
    }

    #[test]
    fn devices_except_the_harmless_ones() {
        for target in [
            "/dev/sda",
            "/dev/sda1",
            "/dev/nvme0n1",
            "/dev/mmcblk0",
            "/dev/mem",
            "/dev/disk/by-id/x",
        ] {
            assert!(is_device(&path(target)), "{target}");
        }
        for target in [
            "/dev/null",
            "/dev/zero",
            "/dev/stdout",
            "/dev/stderr",
            "/dev/tty",
            "/dev/pts/3",
            "/dev/fd/2",
            "/dev/shm/x",
            "/dev/tcp/host/80",
            "/dev",
            "/devices/x",
        ] {
            assert!(!is_device(&path(target)), "{target}");
        }
    }

    #[test]
    fn redirects_that_write() {
        assert!(redirect(">", "/dev/sda").is_some());
        assert!(redirect("2>>", "/etc/x").is_some());
        assert!(redirect("&>", "/etc/x").is_some());
        assert!(redirect(">&", "/etc/x").is_some());
        assert!(redirect(">&", "2").is_none());
        assert!(redirect("<", "/etc/passwd").is_none());
        assert!(redirect("<<<", "/etc/passwd").is_none());
        assert!(redirect(">", "out.txt").is_none());
    }
}
