//! Reaching past the command's own processes: debuggers attached to a
//! running process, another process's memory or environment read through
//! `/proc`, other namespaces entered (`nsenter`, `unshare`), a container
//! daemon other than the local one driven, and kernel changes (modules,
//! `sysctl`, `kexec`, file capabilities).

use super::args::{has_flag, operands};
use super::finding::{DangerCategory, Finding};
use crate::capability::terminal::rules::shell::Invocation;

/// Container CLIs.
const CONTAINER_CLIS: &[&str] = &[
    "docker",
    "podman",
    "nerdctl",
    "docker-compose",
    "podman-compose",
];

/// Variables that point a container CLI at a daemon.
const DAEMON_VARS: &[&str] = &["DOCKER_HOST", "CONTAINER_HOST", "DOCKER_CONTEXT"];

/// Container CLIs' global options that take a value.
#[rustfmt::skip]
const GLOBAL_WITH_VALUE: &[&str] = &[
    "-H", "--host", "-c", "--context", "--config", "-l", "--log-level", "--tlscacert",
    "--tlscert", "--tlskey", "--url", "--connection", "--root", "--runroot", "--namespace", "-n",
];

/// The local daemons' sockets: naming one is not another daemon.
const LOCAL_SOCKETS: &[&str] = &[
    "unix:///var/run/docker.sock",
    "unix:///run/docker.sock",
    "unix:///run/podman/podman.sock",
    "unix:///var/run/podman/podman.sock",
];

/// Everything `invocation` does to other processes, namespaces, daemons or
/// the kernel.
pub(super) fn dangers(invocation: &Invocation) -> Vec<Finding> {
    let program = invocation.program.as_str();
    let args = invocation.args.as_slice();
    let mut found = Vec::new();
    if let Some(reason) = debugger(program, args) {
        found.push(Finding::new(DangerCategory::ProcessAccess, reason));
    }
    let words = std::iter::once(&invocation.path).chain(args);
    if let Some(path) = words.filter_map(|word| process_memory(word)).next() {
        found.push(Finding::new(
            DangerCategory::ProcessAccess,
            format!("reads or writes process memory or environment ({path})"),
        ));
    }
    let entered = invocation
        .wrappers
        .iter()
        .map(String::as_str)
        .chain([program])
        .find(|name| matches!(*name, "nsenter" | "unshare"));
    if let Some(name) = entered {
        let what = if name == "nsenter" {
            "enters another process's namespaces (nsenter)"
        } else {
            "makes new namespaces (unshare)"
        };
        found.push(Finding::new(DangerCategory::ContainerEscape, what));
    }
    if let Some(reason) = other_daemon(invocation) {
        found.push(Finding::new(DangerCategory::ContainerEscape, reason));
    }
    if let Some(reason) = kernel_change(program, args) {
        found.push(Finding::new(DangerCategory::SystemWrite, reason));
    }
    if program == "setcap" && !args.iter().any(|a| a == "-v" || a == "-r") {
        found.push(Finding::new(
            DangerCategory::Setuid,
            "gives a program capabilities (setcap)",
        ));
    }
    found
}

