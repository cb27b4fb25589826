//! The command rules read a line the way the shell that runs it does: a
//! differential test of the parser against bash. Each line of a corpus of
//! tricky constructs (and a seeded random mix of them) runs in bash with
//! recording shims first on `PATH` and bash's own versions of common
//! programs turned off; every program bash runs must be among the simple
//! commands `split_commands` reports, or one of them must be a command that
//! runs code it is handed (`eval`, `bash -c`, `trap`, ...), which the rules
//! treat as such.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use toolhost::capability::terminal::rules::commands::split_commands;
use toolhost::capability::terminal::rules::dangerous::detect;
use toolhost::capability::terminal::{CommandPattern, DangerCategory};

/// Programs with recording shims; `M` is their usual argument.
const PROGRAMS: &[&str] = &[
    "touch", "rm", "curl", "chmod", "git", "cat", "ls", "echo", "printf",
];

/// Commands that run code handed to them as data: when the parser reports
/// one, what it runs is judged as a command string, not as a program name.
const RUNNERS: &[&str] = &[
    "eval", "bash", "sh", "source", ".", "exec", "command", "builtin", "trap", "xargs", "env",
    "sudo", "nohup", "time", "timeout", "alias",
];

/// Lines with `P` standing for a program to be run (or not) by the construct.
const TEMPLATES: &[&str] = &[
    "P M",
    "((P M))",
    "echo x &>/dev/null P M",
    r"echo $'\'; P M #'",
    "echo $[x;P M;x]",
    "$(P M)",
    "`P M`",
    "echo $(P M)",
    "echo \"$(P M)\"",
    "echo \"`P M`\"",
    "a=$(P M)",
    "a=`P M`; echo $a",
    "x=1 P M",
    "{ P M; }",
    "(P M)",
    "( (P M) )",
    "if true; then P M; fi",
    "if P M; then :; fi",
    "while false; do :; done; P M",
    "until P M; do break; done",
    "case x in x) P M;; esac",
    "case $(P M) in *) ;; esac",
    "f() { P M; }; f",
    "function f { P M; }; f",
    "function f() ( P M ); f",
    "P M | cat",
    "cat <(P M)",
    "echo >(P M)",
    "cat <<EOF\n$(P M)\nEOF",
    "cat <<'EOF'\n$(P M)\nEOF",
    "cat <<-EOF\n\t`P M`\n\tEOF",
    "cat <<< $(P M)",
    "cat <<< \"`P M`\"",
    "echo ${x:-$(P M)}",
    "echo ${x:=`P M`}",
    "echo ${x:+$(P M)}",
    "echo ${#x}$(P M)",
    "[[ $(P M) ]]",
    "[[ -n `P M` ]]",
    "echo $((1+$(P M)))",
    "echo $(( `P M` ))",
    "let x=$(P M)",
    "(( x = $(P M) ))",
    "! P M",
    "time P M",
    "P M &",
    "P M & wait",
    "true || P M",
    "false && P M",
    "true && P M || :",
    "for i in 1; do P M; done",
    "for i in $(P M); do :; done",
    "for ((i=0;i<1;i++)); do P M; done",
    "select x in a; do P M; break; done </dev/null",
    "echo \\$(P M)",
    "echo '$(P M)'",
    "echo \"\\$(P M)\"",
    "# P M",
    "echo x # ; P M",
    "echo x;# P M",
    "echo x; P M",
    "echo x && P M",
    "echo x\nP M",
    "echo x|P M",
    "echo x>/dev/null;P M",
    "'P' M",
    "\"P\" M",
    "P'' M",
    "\\P M",
    "P\"\" M",
    "$'P' M",
    "$\"P\" M",
    "echo x > $(P M)",
    "echo x > >(P M)",
    "echo x 2> `P M`",
    "a=( $(P M) )",
    "declare x=$(P M)",
    "export y=`P M`",
    "readonly z=$(P M)",
    "eval 'P M'",
    "bash -c 'P M'",
    "sh -c \"P M\"",
    "exec P M",
    "command P M",
    "trap 'P M' EXIT",
    "echo x | xargs P",
    "env P M",
    "nohup P M >/dev/null 2>&1",
    "coproc P M",
    "echo $(echo $(P M))",
    "echo \"$(echo \"$(P M)\")\"",
    "echo $( (P M) )",
    "echo $(case x in x) P M;; esac)",
    "echo $(echo ')' ; P M)",
    "echo \"${x:-\"$(P M)\"}\"",
    "x=$'\\x27'; P M",
    "echo {a,b}; P M",
    "echo ~; P M",
    "echo *; P M",
    "[ -z x ] || P M",
    "test -n x && P M",
    "echo -e 'a\\nb' | while read l; do P M; done",
    "printf '%s\\n' a | { read x; P M; }",
    "echo x |& P M",
    "P M 2>&1 | cat",
    "P M >& /dev/null",
    "P M <> /dev/null",
    "P M 3>&- 4<&0",
];

