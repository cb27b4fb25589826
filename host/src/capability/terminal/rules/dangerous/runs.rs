//! Programs a tool runs because of an option, a setting or a variable:
//! `rg --pre`, `sort --compress-program`, `tar --to-command`, `git -c
//! core.pager=`, `man -P`, `vim -c '!..'`, `ssh -o ProxyCommand=`, `rsync
//! -e`, `LD_PRELOAD=`, `GIT_SSH_COMMAND=`, `LESSOPEN=`, commands run by
//! `watch` or `git rebase --exec`, and `find -exec` or `xargs` running the
//! files they are given. The detector judges each by what it runs.

mod git;
mod runner;

pub(super) use runner::{Runner, Runs};

use self::runner::push;
use super::args::operands;
use super::code;
use crate::capability::terminal::rules::shell::{self, Invocation};

/// Programs that only read, filter, (de)compress, page or edit: running one
/// through an option is ordinary use (`git -c core.pager=less`,
/// `sort --compress-program=zstd`, `GIT_SSH_COMMAND="ssh -i key"`).
#[rustfmt::skip]
const HARMLESS: &[&str] = &[
    "cat", "tac", "less", "more", "most", "head", "tail", "wc", "sort", "uniq", "cut", "tr", "grep",
    "rg", "diff", "true", "false", "echo", "printf", "zcat", "gzip", "gunzip", "bzip2", "bunzip2",
    "bzcat", "xz", "unxz", "xzcat", "zstd", "unzstd", "zstdcat", "lz4", "lzop", "pigz", "unpigz",
    "pbzip2", "brotli", "base64", "od", "hexdump", "xxd", "strings", "pdftotext", "jq", "yq",
    "delta", "bat", "batcat", "diff-so-fancy", "vim", "vi", "nvim", "nano", "emacs", "code", "subl",
    "view", "ssh", "git", "column", "fold", "fmt", "nl", "expand", "iconv",
];

/// True if running `program` through an option is ordinary use.
pub(super) fn harmless(program: &str) -> bool {
    let name = program.rsplit('/').next().unwrap_or(program).to_lowercase();
    HARMLESS.contains(&name.as_str())
}

/// The programs a command line runs (as written).
pub(super) fn programs_of(line: &str) -> Vec<String> {
    shell::parse(line)
        .commands()
        .filter_map(|c| shell::invocation(&shell::words(&shell::tokenize(&c.text))))
        .map(|i| i.path)
        .collect()
}

/// How a tool's option is spelled and read: its long name (any prefix at
/// least `min` characters long, as GNU tools take: `--compress-prog`), its
/// short letter (`-I VALUE`, `-IVALUE`, or last in a cluster, `-xI VALUE`),
/// and the tool's other options whose value is the next word, so a value
/// that looks like the option is not taken for it (`rg --glob --pre`).
struct Opt<'a> {
    long: &'a str,
    min: usize,
    short: Option<char>,
}

fn opt(long: &str, min: usize, short: Option<char>) -> Opt<'_> {
    Opt { long, min, short }
}

/// The values `args` gives the option `opt`.
fn values(args: &[String], opt: Opt<'_>, skip: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--" {
            break;
        }
        if let Some(rest) = arg.strip_prefix("--") {
            let (name, value) = match rest.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (rest, None),
            };
            if name.len() >= opt.min && opt.long.starts_with(name) {
                found.extend(value.or_else(|| iter.next().cloned()));
            } else if value.is_none() && skip.contains(&arg.as_str()) {
                iter.next();
            }
            continue;
        }
        let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) else {
            continue;
        };
        match opt.short {
            Some(short) if cluster.starts_with(short) => {
                let rest = &cluster[short.len_utf8()..];
                found.extend(if rest.is_empty() {
                    iter.next().cloned()
                } else {
                    Some(rest.to_owned())
                });
            }
            Some(short)
                if cluster.ends_with(short) && cluster.chars().all(|c| c.is_ascii_alphabetic()) =>
            {
                found.extend(iter.next().cloned());
            }
            _ if skip.contains(&arg.as_str()) => {
                iter.next();
            }
            _ => {}
        }
    }
    found
}

