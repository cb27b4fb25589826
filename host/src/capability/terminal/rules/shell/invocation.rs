//! What a simple command really runs: wrappers such as `sudo`, `env` or
//! `xargs` and leading assignments peeled off, and the command strings it
//! hands to a shell (`sh -c`, `eval`, here-documents).

use super::SimpleCommand;
use super::words::{Token, tokenize, words};

/// What a simple command runs once wrappers such as `sudo`, `env`, `nohup`
/// or `xargs`, and leading `NAME=value` assignments, are peeled off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::capability::terminal::rules) struct Invocation {
    /// The wrappers peeled off, outermost first, as lower-case base names.
    pub(in crate::capability::terminal::rules) wrappers: Vec<String>,
    /// The program as written (unquoted), e.g. `/bin/rm`.
    pub(in crate::capability::terminal::rules) path: String,
    /// The program's base name, lower-cased: `/bin/RM` -> `rm`.
    pub(in crate::capability::terminal::rules) program: String,
    /// The program's arguments.
    pub(in crate::capability::terminal::rules) args: Vec<String>,
    /// The `NAME=value` assignments before the program, `env`'s included.
    pub(in crate::capability::terminal::rules) assignments: Vec<String>,
}

/// `sudo` options that take a value.
#[rustfmt::skip]
const SUDO_WITH_VALUE: &[&str] = &[
    "-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R", "--user", "--group",
    "--host", "--prompt", "--close-from", "--chdir", "--role", "--type", "--other-user",
    "--command-timeout", "--chroot",
];

/// `xargs` options that take a value.
#[rustfmt::skip]
const XARGS_WITH_VALUE: &[&str] = &[
    "-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "--max-lines", "-n",
    "--max-args", "-P", "--max-procs", "-s", "--max-chars",
];

/// `strace` and `ltrace` options that take a value.
#[rustfmt::skip]
const TRACE_WITH_VALUE: &[&str] = &[
    "-o", "-e", "-p", "-s", "-u", "-E", "-a", "-O", "-S", "-P", "-I", "-b", "-X", "-l", "-L", "-n",
];

/// `env`'s long options (GNU takes any unambiguous prefix of one), and
/// whether each takes a value in the next word.
const ENV_LONG: &[(&str, bool)] = &[
    ("argv0", true),
    ("block-signal", false),
    ("chdir", true),
    ("debug", false),
    ("default-signal", false),
    ("help", false),
    ("ignore-environment", false),
    ("ignore-signal", false),
    ("list-signal-handling", false),
    ("null", false),
    ("split-string", true),
    ("unset", true),
    ("version", false),
];

/// What one option of `env` at `words[i]` amounts to.
enum EnvOption {
    /// A plain option or one with its value: skip this many words.
    Skip(usize),
    /// `-S`/`--split-string`: the string to split, and the words it and its
    /// option took.
    Split(String, usize),
}

/// Reads the `env` option at `words[i]`: long options by any unambiguous
/// prefix (`--s=`, `--split`), short clusters where `-a`, `-C`, `-u` and `-S`
/// take the rest of the cluster or the next word (`-iS 'cmd'`, `-vS/bin/sh`).
fn env_option(words: &[String], i: usize) -> EnvOption {
    let option = words[i].as_str();
    let next = || words.get(i + 1).cloned().unwrap_or_default();
    if let Some(long) = option.strip_prefix("--") {
        let (name, value) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (long, None),
        };
        let matching: Vec<&(&str, bool)> = ENV_LONG
            .iter()
            .filter(|(full, _)| full.starts_with(name))
            .collect();
        let found = ENV_LONG
            .iter()
            .find(|(full, _)| *full == name)
            .or(match matching.as_slice() {
                [one] => Some(*one),
                _ => None,
            });
        return match (found, value) {
            (Some(("split-string", _)), Some(value)) => EnvOption::Split(value.to_owned(), 1),
            (Some(("split-string", _)), None) => EnvOption::Split(next(), 2),
            (Some((_, true)), None) => EnvOption::Skip(2),
            _ => EnvOption::Skip(1),
        };
    }
    let cluster = option.strip_prefix('-').unwrap_or_default();
    for (at, flag) in cluster.char_indices() {
        if matches!(flag, 'a' | 'C' | 'u' | 'S') {
            let rest = &cluster[at + 1..];
            let (value, used) = if rest.is_empty() {
                (next(), 2)
            } else {
                (rest.to_owned(), 1)
            };
            return if flag == 'S' {
                EnvOption::Split(value, used)
            } else {
                EnvOption::Skip(used)
            };
        }
    }
    EnvOption::Skip(1)
}