/// A debugger or tracer attached to a running process: `gdb -p`,
/// `gdb PROGRAM PID`, `gdb -ex attach`, `strace -p`, `lldb -p`, `gcore`.
fn debugger(program: &str, args: &[String]) -> Option<String> {
    let attaches = match program {
        "gdb" | "gdb-multiarch" | "cgdb" => {
            let pid_flag = args
                .iter()
                .any(|a| a == "-p" || a == "-pid" || a == "--pid" || a.starts_with("--pid="));
            let attach_command = args.windows(2).any(|pair| {
                matches!(pair[0].as_str(), "-ex" | "--eval-command" | "-iex")
                    && pair[1].trim_start().starts_with("attach")
            }) || args.iter().any(|a| {
                a.strip_prefix("--eval-command=")
                    .is_some_and(|c| c.trim_start().starts_with("attach"))
            });
            // `gdb PROGRAM PID` attaches to PID.
            let ops = operands(
                args,
                &[
                    "-ex",
                    "--eval-command",
                    "-iex",
                    "-x",
                    "-ix",
                    "-d",
                    "-cd",
                    "-s",
                    "-e",
                    "-se",
                    "-c",
                    "-b",
                ],
            );
            let program_and_pid = ops.len() >= 2
                && ops[1].bytes().all(|b| b.is_ascii_digit())
                && !args.iter().any(|a| a == "--args");
            pid_flag || attach_command || program_and_pid
        }
        "lldb" => args.iter().any(|a| {
            matches!(
                a.as_str(),
                "-p" | "--attach-pid" | "-n" | "--attach-name" | "-w" | "--wait-for"
            ) || a.starts_with("--attach-pid=")
                || a.starts_with("--attach-name=")
        }),
        "strace" | "ltrace" | "perf" | "bpftrace" => args.iter().any(|a| {
            a == "-p"
                || a == "--pid"
                || a.starts_with("--attach")
                || a.starts_with("--pid=")
                || (a.starts_with("-p")
                    && a[2..].bytes().all(|b| b.is_ascii_digit())
                    && a.len() > 2)
        }),
        "gcore" | "pstack" | "eu-stack" | "criu" | "memdump" | "process_vm_readv" => {
            !args.is_empty() && !args.iter().all(|a| a == "--help" || a == "--version")
        }
        _ => false,
    };
    attaches.then(|| format!("attaches to a running process ({program})"))
}

/// `/proc/PID/mem`, `/proc/PID/environ` and the kernel's memory: the path
/// in `word`, if it names one.
fn process_memory(word: &str) -> Option<&str> {
    let path = word.rsplit_once('=').map_or(word, |(_, value)| value);
    let path = path.trim_start_matches('@');
    if matches!(path, "/proc/kcore" | "/dev/mem" | "/dev/kmem" | "/dev/port") {
        return Some(path);
    }
    let rest = path.strip_prefix("/proc/")?;
    let (process, file) = rest.split_once('/')?;
    let file = file.split('/').next().unwrap_or_default();
    let is_process = process == "self"
        || process == "*"
        || process.starts_with('$')
        || process.bytes().all(|b| b.is_ascii_digit());
    (is_process && matches!(file, "mem" | "environ")).then_some(path)
}

/// A container CLI pointed at a daemon other than the local one: `-H`,
/// `--host`, `--url`, `--connection`, `--context`, `DOCKER_HOST=` (before
/// the command or exported), or `docker context use`.
fn other_daemon(invocation: &Invocation) -> Option<String> {
    let program = invocation.program.as_str();
    let remote = |value: &str| !LOCAL_SOCKETS.contains(&value) && value != "default";
    let names_remote = |assignment: &&String| {
        assignment
            .split_once('=')
            .is_some_and(|(name, value)| DAEMON_VARS.contains(&name) && remote(value))
    };
    if matches!(program, "export" | "declare" | "typeset") {
        return invocation
            .args
            .iter()
            .find(names_remote)
            .map(|a| format!("points container commands at another daemon ({program} {a})"));
    }
    if !CONTAINER_CLIS.contains(&program) {
        return None;
    }
    if let Some(assignment) = invocation.assignments.iter().find(names_remote) {
        return Some(format!(
            "drives another container daemon ({assignment} {program})"
        ));
    }
    // Global options, before the subcommand.
    let args = invocation.args.as_slice();
    let mut i = 0;
    while let Some(arg) = args.get(i).filter(|a| a.starts_with('-') && *a != "--") {
        let (option, value) = match arg.split_once('=') {
            Some((option, value)) if option.starts_with("--") => (option, Some(value)),
            _ => (arg.as_str(), None),
        };
        let takes_value = GLOBAL_WITH_VALUE.contains(&option) && value.is_none();
        let value = value.or_else(|| {
            takes_value
                .then(|| args.get(i + 1))
                .flatten()
                .map(String::as_str)
        });
        let names_daemon = matches!(
            option,
            "-H" | "--host" | "--url" | "--connection" | "--context"
        ) || (option == "-c" && program != "docker-compose");
        if let Some(value) = value.filter(|v| names_daemon && remote(v)) {
            return Some(format!(
                "drives another container daemon ({program} {option} {value})"
            ));
        }
        i += if takes_value { 2 } else { 1 };
    }
    let ops = operands(args, GLOBAL_WITH_VALUE);
    matches!(ops.as_slice(), ["context", "use", ..])
        .then(|| format!("switches to another container daemon ({program} context use)"))
}