/// `rg` options whose value is the next word.
#[rustfmt::skip]
const RG_WITH_VALUE: &[&str] = &[
    "-g", "--glob", "--iglob", "--pre-glob", "-e", "--regexp", "-f", "--file", "-t", "--type",
    "-T", "--type-not", "-m", "--max-count", "-A", "-B", "-C", "--max-depth", "-j", "--threads",
    "-E", "--encoding", "--colors", "--sort", "--sortr", "--type-add", "-r", "--replace", "-M",
    "--max-columns", "--path-separator", "--ignore-file",
];

/// `sort` options whose value is the next word.
#[rustfmt::skip]
const SORT_WITH_VALUE: &[&str] = &[
    "-o", "--output", "-k", "--key", "-t", "--field-separator", "-S", "--buffer-size", "-T",
    "--temporary-directory", "--files0-from", "--batch-size", "--parallel", "--random-source",
];

/// Everything `invocation` runs through its options and variables.
pub(super) fn runners(invocation: &Invocation) -> Vec<Runner> {
    let program = invocation.program.as_str();
    let args = invocation.args.as_slice();
    let mut found = Vec::new();
    let mut add = |how: &str, values: Vec<String>, make: fn(String) -> Runs| {
        for value in values {
            push(&mut found, format!("{program} {how}"), make(value));
        }
    };
    match program {
        "rg" | "ripgrep" => {
            add(
                "--pre",
                values(args, opt("pre", 3, None), RG_WITH_VALUE),
                Runs::Program,
            );
            add(
                "--hostname-bin",
                values(args, opt("hostname-bin", 3, None), RG_WITH_VALUE),
                Runs::Program,
            );
        }
        "sort" | "gsort" => add(
            "--compress-program",
            values(args, opt("compress-program", 2, None), SORT_WITH_VALUE),
            Runs::Program,
        ),
        "tar" | "gtar" | "bsdtar" => {
            let skip = &[
                "-f",
                "--file",
                "-C",
                "--directory",
                "-T",
                "--files-from",
                "-X",
                "--exclude-from",
            ];
            add(
                "--to-command",
                values(args, opt("to-command", 4, None), skip),
                Runs::Line,
            );
            add(
                "-I",
                values(args, opt("use-compress-program", 2, Some('I')), skip),
                Runs::Line,
            );
            add(
                "--info-script",
                values(args, opt("info-script", 2, Some('F')), skip),
                Runs::Program,
            );
            add(
                "--new-volume-script",
                values(args, opt("new-volume-script", 2, None), skip),
                Runs::Program,
            );
            add(
                "--rsh-command",
                values(args, opt("rsh-command", 2, None), skip),
                Runs::Program,
            );
            let actions = values(args, opt("checkpoint-action", 12, None), skip);
            let execs = actions
                .iter()
                .filter_map(|a| a.strip_prefix("exec="))
                .map(str::to_owned);
            add("--checkpoint-action=exec", execs.collect(), Runs::Line);
        }
        "man" => {
            let skip = &[
                "-C",
                "--config-file",
                "-M",
                "--manpath",
                "-L",
                "--locale",
                "-S",
                "-s",
                "--sections",
                "-m",
                "--systems",
                "-E",
                "--encoding",
                "-p",
                "--preprocessor",
                "-R",
                "--recode",
            ];
            add(
                "-P",
                values(args, opt("pager", 3, Some('P')), skip),
                Runs::Line,
            );
            add(
                "-H",
                values(args, opt("html", 2, Some('H')), skip),
                Runs::Line,
            );
        }
        "ag" => {
            let skip = &[
                "--ignore",
                "-G",
                "--file-search-regex",
                "-g",
                "--ignore-dir",
                "-p",
                "--path-to-ignore",
                "-A",
                "-B",
                "-C",
                "-m",
                "--max-count",
                "--depth",
            ];
            add(
                "--pager",
                values(args, opt("pager", 3, None), skip),
                Runs::Line,
            );
        }
        "less" | "more" => {
            let shells = args
                .iter()
                .filter_map(|a| a.strip_prefix('+'))
                .filter_map(|c| c.split_once(['!', '|']).map(|(_, cmd)| cmd.to_owned()));
            add("+!", shells.collect(), Runs::Line);
        }
        "vim" | "vi" | "nvim" | "view" | "vimdiff" | "gvim" | "ex" | "rvim" => {
            let mut commands = values(args, opt("cmd", 3, Some('c')), &[]);
            commands.extend(
                args.iter()
                    .filter_map(|a| a.strip_prefix('+'))
                    .map(str::to_owned),
            );
            add(
                "-c",
                commands.iter().filter_map(|c| vim_shell(c)).collect(),
                Runs::Line,
            );
        }
        "ssh" | "scp" | "sftp" | "autossh" => {
            add("-o", ssh_commands(args), Runs::Line);
            if program != "ssh" {
                add(
                    "-S",
                    values(args, opt("", usize::MAX, Some('S')), &[]),
                    Runs::Program,
                );
            }
        }
        "rsync" => {
            add(
                "-e",
                values(args, opt("rsh", 3, Some('e')), &[]),
                Runs::Line,
            );
            add(
                "--rsync-path",
                values(args, opt("rsync-path", 7, None), &[]),
                Runs::Line,
            );
        }
        "zip" => add(
            "--unzip-command",
            values(args, opt("unzip-command", 3, None), &[]),
            Runs::Line,
        ),
        "script" | "flock" => add(
            "-c",
            values(args, opt("command", 3, Some('c')), &[]),
            Runs::Command,
        ),
        "watch" => {
            let operands = operands(args, &["-n", "--interval", "-q", "--equexit"]);
            let command = (!operands.is_empty()).then(|| operands.join(" "));
            add("", command.into_iter().collect(), Runs::Command);
        }
        _ => {}
    }
    if program == "git" {
        found.extend(git::runners(args));
    }
    found.extend(variables(invocation));
    found
}

