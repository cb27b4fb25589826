//! Which programs run code, and where it comes from: shells and interpreters
//! that execute their stdin or a substitution, and the fetchers and decoders
//! that feed them.

use super::args::has_flag;
use crate::capability::terminal::rules::shell::{self, Invocation, Token};

/// Programs that fetch content over the network to stdout.
pub(super) fn is_fetcher(invocation: &Invocation) -> bool {
    matches!(
        invocation.program.as_str(),
        "curl"
            | "wget"
            | "fetch"
            | "http"
            | "https"
            | "xh"
            | "nc"
            | "ncat"
            | "netcat"
            | "socat"
            | "lwp-request"
            | "aria2c"
    )
}

/// Programs that decode or unpack content to stdout.
pub(super) fn is_decoder(invocation: &Invocation) -> bool {
    let args = invocation.args.as_slice();
    match invocation.program.as_str() {
        "base64" | "base32" | "basenc" => {
            has_flag(args, 'd', &["--decode"]) || has_flag(args, 'D', &[])
        }
        "xxd" => has_flag(args, 'r', &["-revert"]),
        "openssl" => args
            .iter()
            .any(|a| a == "-d" || a == "-base64" || a == "base64" || a == "enc"),
        "uudecode" | "gunzip" | "zcat" | "bzcat" | "xzcat" | "unxz" | "bunzip2" | "rev" => true,
        "gzip" | "bzip2" | "xz" | "zstd" => has_flag(args, 'd', &["--decompress"]),
        _ => false,
    }
}

/// Short flags that give an interpreter its code inline (so stdin is data).
fn inline_code_flags(program: &str) -> Option<&'static str> {
    match program {
        p if p.starts_with("python") => Some("cm"),
        p if p.starts_with("perl") => Some("eE"),
        "ruby" | "lua" => Some("e"),
        "node" | "nodejs" | "bun" => Some("ep"),
        "deno" => Some("e"),
        "php" => Some("rR"),
        _ => None,
    }
}

/// True for an interpreter that runs code from its arguments or stdin.
pub(super) fn is_interpreter(program: &str) -> bool {
    inline_code_flags(program).is_some()
}

/// The option that hands an interpreter its code inline (`python3 -c`,
/// `perl -e`, `node --eval`), or the part of an awk program that runs
/// commands (`system(`, a pipe to or from a command); `None` if the
/// command's code is not on the line.
pub(super) fn inline_code(invocation: &Invocation) -> Option<String> {
    let program = invocation.program.as_str();
    let args = invocation.args.as_slice();
    if program == "deno" && args.first().is_some_and(|a| a == "eval") {
        return Some("eval".to_owned());
    }
    if let Some(inline) = inline_code_flags(program) {
        // `python3 -m module` names what it runs.
        let inline: String = inline.chars().filter(|&c| c != 'm').collect();
        return args
            .iter()
            .take_while(|arg| *arg != "--")
            .find(|arg| {
                matches!(arg.as_str(), "--eval" | "--print")
                    || arg
                        .strip_prefix('-')
                        .is_some_and(|f| !f.starts_with('-') && f.contains(|c| inline.contains(c)))
            })
            .cloned();
    }
    if matches!(program, "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk") {
        // The program text is the first operand (or a -e/--source value).
        return args.iter().find_map(|arg| {
            ["system", "| ", "|&", "\"|", "|\"", "getline"]
                .into_iter()
                .find(|part| arg.contains(part) && !arg.starts_with('-'))
                .map(str::to_owned)
        });
    }
    None
}

/// True if the program is a shell, an interpreter, or a shell builtin that
/// runs code from its arguments.
pub(super) fn runs_code(invocation: &Invocation) -> bool {
    let program = invocation.program.as_str();
    shell::is_shell(program)
        || inline_code_flags(program).is_some()
        || matches!(program, "eval" | "source" | ".")
}

