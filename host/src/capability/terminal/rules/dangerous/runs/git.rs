//! What `git` runs because of its settings and options: `-c KEY=VALUE` and
//! `git config` with a key whose value is a command (`core.pager`,
//! `core.sshCommand`, `alias.x=!cmd`, `core.fsmonitor`, filters), and the
//! subcommands that run commands (`rebase --exec`, `bisect run`, `submodule
//! foreach`, `grep -O`, `filter-branch`, `--upload-pack`, `ext::` remotes).

use super::runner::{Runner, Runs, push};

/// What a git setting `key` = `value` makes git run, if anything.
pub(crate) fn key_runs(key: &str, value: &str) -> Option<Runs> {
    let key = key.to_ascii_lowercase();
    let boolean = matches!(
        value.to_ascii_lowercase().as_str(),
        "" | "true" | "false" | "0" | "1" | "yes" | "no" | "on" | "off"
    );
    if boolean {
        return None;
    }
    let last = key.rsplit('.').next().unwrap_or_default();
    if key.starts_with("alias.") {
        return value
            .strip_prefix('!')
            .map(|line| Runs::Line(line.to_owned()));
    }
    if key.starts_with("credential") && last == "helper" {
        // Built-in helpers (`store`, `cache`) run `git credential-NAME`.
        return value
            .starts_with(['!', '/', '.'])
            .then(|| Runs::Line(value.trim_start_matches('!').to_owned()));
    }
    let line = matches!(
        key.as_str(),
        "core.pager"
            | "core.editor"
            | "core.sshcommand"
            | "core.fsmonitor"
            | "sequence.editor"
            | "uploadpack.packobjectshook"
            | "web.browser"
    ) || key.starts_with("pager.")
        || matches!(
            last,
            "textconv" | "clean" | "smudge" | "process" | "driver" | "cmd" | "command"
        );
    let program = matches!(
        key.as_str(),
        "core.hookspath" | "core.gitproxy" | "core.askpass" | "diff.external" | "gpg.program"
    ) || (key.starts_with("gpg.") && last == "program")
        || (key.starts_with("remote.") && matches!(last, "uploadpack" | "receivepack"))
        || key == "include.path"
        || (key.starts_with("includeif.") && last == "path")
        || (key == "protocol.ext.allow" && value != "never");
    if line {
        Some(Runs::Line(value.to_owned()))
    } else if program {
        Some(Runs::Program(value.to_owned()))
    } else {
        None
    }
}

/// `git` global options that take the next word as their value.
const GLOBAL_WITH_VALUE: &[&str] = &[
    "-C",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--super-prefix",
];

/// What `git` with `args` runs besides git.
pub(super) fn runners(args: &[String]) -> Vec<Runner> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(arg) = args.get(i).filter(|a| a.starts_with('-')) {
        let (setting, used) = match arg.as_str() {
            "-c" | "--config-env" => (args.get(i + 1).cloned(), 2),
            other if other.starts_with("-c") => (Some(other[2..].to_owned()), 1),
            other if other.starts_with("--config-env=") => {
                (Some(other["--config-env=".len()..].to_owned()), 1)
            }
            other if other.starts_with("--exec-path=") => {
                let dir = other["--exec-path=".len()..].to_owned();
                push(&mut found, "git --exec-path".to_owned(), Runs::Program(dir));
                (None, 1)
            }
            other if GLOBAL_WITH_VALUE.contains(&other) => (None, 2),
            _ => (None, 1),
        };
        if let Some((key, value)) = setting.as_deref().and_then(|s| s.split_once('='))
            && let Some(runs) = key_runs(key, value)
        {
            push(&mut found, format!("git -c {key}"), runs);
        }
        i += used;
    }
    let Some(subcommand) = args.get(i) else {
        return found;
    };
    let rest = &args[i + 1..];
    subcommand_runners(subcommand, rest, &mut found);
    for (at, arg) in rest.iter().enumerate() {
        let (option, value) = match arg.split_once('=') {
            Some((option, value)) => (option, Some(value.to_owned())),
            None => (arg.as_str(), None),
        };
        let transport = matches!(option, "--upload-pack" | "--receive-pack")
            || (option == "--exec" && subcommand == "push")
            || (option == "-u" && subcommand == "clone");
        if transport && let Some(program) = value.or_else(|| rest.get(at + 1).cloned()) {
            push(&mut found, format!("git {option}"), Runs::Line(program));
        }
        if let Some(command) = arg.strip_prefix("ext::") {
            let command = command.replace("% ", " ");
            push(&mut found, "git ext::".to_owned(), Runs::Line(command));
        }
    }
    found
}