/// A directory of recording shims, and the log they write to.
struct Shims {
    dir: tempfile::TempDir,
}

impl Shims {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for name in PROGRAMS {
            let path = dir.path().join(name);
            std::fs::write(
                &path,
                "#!/bin/sh\nprintf '%s\\n' \"${0##*/}\" >> \"$SHIM_LOG\"\n",
            )
            .unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Self { dir }
    }

    /// The programs bash ran for `line` (run in a scratch directory).
    fn run(&self, line: &str) -> BTreeSet<String> {
        let scratch = tempfile::tempdir().unwrap();
        let log = scratch.path().join("log");
        std::fs::write(&log, "").unwrap();
        let script = format!("enable -n echo printf kill test '[' true false\n{line}\n");
        let mut child = Command::new("/bin/bash")
            .arg("-c")
            .arg(&script)
            .current_dir(scratch.path())
            .env_clear()
            .env("PATH", self.dir.path())
            .env("SHIM_LOG", &log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                // A random line can recurse for ever (`f() { f; }`): what it
                // ran so far is still compared.
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        // Background jobs may still be writing.
        std::thread::sleep(Duration::from_millis(5));
        read_log(&log)
    }
}

fn read_log(log: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// True if one of the simple commands the parser reported runs `program`,
/// as the command rules see it (quotes removed, wrappers and leading
/// assignments peeled off, a path on the program).
fn reports(commands: &[String], program: &str) -> bool {
    let patterns = [program.to_string(), format!("{program} *")]
        .map(|text| CommandPattern::parse(&text).unwrap());
    commands
        .iter()
        .any(|command| patterns.iter().any(|p| p.matches(command)))
}

/// Checks one line; `Err` describes a program bash ran that the parser did
/// not report.
fn check(shims: &Shims, line: &str) -> Result<(), String> {
    let ran = shims.run(line);
    let commands = split_commands(line);
    if RUNNERS.iter().any(|runner| reports(&commands, runner)) {
        return Ok(());
    }
    // A program computed when the line runs cannot be named; the rules
    // refuse it as such (and the detector flags it) rather than judge it.
    if detect(line)
        .iter()
        .any(|danger| danger.category == DangerCategory::ComputedProgram)
    {
        return Ok(());
    }
    let missed: Vec<&String> = ran.iter().filter(|p| !reports(&commands, p)).collect();
    if missed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{line:?}: bash ran {missed:?}, the parser reported {commands:?}"
        ))
    }
}

#[test]
fn every_program_bash_runs_is_a_command_the_parser_reports() {
    let shims = Shims::new();
    let mut failures = Vec::new();
    let mut lines = 0;
    for template in TEMPLATES {
        for program in ["touch", "rm", "curl"] {
            lines += 1;
            let line = template.replace('P', program);
            if let Err(e) = check(&shims, &line) {
                failures.push(e);
            }
        }
    }
    assert!(lines > 300, "{lines}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A fixed-seed xorshift: `next(n)` is in `0..n`, the same sequence on every run.
fn xorshift(seed: u64) -> impl FnMut(usize) -> usize {
    let mut state = seed;
    move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    }
}

/// A random line: a few constructs joined by operators, each of which may
/// hold another random line where its program would run (up to `depth`
/// levels deep).
fn random_line(next: &mut impl FnMut(usize) -> usize, depth: usize) -> String {
    const JOINERS: &[&str] = &["; ", " && ", " || ", " | ", "\n", " & "];
    let parts = 1 + next(3);
    let mut line = String::new();
    for i in 0..parts {
        if i > 0 {
            line.push_str(JOINERS[next(JOINERS.len())]);
        }
        let template = TEMPLATES[next(TEMPLATES.len())];
        let part = if depth > 0 && template.contains("P M") && next(2) == 0 {
            template.replacen("P M", &random_line(next, depth - 1), 1)
        } else {
            template.replace('P', PROGRAMS[next(3)])
        };
        line.push_str(&part);
        // Templates that end inside a comment or here-document stay last.
        if template.contains('#') || template.contains("EOF") {
            break;
        }
    }
    line
}

/// Lines the random tests try; `TOOLHOST_DIALECT_LINES` asks for more (and
/// `TOOLHOST_DIALECT_SEED` for other lines) in a longer run.
fn random_lines() -> (u64, usize) {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    (
        env("TOOLHOST_DIALECT_SEED").unwrap_or(0x9e37_79b9_7f4a_7c15),
        env("TOOLHOST_DIALECT_LINES").map_or(300, |n: u64| n as usize),
    )
}

#[test]
fn random_nested_constructs_agree_with_bash() {
    let (seed, count) = random_lines();
    let mut next = xorshift(seed);
    let shims = Shims::new();
    let mut failures = Vec::new();
    for _ in 0..count {
        let line = random_line(&mut next, 3);
        if let Err(e) = check(&shims, &line) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} lines (seed {seed:#x}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
