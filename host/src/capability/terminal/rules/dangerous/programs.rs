//! What single programs do with their arguments: the per-program rules of the
//! dangerous-command detector (`rm`, `chmod`, `dd`, `git`, `kill`, `mkfs`,
//! `systemctl`, ...), as findings without the text they came from.

mod system;

use self::system::{disk_format, kill_signal, service_stop, shutdown};
use super::args::{has_flag, operands};
use super::finding::{DangerCategory, Finding};
use crate::capability::terminal::rules::dangerous::{network, process, runs, targets, tools};
use crate::capability::terminal::rules::shell::{self, Invocation};

/// `git` options that take a value before the subcommand.
#[rustfmt::skip]
const GIT_WITH_VALUE: &[&str] = &[
    "-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env",
    "--super-prefix",
];

/// Everything dangerous `invocation` does by itself. `find -exec` commands
/// are reported here only as deletions; the caller inspects them further.
pub(super) fn dangers(invocation: &Invocation) -> Vec<Finding> {
    let program = invocation.program.as_str();
    let args = invocation.args.as_slice();
    let mut found = Vec::new();
    // `--help` or `--version` alone only prints.
    if !args.is_empty() && args.iter().all(|a| a == "--help" || a == "--version") {
        return found;
    }
    found.extend(tools::dangers(invocation));
    found.extend(process::dangers(invocation));
    found.extend(
        network::listener(program, args)
            .map(|reason| Finding::new(DangerCategory::NetworkListener, reason)),
    );
    found.extend(
        runs::runs_inputs(invocation)
            .map(|reason| Finding::new(DangerCategory::ExecOption, reason)),
    );
    match program {
        "rm" | "grm" | "unlink" => rm(args, &mut found),
        "chmod" => chmod(args, &mut found),
        "chown" | "chgrp" if has_flag(args, 'R', &["--recursive"]) => found.push(Finding::new(
            DangerCategory::RecursiveChown,
            format!("recursive ownership change ({program} -R)"),
        )),
        "dd" => {
            found.extend(
                args.iter()
                    .filter_map(|arg| arg.strip_prefix("of="))
                    .filter_map(|output| targets::write(output, "dd to")),
            );
            found.extend(
                args.iter()
                    .filter_map(|arg| arg.strip_prefix("if="))
                    .filter_map(targets::absolute)
                    .filter(|input| targets::is_device(input))
                    .map(|input| {
                        Finding::new(
                            DangerCategory::RawDiskRead,
                            format!("reads a whole device (dd if={})", input.display()),
                        )
                    }),
            );
        }
        "tee" => found.extend(
            args.iter()
                .filter(|arg| !arg.starts_with('-'))
                .filter_map(|file| targets::write(file, "tee to")),
        ),
        "cp" | "mv" | "install" | "ln" | "rsync" => found.extend(
            copy_destination(args)
                .and_then(|destination| targets::write(destination, &format!("{program} onto"))),
        ),
        "sed" => found.extend(
            sed_in_place_files(args)
                .into_iter()
                .filter_map(|file| targets::write(file, "edit in place")),
        ),
        p if p.starts_with("perl") || p == "ruby" => found.extend(
            script_in_place_files(args)
                .into_iter()
                .filter_map(|file| targets::write(file, "edit in place")),
        ),
        "truncate" => found.extend(
            operands(args, &["-s", "--size", "-r", "--reference"])
                .into_iter()
                .filter_map(|file| targets::write(file, "truncate")),
        ),
        "shred" | "wipe" | "srm" => found.push(Finding::new(
            DangerCategory::SecureErase,
            format!("overwrites files beyond recovery ({program})"),
        )),
        "find" => find(args, &mut found),
        "git" => found.extend(git(args)),
        "kill" if kills_everything(args) => found.push(Finding::new(
            DangerCategory::KillAll,
            "kills every process (kill -1)",
        )),
        "kill" if kill_signal(args) && kills_by_name(args) => found.push(Finding::new(
            DangerCategory::KillAll,
            "force-kills processes found by name (kill -9 $(pgrep ...))",
        )),
        "killall" if only_informs(args) => {}
        "killall" | "killall5" => found.push(Finding::new(
            DangerCategory::KillAll,
            format!("kills processes by name ({program})"),
        )),
        "pkill" if kill_signal(args) => found.push(Finding::new(
            DangerCategory::KillAll,
            "force-kills processes by pattern (pkill -9)",
        )),
        _ => {}
    }
    found.extend(
        disk_format(program, args).map(|reason| Finding::new(DangerCategory::DiskFormat, reason)),
    );
    found.extend(
        service_stop(invocation).map(|reason| Finding::new(DangerCategory::ServiceStop, reason)),
    );
    found.extend(
        shutdown(program, args).map(|reason| Finding::new(DangerCategory::Shutdown, reason)),
    );
    if invocation.wrappers.iter().any(|w| w == "xargs") && is_remover(program) {
        found.push(Finding::new(
            DangerCategory::BulkDelete,
            format!("deletes every path read from stdin (xargs {program})"),
        ));
    }
    found
}