/// The words of `env -S STRING`: `\_` is a space, then words as the shell
/// splits them.
fn split_string(string: &str) -> Vec<String> {
    words(&tokenize(&string.replace("\\_", " ")))
}

/// A wrapper program: its options that take a value, and how many positional
/// words come before the wrapped command (`timeout 10 cmd`, `chroot /root cmd`).
fn wrapper(name: &str) -> Option<(&'static [&'static str], usize)> {
    let spec: (&'static [&'static str], usize) = match name {
        "sudo" => (SUDO_WITH_VALUE, 0),
        "doas" => (&["-u", "-C"], 0),
        "env" => (&["-u", "--unset", "-C", "--chdir"], 0),
        "command" | "builtin" | "nohup" | "setsid" | "busybox" | "unbuffer" => (&[], 0),
        "exec" => (&["-a"], 0),
        "time" => (&["-f", "--format", "-o", "--output"], 0),
        "nice" => (&["-n", "--adjustment"], 0),
        "ionice" => (&["-c", "--class", "-n", "--classdata"], 0),
        "timeout" => (&["-s", "--signal", "-k", "--kill-after"], 1),
        "stdbuf" => (&["-i", "-o", "-e", "--input", "--output", "--error"], 0),
        "chroot" => (&["--userspec", "--groups"], 1),
        "xargs" => (XARGS_WITH_VALUE, 0),
        "pkexec" => (&["--user"], 0),
        "strace" | "ltrace" => (TRACE_WITH_VALUE, 0),
        "taskset" => (&[], 1),
        "chrt" => (&[], 1),
        "setpriv" | "systemd-run" | "firejail" | "prlimit" | "numactl" | "fakeroot"
        | "proxychains" | "proxychains4" | "torsocks" | "tsocks" | "chronic" => (&[], 0),
        "nsenter" => (&["-t", "--target", "-S", "--setuid", "-G", "--setgid"], 0),
        "unshare" => (
            &[
                "--map-user",
                "--map-group",
                "--propagation",
                "--setgroups",
                "-S",
                "-G",
                "-R",
                "-w",
            ],
            0,
        ),
        _ => return None,
    };
    Some(spec)
}

/// The base name of a program path: `/usr/bin/rm` -> `rm`.
fn base_name(path: &str) -> &str {
    match path.rsplit('/').next() {
        Some(name) if !name.is_empty() => name,
        _ => path,
    }
}

/// True for `NAME=value` with a valid shell variable name.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        let mut chars = name.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Bash brace expansion of a whole word like `{rm,-rf,/}` into its parts.
fn expand_braces(word: &str) -> Option<Vec<String>> {
    let inner = word.strip_prefix('{')?.strip_suffix('}')?;
    (inner.contains(',') && !inner.contains(['{', '}', ' ']))
        .then(|| inner.split(',').map(str::to_owned).collect())
}

/// Peels wrappers and assignments off a simple command's words. `None` if no
/// program is left (only assignments, or no words).
pub(in crate::capability::terminal::rules) fn invocation(words: &[String]) -> Option<Invocation> {
    let mut words: Vec<String> = words.to_vec();
    if let Some(parts) = words.first().and_then(|first| expand_braces(first)) {
        words.splice(0..1, parts);
    }
    let mut wrappers = Vec::new();
    let mut assignments = Vec::new();
    let mut i = 0;
    // The last wrapper's index, in case nothing follows it.
    let mut last_wrapper: Option<usize> = None;
    loop {
        // `env` takes any `NAME=value` before its program, even a name the
        // shell would not accept (`env A-B=1 cmd`).
        let after_env = wrappers.last().is_some_and(|w| w == "env");
        while let Some(word) = words
            .get(i)
            .filter(|w| is_assignment(w) || (after_env && !w.starts_with('-') && w.contains('=')))
        {
            assignments.push(word.clone());
            i += 1;
        }
        let Some(word) = words.get(i) else { break };
        let name = base_name(word).to_lowercase();
        let Some((with_value, positional)) = wrapper(&name) else {
            break;
        };
        last_wrapper = Some(i);
        wrappers.push(name.clone());
        i += 1;
        while let Some(option) = words.get(i) {
            if option == "--" {
                i += 1;
                break;
            }
            let is_option = option.starts_with('-') && (option.len() > 1 || name == "env");
            if !is_option {
                break;
            }
            if name == "env" {
                match env_option(&words, i) {
                    EnvOption::Skip(used) => i += used,
                    EnvOption::Split(string, used) => {
                        let end = (i + used).min(words.len());
                        words.splice(i..end, split_string(&string));
                        break;
                    }
                }
                continue;
            }
            i += if with_value.contains(&option.as_str()) {
                2
            } else {
                1
            };
        }
        i += positional;
    }
    let (start, wrappers) = match (words.get(i), last_wrapper) {
        (Some(_), _) => (i, wrappers),
        // Nothing after the wrappers: the last wrapper is the program.
        (None, Some(index)) => {
            wrappers.pop();
            (index, wrappers)
        }
        (None, None) => return None,
    };
    let path = words.get(start)?.clone();
    Some(Invocation {
        wrappers,
        program: base_name(&path).to_lowercase(),
        args: words.get(start + 1..).unwrap_or_default().to_vec(),
        path,
        assignments,
    })
}