/// The shell command in a vim Ex command (`!cmd`, `:r !cmd`, `%!cmd`), or
/// the whole command if it runs code some other way (`call system(...)`,
/// `py3 ...`, `terminal`, `source`).
fn vim_shell(command: &str) -> Option<String> {
    let command = command.trim_start_matches([':', ' ']);
    if let Some(shell) = command.strip_prefix('!') {
        return Some(shell.to_owned());
    }
    if let Some((range, shell)) = command.split_once('!') {
        let range = range.trim();
        let filters = matches!(range, "r" | "read" | "w" | "write")
            || range.chars().all(|c| "0123456789,.$%'<> ".contains(c));
        if filters && !shell.trim().is_empty() {
            return Some(shell.to_owned());
        }
    }
    let first = command
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or_default();
    #[rustfmt::skip]
    let runs = matches!(first,
        "sh" | "shell" | "ter" | "terminal" | "py" | "py3" | "python" | "python3" | "pyx"
        | "pythonx" | "pyfile" | "py3file" | "lua" | "luado" | "luafile" | "perl" | "perldo"
        | "ruby" | "rubydo" | "rubyfile" | "tcl" | "tcldo" | "tclfile" | "source" | "so"
    ) || ["system(", "systemlist(", "jobstart(", "termopen(", "libcall"]
        .iter()
        .any(|call| command.contains(call));
    runs.then(|| command.to_owned())
}

/// The commands `ssh` runs locally because of `-o`: `ProxyCommand`,
/// `LocalCommand`, `KnownHostsCommand`.
fn ssh_commands(args: &[String]) -> Vec<String> {
    let mut settings: Vec<String> = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "-o" {
            settings.extend(iter.next().cloned());
        } else if let Some(setting) = arg.strip_prefix("-o") {
            settings.push(setting.to_owned());
        }
    }
    settings
        .iter()
        .filter_map(|setting| {
            let (key, value) = setting.split_once(['=', ' '])?;
            let key = key.trim().to_ascii_lowercase();
            matches!(
                key.as_str(),
                "proxycommand" | "localcommand" | "knownhostscommand"
            )
            .then(|| value.trim().to_owned())
        })
        .filter(|value| value != "none")
        .collect()
}