/// True if the program runs what arrives on its stdin as code.
pub(super) fn executes_stdin(invocation: &Invocation) -> bool {
    let program = invocation.program.as_str();
    let args = invocation.args.as_slice();
    if shell::is_shell(program) {
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            if arg == "-" {
                return true;
            }
            if let Some(flags) = arg.strip_prefix('-').filter(|f| !f.starts_with('-')) {
                if flags.contains('c') {
                    return false;
                }
                if flags.contains('s') {
                    return true;
                }
                if flags == "o" || flags == "O" {
                    iter.next();
                }
                continue;
            }
            if arg.starts_with("--") || arg.starts_with('+') {
                if arg == "+o" || arg == "+O" {
                    iter.next();
                }
                continue;
            }
            return false;
        }
        return true;
    }
    if let Some(inline) = inline_code_flags(program) {
        for arg in args {
            if arg == "-" {
                return true;
            }
            if arg.starts_with("--") {
                if matches!(arg.as_str(), "--eval" | "--print") {
                    return false;
                }
                continue;
            }
            match arg.strip_prefix('-') {
                Some(flags) if flags.contains(|c| inline.contains(c)) => return false,
                Some(_) => {}
                None => return false,
            }
        }
        return true;
    }
    if matches!(program, "ssh" | "autossh") {
        // Without a command, the remote shell reads its commands from stdin.
        return super::network::ssh_command(args).is_none();
    }
    if shell::starts_shell(invocation) {
        // `su`, `sudo -s`: a shell, unless told what to run.
        return !args
            .iter()
            .any(|a| a == "-c" || a == "--command" || a.starts_with("--command="));
    }
    matches!(program, "source" | ".")
        && args.first().is_some_and(|a| {
            matches!(
                a.as_str(),
                "/dev/stdin" | "-" | "/dev/fd/0" | "/proc/self/fd/0"
            )
        })
}

/// The files a fetcher saves: `curl -o F`, `wget -O F`, `> F`, or the URL's
/// last path segment for `curl -O` and plain `wget`. Keys as [`file_key`].
pub(super) fn downloaded_files(invocation: &Invocation, tokens: &[Token]) -> Vec<String> {
    if !is_fetcher(invocation) {
        return Vec::new();
    }
    let mut files = match invocation.program.as_str() {
        "curl" => output_files(&invocation.args, 'o', "--output", false),
        "wget" => output_files(&invocation.args, 'O', "--output-document", true),
        _ => Vec::new(),
    };
    for token in tokens {
        if let Token::Redirect { op, target } = token
            && matches!(
                op.trim_start_matches(|c: char| c.is_ascii_digit()),
                ">" | ">>" | ">|" | "&>"
            )
        {
            files.push(file_key(target));
        }
    }
    files
}

/// The files named by a fetcher's output option (`short`, or `long` with the
/// value next or after `=`); without one, the URLs' file names if the fetcher
/// saves under the remote name (`wget` always, `curl` with `-O`).
fn output_files(args: &[String], short: char, long: &str, remote_by_default: bool) -> Vec<String> {
    let mut named: Vec<String> = Vec::new();
    let mut named_any = false;
    let mut remote_name = remote_by_default;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let value = if arg == long {
            iter.next().cloned()
        } else if let Some(file) = arg
            .strip_prefix(long)
            .and_then(|rest| rest.strip_prefix('='))
        {
            Some(file.to_owned())
        } else if let Some(flags) = arg.strip_prefix('-').filter(|f| !f.starts_with('-')) {
            // curl's `-O` (remote name) is a different flag from its `-o`.
            remote_name |= short == 'o' && flags.contains('O');
            match flags.split_once(short) {
                Some((_, "")) => iter.next().cloned(),
                Some((_, attached)) => Some(attached.to_owned()),
                None => None,
            }
        } else {
            remote_name |= arg == "--remote-name" || arg == "--remote-name-all";
            None
        };
        if let Some(file) = value {
            named_any = true;
            if file != "-" {
                named.push(file_key(&file));
            }
        }
    }
    if remote_name && !named_any {
        named.extend(args.iter().filter_map(|arg| url_file_name(arg)));
    }
    named
}

/// The last path segment of a URL: `https://x.io/a/install.sh?v=1` -> `install.sh`.
fn url_file_name(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let path = rest.split(['?', '#']).next().unwrap_or_default();
    let (_, name) = path.rsplit_once('/')?;
    (!name.is_empty()).then(|| name.to_owned())
}