/// The commands a program runs on behalf of each input (`find -exec`).
pub(in crate::capability::terminal::rules) fn exec_commands(
    invocation: &Invocation,
) -> Vec<Invocation> {
    if invocation.program != "find" {
        return Vec::new();
    }
    exec_commands_of_find(&invocation.args)
        .into_iter()
        .map(|(_, inner)| inner)
        .collect()
}

/// The commands `find` runs with `-exec`, `-execdir`, `-ok` or `-okdir`, each
/// with the action that runs it.
pub(in crate::capability::terminal::rules) fn exec_commands_of_find(
    args: &[String],
) -> Vec<(&str, Invocation)> {
    let mut commands = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if !matches!(arg.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            continue;
        }
        let inner: Vec<String> = iter
            .by_ref()
            .take_while(|a| *a != ";" && *a != "+")
            .cloned()
            .collect();
        if let Some(invocation) = invocation(&inner) {
            commands.push((arg.as_str(), invocation));
        }
    }
    commands
}

/// Shells that run a command string with `-c` or a script from stdin.
const SHELLS: [&str; 12] = [
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "rbash", "yash",
];

/// True if `program` is a shell.
pub(in crate::capability::terminal::rules) fn is_shell(program: &str) -> bool {
    SHELLS.contains(&program)
}

/// The command lines a simple command hands to a shell to run: `sh -c STRING`,
/// `su -c STRING`, `eval ARGS`, and here-documents or here-strings fed to a
/// shell.
pub(in crate::capability::terminal::rules) fn shell_payloads(
    invocation: &Invocation,
    tokens: &[Token],
    command: &SimpleCommand,
) -> Vec<String> {
    let mut payloads = Vec::new();
    let args = &invocation.args;
    let program = invocation.program.as_str();
    if starts_shell(invocation) {
        payloads.extend(command.heredocs.iter().cloned());
        for token in tokens {
            if let Token::Redirect { op, target } = token
                && op.ends_with("<<<")
            {
                payloads.push(target.clone());
            }
        }
    }
    if is_shell(program) {
        payloads.extend(dash_c_string(args).map(str::to_owned));
    } else if program == "eval" {
        payloads.push(args.join(" "));
    } else if matches!(program, "su" | "runuser") {
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            if arg == "-c" || arg == "--command" {
                payloads.extend(iter.next().cloned());
            } else if let Some(string) = arg.strip_prefix("--command=") {
                payloads.push(string.to_owned());
            }
        }
    }
    payloads
}

/// True for a program that starts a shell, which reads commands from stdin
/// unless given a script or `-c`: a shell itself, `su`, `runuser`, or `sudo`
/// or `doas` with `-s`/`-i` and no command.
pub(in crate::capability::terminal::rules) fn starts_shell(invocation: &Invocation) -> bool {
    match invocation.program.as_str() {
        program if is_shell(program) => true,
        "su" | "runuser" => true,
        "sudo" | "doas" => invocation.args.iter().any(|arg| {
            matches!(arg.as_str(), "--shell" | "--login")
                || arg
                    .strip_prefix('-')
                    .is_some_and(|flags| !flags.starts_with('-') && flags.contains(['s', 'i']))
        }),
        _ => false,
    }
}