/// What the variables a command is started with make it run: `LD_PRELOAD`
/// (code loaded into the program), `BASH_ENV`, pagers and editors, git's
/// `GIT_SSH_COMMAND` and friends, `LESSOPEN`, `NODE_OPTIONS=--require`, a
/// `PATH` that starts in `/tmp`.
fn variables(invocation: &Invocation) -> Vec<Runner> {
    let mut found = Vec::new();
    // `export NAME=value` sets them for the commands that follow.
    let exported = matches!(
        invocation.program.as_str(),
        "export" | "declare" | "typeset"
    );
    let exports = invocation.args.iter().filter(|_| exported);
    for assignment in invocation.assignments.iter().chain(exports) {
        let Some((name, value)) = assignment.split_once('=') else {
            continue;
        };
        if value.is_empty() {
            continue;
        }
        let runs = match name {
            "LD_PRELOAD" | "LD_AUDIT" | "BASH_ENV" | "ENV" | "PROMPT_COMMAND" | "GIT_SSH"
            | "GIT_EXTERNAL_DIFF" | "GIT_ASKPASS" | "SSH_ASKPASS" | "SUDO_ASKPASS"
            | "GIT_PROXY_COMMAND" | "GIT_EXEC_PATH" | "PERL5OPT" | "RUBYOPT" => {
                Runs::Program(value.to_owned())
            }
            "GIT_SSH_COMMAND"
            | "GIT_PAGER"
            | "PAGER"
            | "MANPAGER"
            | "SYSTEMD_PAGER"
            | "EDITOR"
            | "VISUAL"
            | "GIT_EDITOR"
            | "GIT_SEQUENCE_EDITOR" => Runs::Line(value.to_owned()),
            "LESSOPEN" | "LESSCLOSE" => {
                Runs::Line(value.trim_start_matches(['|', '-']).replace("%s", "file"))
            }
            "NODE_OPTIONS"
                if [
                    "--require",
                    "-r ",
                    "--import",
                    "--loader",
                    "--experimental-loader",
                ]
                .iter()
                .any(|o| value.contains(o)) =>
            {
                Runs::Program(value.to_owned())
            }
            // A directory anyone can write first on the search path: the
            // programs planted there run in place of the real ones.
            "PATH" => {
                let first = value.split(':').next().unwrap_or_default();
                let writable = ["/tmp", "/var/tmp", "/dev/shm"]
                    .iter()
                    .any(|dir| first == *dir || first.starts_with(&format!("{dir}/")));
                if !writable {
                    continue;
                }
                Runs::Program(format!("{first}/*"))
            }
            "GIT_CONFIG_PARAMETERS" => {
                let setting = value.trim_matches('\'').split_once("'='");
                match setting.and_then(|(key, v)| git::key_runs(key, v)) {
                    Some(runs) => runs,
                    None => continue,
                }
            }
            _ => continue,
        };
        push(&mut found, format!("{name}="), runs);
    }
    found
}

/// How `find -exec` or `xargs` runs the files it is given as programs or
/// scripts (`find -exec {} ;`, `find -execdir python3 {} ;`, `xargs sh`),
/// described; `None` if it runs a fixed program on them.
pub(super) fn runs_inputs(invocation: &Invocation) -> Option<String> {
    let runs_script = |inner: &Invocation| {
        (shell::is_shell(&inner.program) || code::is_interpreter(&inner.program))
            && shell::dash_c_string(&inner.args).is_none()
            && code::inline_code(inner).is_none()
    };
    if invocation.program == "find" {
        return shell::exec_commands_of_find(&invocation.args)
            .into_iter()
            .find(|(_, inner)| {
                inner.path.contains("{}")
                    || (runs_script(inner)
                        && code::script_file(inner).is_some_and(|file| file.contains("{}")))
            })
            .map(|(action, inner)| {
                format!(
                    "runs every match as a program (find {action} {})",
                    inner.path
                )
            });
    }
    let from_xargs = invocation.wrappers.iter().any(|w| w == "xargs");
    (from_xargs && runs_script(invocation)).then(|| {
        format!(
            "runs every input as a script (xargs {})",
            invocation.program
        )
    })
}