/// Loading or removing kernel modules, changing kernel settings, or
/// booting another kernel.
fn kernel_change(program: &str, args: &[String]) -> Option<String> {
    let informs = |flags: &[&str]| args.iter().any(|a| flags.contains(&a.as_str()));
    match program {
        "insmod" | "rmmod" if !args.is_empty() && !informs(&["--help", "-V", "--version"]) => {
            Some(format!("loads or removes a kernel module ({program})"))
        }
        "modprobe"
            if !operands(
                args,
                &["-C", "--config", "-d", "--dirname", "-S", "--set-version"],
            )
            .is_empty()
                && !informs(&[
                    "-n",
                    "--dry-run",
                    "-c",
                    "--showconfig",
                    "-D",
                    "--show-depends",
                ]) =>
        {
            Some("loads or removes a kernel module (modprobe)".to_owned())
        }
        "kexec" if !args.is_empty() && !informs(&["--help", "-v", "--version"]) => {
            Some("boots another kernel (kexec)".to_owned())
        }
        "sysctl"
            if has_flag(args, 'w', &["--write"])
                || operands(args, &["-p", "--load", "-r", "--pattern"])
                    .iter()
                    .any(|op| op.contains('=')) =>
        {
            Some("changes kernel settings (sysctl -w)".to_owned())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::DangerCategory::*;
    use crate::capability::terminal::rules::dangerous::programs::tests::assert_rules;

    #[test]
    fn each_rule_flags_its_line_and_not_its_near_miss() {
        let cases: &[(&str, super::DangerCategory, &str)] = &[
            ("gdb -p 1234", ProcessAccess, "gdb ./a.out"),
            (
                "gdb -batch -ex 'attach 1' -ex 'dump memory x 0 1'",
                ProcessAccess,
                "gdb --args ./a.out 1",
            ),
            (
                "gdb /usr/bin/python3 4242",
                ProcessAccess,
                "gdb -q ./prog core",
            ),
            ("strace -f -p 1", ProcessAccess, "strace -f ls"),
            ("ltrace -p1", ProcessAccess, "ltrace ls"),
            ("lldb --attach-pid 99", ProcessAccess, "lldb ./a.out"),
            ("gcore 1234", ProcessAccess, "gcc -c x.c"),
            ("cat /proc/1/environ", ProcessAccess, "cat /proc/cpuinfo"),
            (
                "dd if=/proc/$PID/mem bs=1 skip=4096",
                ProcessAccess,
                "cat /proc/self/status",
            ),
            (
                "python3 read.py /proc/self/mem",
                ProcessAccess,
                "ls /proc/1",
            ),
            (
                "nsenter -t 1 -m -u -n -i sh",
                ContainerEscape,
                "env -u X sh",
            ),
            (
                "sudo nsenter --target 1 --mount",
                ContainerEscape,
                "nice sh",
            ),
            ("unshare -r chroot /", ContainerEscape, "chroot --help"),
            (
                "DOCKER_HOST=tcp://10.0.0.5:2375 docker ps",
                ContainerEscape,
                "DOCKER_HOST=unix:///var/run/docker.sock docker ps",
            ),
            (
                "docker -H ssh://root@build run alpine",
                ContainerEscape,
                "docker ps -a",
            ),
            ("podman --url tcp://x:8080 ps", ContainerEscape, "podman ps"),
            (
                "docker --context prod ps",
                ContainerEscape,
                "docker --context default ps",
            ),
            (
                "docker context use prod",
                ContainerEscape,
                "docker context ls",
            ),
            ("insmod evil.ko", SystemWrite, "lsmod"),
            (
                "sudo modprobe -r nouveau",
                SystemWrite,
                "modprobe -n -v nouveau",
            ),
            (
                "sysctl -w kernel.core_pattern='|/tmp/x'",
                SystemWrite,
                "sysctl kernel.core_pattern",
            ),
            ("sysctl net.ipv4.ip_forward=1", SystemWrite, "sysctl -a"),
            ("kexec -l /boot/vmlinuz", SystemWrite, "uname -r"),
            ("setcap cap_sys_admin+ep ./x", Setuid, "getcap ./x"),
        ];
        assert_rules(cases);
    }
}