/// The string after a shell's `-c` (also in clusters like `-lc`, `-ec`).
pub(in crate::capability::terminal::rules) fn dash_c_string(args: &[String]) -> Option<&str> {
    let mut has_c = false;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--" {
            // The end of the options: with `-c` given, the command string
            // follows; without it, a script file.
            return if has_c {
                iter.next().map(String::as_str)
            } else {
                None
            };
        }
        if let Some(flags) = arg.strip_prefix('-').filter(|f| !f.starts_with('-')) {
            if flags.contains('c') {
                has_c = true;
            }
            if flags == "o" || flags == "O" {
                iter.next();
            }
            continue;
        }
        if arg.starts_with("--") || arg.starts_with('+') {
            continue;
        }
        return has_c.then_some(arg.as_str());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::terminal::rules::shell::{parse, tokenize, words};

    fn words_of(text: &str) -> Vec<String> {
        words(&tokenize(text))
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn invocation_peels_wrappers() {
        let cases: [(&str, &str, &[&str]); 12] = [
            ("sudo /bin/rm -rf /", "rm", &["-rf", "/"]),
            ("sudo -u root -E env FOO=1 rm x", "rm", &["x"]),
            ("LANG=C FOO=bar /usr/bin/RM x", "rm", &["x"]),
            ("nohup nice -n 10 timeout 5 rm x", "rm", &["x"]),
            ("command exec -a name rm x", "rm", &["x"]),
            ("env -i -u HOME -- rm x", "rm", &["x"]),
            ("env -S 'rm -rf /'", "rm", &["-rf", "/"]),
            ("xargs -0 -n 1 rm -f", "rm", &["-f"]),
            ("busybox rm x", "rm", &["x"]),
            ("{rm,-rf,/}", "rm", &["-rf", "/"]),
            ("sudo", "sudo", &[]),
            ("time -p ls", "ls", &[]),
        ];
        for (line, program, args) in cases {
            let inv = invocation(&words_of(line)).unwrap();
            assert_eq!(inv.program, program, "{line}");
            assert_eq!(inv.args, strings(args), "{line}");
        }
        let inv = invocation(&words_of("sudo xargs rm")).unwrap();
        assert_eq!(inv.wrappers, ["sudo", "xargs"]);
        assert_eq!(invocation(&words_of("A=1 B=2")), None);
    }

    #[test]
    fn find_exec_commands_are_extracted() {
        let find = invocation(&words_of(
            "find . -exec rm -f {} ';' -execdir sh -c x + -ok unlink {} \\;",
        ))
        .unwrap();
        let programs: Vec<_> = exec_commands_of_find(&find.args)
            .into_iter()
            .map(|(action, inner)| (action, inner.program))
            .collect();
        assert_eq!(
            programs,
            [
                ("-exec", "rm".into()),
                ("-execdir", "sh".into()),
                ("-ok", "unlink".into())
            ]
        );
        assert_eq!(exec_commands(&find).len(), 3);
        assert!(exec_commands(&invocation(&words_of("ls -exec rm")).unwrap()).is_empty());
    }

    #[test]
    fn shell_payloads_find_command_strings() {
        let payloads = |line: &str| {
            let parsed = parse(line);
            let command = parsed.commands().next().unwrap().clone();
            let tokens = tokenize(&command.text);
            let inv = invocation(&words(&tokens)).unwrap();
            shell_payloads(&inv, &tokens, &command)
        };
        assert_eq!(payloads("bash -c 'rm -rf /'"), ["rm -rf /"]);
        assert_eq!(payloads("sudo sh -ec 'ls'"), ["ls"]);
        assert_eq!(payloads("bash -o pipefail -c 'ls'"), ["ls"]);
        assert_eq!(payloads("eval rm -rf /"), ["rm -rf /"]);
        assert_eq!(payloads("su root -c 'id'"), ["id"]);
        assert_eq!(payloads("bash <<< 'id'"), ["id"]);
        assert_eq!(payloads("bash <<EOF\nid\nEOF"), ["id\n"]);
        assert_eq!(payloads("sudo -s <<EOF\nid\nEOF"), ["id\n"]);
        assert_eq!(payloads("su <<< id"), ["id"]);
        assert!(payloads("sudo -u root <<< id").is_empty());
        assert!(payloads("bash script.sh -c x").is_empty());
        assert!(payloads("cat <<EOF\nid\nEOF").is_empty());
    }
}