/// `rm` in any spelling of `-r`, and what it deletes.
fn rm(args: &[String], found: &mut Vec<Finding>) {
    let mut recursive = false;
    let mut force = false;
    let mut no_preserve_root = false;
    let mut targets = Vec::new();
    let mut options_done = false;
    for arg in args {
        if options_done || arg == "-" || !arg.starts_with('-') {
            targets.push(arg.as_str());
        } else if arg == "--" {
            options_done = true;
        } else if let Some(long) = arg.strip_prefix("--") {
            // GNU accepts unambiguous prefixes: `--rec`, `--no-p`.
            recursive |= "recursive".starts_with(long);
            force |= !long.is_empty() && "force".starts_with(long);
            no_preserve_root |= "no-preserve-root".starts_with(long);
        } else {
            recursive |= arg.contains(['r', 'R']);
            force |= arg.contains('f');
        }
    }
    if recursive {
        found.push(Finding::new(
            DangerCategory::RecursiveDelete,
            "recursive delete (rm -r)",
        ));
    }
    if no_preserve_root {
        found.push(Finding::new(
            DangerCategory::DeleteRoot,
            "disables the root directory safeguard (rm --no-preserve-root)",
        ));
    }
    for target in &targets {
        found.extend(targets::protected(target, "deletes"));
    }
    // Forced, so unasked: outside the working directory (an absolute, home
    // or parent path, or one computed when the line runs).
    let outside = |target: &&&str| {
        target.starts_with(['/', '~', '$', '`'])
            || target.split('/').any(|part| part == "..")
            || target.contains("$(")
    };
    if force && let Some(target) = targets.iter().find(outside) {
        found.push(Finding::new(
            DangerCategory::ForcedDelete,
            format!("forced delete outside the working directory (rm -f {target})"),
        ));
    }
    for path in targets.into_iter().filter_map(targets::absolute) {
        if let Some(what) = targets::root_target(&path) {
            found.push(Finding::new(
                DangerCategory::DeleteRoot,
                format!("deletes {what}"),
            ));
        } else if let Some(what) = targets::system_file(&path) {
            found.push(Finding::new(
                DangerCategory::SystemWrite,
                format!("deletes {what}"),
            ));
        }
    }
}

/// `chmod` modes that open files to everyone or set setuid/setgid.
fn chmod(args: &[String], found: &mut Vec<Finding>) {
    let mut recursive = false;
    let mut mode: Option<&str> = None;
    for arg in args {
        let is_flag_cluster = arg.len() > 1
            && arg.starts_with('-')
            && arg[1..].chars().all(|c| "RvfcHLP".contains(c));
        if arg == "--recursive" {
            recursive = true;
        } else if is_flag_cluster {
            recursive |= arg.contains('R');
        } else if mode.is_none() && !arg.starts_with("--") {
            mode = Some(arg);
        }
    }
    let Some(mode) = mode else {
        return;
    };
    let shown = if recursive {
        format!("chmod -R {mode}")
    } else {
        format!("chmod {mode}")
    };
    let (world_writable, setuid) = mode_risks(mode);
    if world_writable {
        found.push(Finding::new(
            DangerCategory::WorldWritable,
            format!("makes files world-writable ({shown})"),
        ));
    }
    if setuid {
        found.push(Finding::new(
            DangerCategory::Setuid,
            format!("sets the setuid or setgid bit ({shown})"),
        ));
    }
}