/// The script file a command runs: `sh FILE`, `python3 FILE`, `source FILE`,
/// `./FILE`. Keys as [`file_key`].
pub(super) fn script_file(invocation: &Invocation) -> Option<String> {
    let program = invocation.program.as_str();
    let args = invocation.args.as_slice();
    let first_operand = |with_value: &[&str]| {
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            if with_value.contains(&arg.as_str()) {
                iter.next();
            } else if !(arg.starts_with('-') || arg.starts_with('+')) {
                return Some(arg);
            }
        }
        None
    };
    let file = if shell::is_shell(program) {
        if shell::dash_c_string(args).is_some() {
            return None;
        }
        first_operand(&["-o", "+o", "-O", "+O"])
    } else if inline_code_flags(program).is_some() {
        if inline_code(invocation).is_some() {
            return None;
        }
        first_operand(&["-W", "-X"])
    } else if matches!(program, "source" | ".") {
        args.first()
    } else if invocation.path.contains('/') {
        Some(&invocation.path)
    } else {
        None
    };
    file.map(|file| file_key(file))
}

/// One spelling per file for comparing names: `././x.sh` and `./x.sh` -> `x.sh`.
fn file_key(path: &str) -> String {
    let mut key = path;
    while let Some(rest) = key.strip_prefix("./") {
        key = rest;
    }
    key.to_owned()
}

/// The constant a word prints when it is one substitution running `echo`
/// or `printf` on literal text (`$(echo rm)`, `` `printf %s rm` ``); `None`
/// for anything computed.
pub(super) fn printed_constant(word: &str) -> Option<String> {
    let inner = word
        .strip_prefix("$(")
        .and_then(|rest| rest.strip_suffix(')'))
        .or_else(|| {
            word.strip_prefix('`')
                .and_then(|rest| rest.strip_suffix('`'))
        })?;
    let parsed = shell::parse(inner);
    let [command] = parsed.commands().collect::<Vec<_>>()[..] else {
        return None;
    };
    if !command.substitutions.is_empty() || command.text.contains(['$', '`', '<', '>']) {
        return None;
    }
    let invocation = shell::invocation(&shell::words(&shell::tokenize(&command.text)))?;
    let text = match (invocation.program.as_str(), invocation.args.as_slice()) {
        ("printf", [format, rest @ ..]) if format == "%s" && !rest.is_empty() => rest.concat(),
        ("printf", [text]) if !text.contains('%') && !text.contains('\\') => text.clone(),
        ("echo", _) => echoed_text(&invocation)?,
        _ => return None,
    };
    let text = text.trim().to_owned();
    (!text.is_empty() && !text.contains(char::is_whitespace)).then_some(text)
}