/// What a git `subcommand` with `rest` runs: a setting it stores, or a
/// command it runs.
fn subcommand_runners(subcommand: &str, rest: &[String], found: &mut Vec<Runner>) {
    match subcommand {
        "config" => {
            let reads = rest.iter().any(|a| {
                a.starts_with("--get")
                    || matches!(
                        a.as_str(),
                        "-l" | "--list"
                            | "--unset"
                            | "--unset-all"
                            | "--remove-section"
                            | "get"
                            | "list"
                            | "unset"
                    )
            });
            let operands: Vec<&String> = rest.iter().filter(|a| !a.starts_with('-')).collect();
            let operands = match operands.first().map(|s| s.as_str()) {
                Some("set") => &operands[1..],
                _ => &operands[..],
            };
            if !reads
                && let [key, value, ..] = operands
                && let Some(runs) = key_runs(key, value)
            {
                push(found, format!("git config {key}"), runs);
            }
        }
        "rebase" => {
            for (at, arg) in rest.iter().enumerate() {
                let command = if arg == "-x" || arg == "--exec" {
                    rest.get(at + 1).cloned()
                } else {
                    arg.strip_prefix("--exec=").map(str::to_owned)
                };
                if let Some(command) = command {
                    push(
                        found,
                        "git rebase --exec".to_owned(),
                        Runs::Command(command),
                    );
                }
            }
        }
        "bisect" if rest.first().is_some_and(|a| a == "run") && rest.len() > 1 => {
            push(
                found,
                "git bisect run".to_owned(),
                Runs::Command(rest[1..].join(" ")),
            );
        }
        "submodule" => {
            if let Some(at) = rest.iter().position(|a| a == "foreach") {
                let command: Vec<&str> = rest[at + 1..]
                    .iter()
                    .map(String::as_str)
                    .skip_while(|a| matches!(*a, "--recursive" | "-q" | "--quiet"))
                    .collect();
                if !command.is_empty() {
                    let command = Runs::Command(command.join(" "));
                    push(found, "git submodule foreach".to_owned(), command);
                }
            }
        }
        "difftool" | "grep" | "filter-branch" => {
            for (at, arg) in rest.iter().enumerate() {
                let (option, value) = match arg.split_once('=') {
                    Some((option, value)) => (option, Some(value.to_owned())),
                    None => (arg.as_str(), None),
                };
                let filter = option.starts_with("--") && option.ends_with("-filter");
                let takes = matches!(option, "-x" | "--extcmd") || filter;
                let command = if takes {
                    value.or_else(|| rest.get(at + 1).cloned())
                } else if subcommand == "grep" {
                    // `-O` / `--open-files-in-pager` take their value attached.
                    arg.strip_prefix("--open-files-in-pager=")
                        .or_else(|| arg.strip_prefix("-O").filter(|c| !c.is_empty()))
                        .map(str::to_owned)
                } else {
                    None
                };
                if let Some(command) = command {
                    let runs = if filter {
                        Runs::Command(command)
                    } else {
                        Runs::Line(command)
                    };
                    push(found, format!("git {subcommand} {option}"), runs);
                }
            }
        }
        _ => {}
    }
}