/// `find -delete` and `find -exec rm`.
fn find(args: &[String], found: &mut Vec<Finding>) {
    // `-fls FILE`, `-fprint FILE`, `-fprint0 FILE`, `-fprintf FILE FORMAT`
    // write (and first truncate) FILE.
    for pair in args.windows(2) {
        if matches!(
            pair[0].as_str(),
            "-fls" | "-fprint" | "-fprint0" | "-fprintf"
        ) {
            found.extend(targets::write(&pair[1], &format!("find {} to", pair[0])));
        }
    }
    if args.iter().any(|a| a == "-delete") {
        found.push(Finding::new(
            DangerCategory::BulkDelete,
            "deletes every match (find -delete)",
        ));
    }
    for (action, inner) in shell::exec_commands_of_find(args) {
        if is_remover(&inner.program) {
            found.push(Finding::new(
                DangerCategory::BulkDelete,
                format!("deletes every match (find {action} {})", inner.program),
            ));
        }
    }
}

/// Git commands that lose work or rewrite shared history.
fn git(args: &[String]) -> Option<Finding> {
    let mut i = 0;
    while let Some(arg) = args.get(i).filter(|a| a.starts_with('-')) {
        i += if GIT_WITH_VALUE.contains(&arg.as_str()) {
            2
        } else {
            1
        };
    }
    let subcommand = args.get(i)?;
    let rest = args.get(i + 1..).unwrap_or_default();
    let has = |long: &[&str], short: char| has_flag(rest, short, long);
    let reason = match subcommand.as_str() {
        // `--har` is git's unambiguous abbreviation of `--hard`.
        "reset"
            if rest
                .iter()
                .any(|a| a.len() >= 5 && "--hard".starts_with(a.as_str())) =>
        {
            "discards uncommitted changes (git reset --hard)"
        }
        "push"
            if has(
                &["--force", "--force-with-lease", "--force-if-includes"],
                'f',
            ) || rest.iter().any(|a| a.starts_with('+')) =>
        {
            "rewrites remote history (git push --force)"
        }
        "push"
            if has(&["--delete", "--prune"], 'd')
                || rest.iter().any(|a| a.starts_with(':') && a.len() > 1) =>
        {
            "deletes remote branches (git push --delete)"
        }
        "push" if rest.iter().any(|a| a == "--mirror") => {
            "overwrites every remote ref (git push --mirror)"
        }
        "clean" if has(&["--force"], 'f') && !has(&["--dry-run"], 'n') => {
            "deletes untracked files (git clean -f)"
        }
        "branch" if has(&[], 'D') || (has(&["--delete"], 'd') && has(&["--force"], 'f')) => {
            "force-deletes a branch (git branch -D)"
        }
        "stash" if rest.first().is_some_and(|a| a == "clear") => {
            "drops every stash (git stash clear)"
        }
        _ => return None,
    };
    Some(Finding::new(DangerCategory::GitDestructive, reason))
}

/// True if `kill` targets pid -1 (every process it may signal).
fn kills_everything(args: &[String]) -> bool {
    if args.len() == 1 && args[0] == "-1" {
        return true;
    }
    let first_pid = match args.first().map(String::as_str) {
        Some("-s" | "-n" | "--signal") => 2,
        Some(arg) if arg.starts_with('-') => 1,
        _ => 0,
    };
    let pids = args.get(first_pid..).unwrap_or_default();
    pids.iter().filter(|p| *p != "--").any(|p| p == "-1")
}

/// True if a `kill` target is a process list looked up by name
/// (`$(pgrep x)`, `` `pidof x` ``).
fn kills_by_name(args: &[String]) -> bool {
    args.iter().any(|arg| {
        ["$(pgrep", "$(pidof", "`pgrep", "`pidof"]
            .iter()
            .any(|lookup| arg.starts_with(lookup))
    })
}