/// The text `echo` or `printf` writes, to look inside `echo "..." | sh`.
pub(super) fn echoed_text(invocation: &Invocation) -> Option<String> {
    match invocation.program.as_str() {
        "echo" => {
            let args: Vec<&str> = invocation
                .args
                .iter()
                .map(String::as_str)
                .skip_while(|a| matches!(*a, "-n" | "-e" | "-E" | "-ne" | "-en"))
                .collect();
            Some(args.join(" "))
        }
        "printf" => Some(invocation.args.join(" ")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invocation(line: &str) -> Invocation {
        shell::invocation(&shell::words(&shell::tokenize(line))).expect("a program")
    }

    #[test]
    fn shells_execute_stdin_without_a_script_or_command_string() {
        for line in [
            "sh",
            "bash",
            "bash -s",
            "bash -s -- --flag",
            "sh -",
            "bash -x",
            "sudo bash",
            "zsh -o pipefail",
        ] {
            assert!(executes_stdin(&invocation(line)), "{line}");
        }
        for line in [
            "bash script.sh",
            "sh -c ls",
            "bash -lc make",
            "bash -o pipefail script.sh",
            "cat",
            "jq .",
        ] {
            assert!(!executes_stdin(&invocation(line)), "{line}");
        }
    }

    #[test]
    fn interpreters_execute_stdin_without_inline_code() {
        for line in [
            "python3",
            "python3 -",
            "python -u",
            "perl",
            "ruby",
            "node",
            "php",
            "source /dev/stdin",
        ] {
            assert!(executes_stdin(&invocation(line)), "{line}");
        }
        for line in [
            "python3 -m json.tool",
            "python3 -c x",
            "python3 script.py",
            "perl -ne 'print'",
            "node -e x",
            "node --eval x",
            "source ~/.bashrc",
        ] {
            assert!(!executes_stdin(&invocation(line)), "{line}");
        }
    }

    #[test]
    fn fetchers_and_decoders() {
        assert!(is_fetcher(&invocation("curl -s https://x")));
        assert!(is_fetcher(&invocation("wget -qO- https://x")));
        assert!(!is_fetcher(&invocation("git fetch")));
        for line in [
            "base64 -d",
            "base64 --decode",
            "base64 -di",
            "xxd -r -p",
            "openssl enc -d -base64",
            "gunzip",
            "gzip -dc",
        ] {
            assert!(is_decoder(&invocation(line)), "{line}");
        }
        for line in ["base64", "base64 -w0", "xxd file", "gzip file"] {
            assert!(!is_decoder(&invocation(line)), "{line}");
        }
    }

    #[test]
    fn downloaded_files_by_flag_redirect_or_url() {
        let downloads = |line: &str| {
            let tokens = shell::tokenize(line);
            let invocation = shell::invocation(&shell::words(&tokens)).expect("a program");
            downloaded_files(&invocation, &tokens)
        };
        assert_eq!(downloads("curl -o x.sh https://h/y"), ["x.sh"]);
        assert_eq!(downloads("curl -fsSLo ./x.sh https://h/y"), ["x.sh"]);
        assert_eq!(downloads("curl --output=/tmp/x https://h/y"), ["/tmp/x"]);
        assert_eq!(
            downloads("curl -LO https://h/a/install.sh?v=2"),
            ["install.sh"]
        );
        assert_eq!(downloads("curl https://h/y > run.py"), ["run.py"]);
        assert_eq!(downloads("wget https://h/a/setup.sh"), ["setup.sh"]);
        assert_eq!(downloads("wget -O s.sh https://h/a/setup.sh"), ["s.sh"]);
        assert!(downloads("wget -qO- https://h/a/setup.sh").is_empty());
        assert!(downloads("curl https://h/y").is_empty());
        assert!(downloads("cat x > y").is_empty());
    }

    #[test]
    fn script_files_run_by_shells_interpreters_or_path() {
        assert_eq!(
            script_file(&invocation("bash install.sh")),
            Some("install.sh".into())
        );
        assert_eq!(
            script_file(&invocation("sh -e ./x.sh arg")),
            Some("x.sh".into())
        );
        assert_eq!(
            script_file(&invocation("python3 -u run.py")),
            Some("run.py".into())
        );
        assert_eq!(
            script_file(&invocation(". ./env.sh")),
            Some("env.sh".into())
        );
        assert_eq!(script_file(&invocation("./x.sh")), Some("x.sh".into()));
        assert_eq!(
            script_file(&invocation("/tmp/x.sh")),
            Some("/tmp/x.sh".into())
        );
        assert_eq!(script_file(&invocation("bash -c 'x.sh'")), None);
        assert_eq!(script_file(&invocation("python3 -c 'x'")), None);
        assert_eq!(script_file(&invocation("ls x.sh")), None);
    }

    #[test]
    fn shell_wrappers_execute_stdin_unless_given_a_command() {
        assert!(executes_stdin(&invocation("sudo -s")));
        assert!(executes_stdin(&invocation("sudo -i")));
        assert!(executes_stdin(&invocation("su")));
        assert!(!executes_stdin(&invocation("su -c id")));
        assert!(!executes_stdin(&invocation("sudo -l")));
    }

    #[test]
    fn echoed_text_skips_echo_options() {
        assert_eq!(
            echoed_text(&invocation("echo -n rm -rf /")),
            Some("rm -rf /".to_owned())
        );
        assert_eq!(
            echoed_text(&invocation("printf 'ls'")),
            Some("ls".to_owned())
        );
        assert_eq!(echoed_text(&invocation("cat x")), None);
    }
}