/// True if `killall` is only asked to list signals or print its version.
fn only_informs(args: &[String]) -> bool {
    !args.is_empty()
        && args
            .iter()
            .all(|a| matches!(a.as_str(), "-l" | "--list" | "-V" | "--version" | "--help"))
}

/// The files `perl -i` or `ruby -i` edits in place: the operands after the
/// script (none without `-i`). `-i` takes the rest of its cluster as a
/// backup suffix; `-e` takes its code from the rest of the cluster or the
/// next argument.
fn script_in_place_files(args: &[String]) -> Vec<&str> {
    let mut in_place = false;
    let mut inline_code = false;
    let mut operands = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) else {
            operands.push(arg.as_str());
            continue;
        };
        if cluster == "-" {
            operands.extend(iter.by_ref().map(String::as_str));
            break;
        }
        for (i, flag) in cluster.char_indices() {
            match flag {
                'i' => {
                    in_place = true;
                    break;
                }
                'e' | 'E' => {
                    inline_code = true;
                    if i + 1 == cluster.len() {
                        iter.next();
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    if !in_place {
        return Vec::new();
    }
    operands
        .into_iter()
        .skip(usize::from(!inline_code))
        .collect()
}

/// True if `program` deletes the paths it is given.
fn is_remover(program: &str) -> bool {
    matches!(program, "rm" | "grm" | "unlink" | "shred")
}

/// Where `cp`, `mv`, `install`, `ln` or `rsync` write: `-t DIR` or the last operand.
fn copy_destination(args: &[String]) -> Option<&str> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "-t" || arg == "--target-directory" {
            return iter.next().map(String::as_str);
        }
        if let Some(dir) = arg.strip_prefix("--target-directory=") {
            return Some(dir);
        }
    }
    let operands = operands(args, &["-S", "--suffix", "-m", "--mode", "-o", "-g", "-e"]);
    match operands.as_slice() {
        [_, .., last] => Some(last),
        _ => None,
    }
}

/// The files `sed` edits in place (none without `-i`).
fn sed_in_place_files(args: &[String]) -> Vec<&str> {
    let in_place = args.iter().any(|arg| {
        arg.starts_with("--in-place")
            || arg.strip_prefix('-').is_some_and(|flags| {
                !flags.starts_with('-')
                    && flags
                        .chars()
                        .take_while(char::is_ascii_alphabetic)
                        .any(|c| c == 'i')
            })
    });
    if !in_place {
        return Vec::new();
    }
    let has_script_option = args.iter().any(|a| {
        a == "-e" || a == "-f" || a.starts_with("--expression") || a.starts_with("--file")
    });
    let operands = operands(
        args,
        &["-e", "-f", "--expression", "--file", "-l", "--line-length"],
    );
    let skip = usize::from(!has_script_option);
    operands.into_iter().skip(skip).collect()
}

/// The octal or symbolic `chmod` mode's risks: (world-writable, setuid/setgid).
fn mode_risks(mode: &str) -> (bool, bool) {
    if !mode.is_empty() && mode.len() <= 4 && mode.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        let digits: Vec<u8> = mode.bytes().map(|b| b - b'0').collect();
        let others = digits.last().copied().unwrap_or(0);
        let special = if digits.len() == 4 { digits[0] } else { 0 };
        return (others & 2 != 0, special & 6 != 0);
    }
    let mut world_writable = false;
    let mut setuid = false;
    for clause in mode.split(',') {
        let who: String = clause.chars().take_while(|c| "ugoa".contains(*c)).collect();
        let mut op: Option<char> = None;
        for c in clause.chars().skip(who.len()) {
            match c {
                '+' | '-' | '=' => op = Some(c),
                _ if matches!(op, Some('+' | '=')) => {
                    if c == 'w' && (who.contains('o') || who.contains('a')) {
                        world_writable = true;
                    }
                    if c == 's' && (who.is_empty() || who.contains(['u', 'g', 'a'])) {
                        setuid = true;
                    }
                }
                _ => {}
            }
        }
    }
    (world_writable, setuid)
}

#[cfg(test)]
pub(super) mod tests;
