//! Attack tests: the operator's terminal. The terminal toolhost is started
//! from is a pseudo-terminal this test owns, made the controlling terminal
//! of the `toolhost` process. Commands try to type into it (`TIOCSTI`, with
//! upper bits set in the request so that a 64-bit comparison misses it) and
//! to write to it (an OSC 52 clipboard sequence among others), through the
//! command line, MCP over stdio (a session's commands and background
//! processes, on a pseudo-terminal or not) and without the kernel sandbox.
//! Nothing may reach it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::Workspace;
use crate::mcp::{call, stdio, text};

/// Types into `/dev/tty` (each request, one byte at a time), then writes a
/// clipboard sequence and a line to it; prints what each step got.
const ATTACK: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
try:
    fd = os.open("/dev/tty", os.O_RDWR)
except OSError as e:
    print("no terminal:", e.errno)
    sys.exit(0)
for request in (0x5412, 0x100005412, 0xffffffff00005412, 0x541C | 1 << 40):
    for byte in b"typed-by-the-command\n":
        c = ctypes.c_char(byte)
        r = libc.ioctl(fd, ctypes.c_ulong(request), ctypes.byref(c))
    print(hex(request), r, ctypes.get_errno())
os.write(fd, b"\x1b]52;c;cHduZWQ=\x07written-by-the-command\n")
print("wrote")
"#;

/// What the command left on the terminal: bytes typed into it are waiting
/// as its input, bytes written to it as its output on the master.
const TYPED: &str = "typed-by-the-command";
const WRITTEN: &str = "written-by-the-command";

/// A pseudo-terminal pair this test owns: the operator's terminal.
struct OperatorTerminal {
    master: OwnedFd,
    terminal: OwnedFd,
}

impl OperatorTerminal {
    fn open() -> Self {
        let (mut master, mut terminal) = (-1, -1);
        // SAFETY: opens a pair; both descriptors become owned here.
        unsafe {
            let opened = libc::openpty(
                &mut master,
                &mut terminal,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            );
            assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
            // Raw: a typed byte is readable at once, nothing echoes.
            let mut termios: libc::termios = std::mem::zeroed();
            libc::tcgetattr(terminal, &mut termios);
            libc::cfmakeraw(&mut termios);
            libc::tcsetattr(terminal, libc::TCSANOW, &termios);
            for fd in [master, terminal] {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                let flags = libc::fcntl(fd, libc::F_GETFL);
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
            Self {
                master: OwnedFd::from_raw_fd(master),
                terminal: OwnedFd::from_raw_fd(terminal),
            }
        }
    }

    /// Makes this terminal the controlling terminal of what `command`
    /// starts, in a session of its own, as a shell does for a program.
    fn control(&self, command: &mut std::process::Command) {
        let fd = self.terminal.as_raw_fd();
        // SAFETY: setsid and ioctl are async-signal-safe.
        unsafe {
            command.pre_exec(move || {
                if libc::setsid() < 0 || libc::ioctl(fd, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Everything waiting on either side: what was written to the terminal
    /// and what was typed into it.
    fn arrived(&self) -> String {
        let mut all = Vec::new();
        for fd in [&self.master, &self.terminal] {
            let mut buffer = [0u8; 4096];
            loop {
                // SAFETY: a non-blocking read into our buffer.
                let n = unsafe { libc::read(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), 4096) };
                if n <= 0 {
                    break;
                }
                all.extend_from_slice(&buffer[..n as usize]);
            }
        }
        String::from_utf8_lossy(&all).into_owned()
    }

    /// Asserts that nothing of the command reached this terminal.
    fn assert_untouched(&self, what: &str) {
        let arrived = self.arrived();
        assert!(
            !arrived.contains(TYPED) && !arrived.contains(WRITTEN) && !arrived.contains("\x1b]52"),
            "{what} reached the operator's terminal: {arrived:?}"
        );
    }
}

/// A workspace holding the attack script and a configuration whose default
/// profile runs commands with `extra`.
fn workspace(extra: &str) -> Workspace {
    let ws = Workspace::new(|builder| builder);
    ws.write("attack.py", ATTACK);
    ws.write(
        "toolhost.toml",
        format!(
            "default_profile = \"p\"\naudit = \"off\"\n[profiles.p]\n\
             allow = [\"terminal:*\"]\nfile.read = [\".\"]\nterminal.dangerous = \"allow\"\n{extra}\n"
        ),
    );
    ws
}

/// `toolhost call run_command` of the attack, on the operator's terminal.
fn call_on(terminal: &OperatorTerminal, ws: &Workspace, line: &str) -> String {
    let mut command = std::process::Command::new(crate::toolhost_cli());
    command
        .arg("--config")
        .arg(ws.join("toolhost.toml"))
        .args(["call", "run_command"])
        .arg(json!({ "command": line }).to_string())
        .current_dir(&ws.path)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null());
    terminal.control(&mut command);
    let output = command.output().expect("the toolhost binary runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_command_cannot_type_into_or_write_to_the_operators_terminal() {
    for (extra, what) in [
        ("", "a sandboxed command"),
        (
            "terminal.network = \"host\"\n[profiles.p.tools.run_command]\nallow = [\"network:fetch\"]",
            "a command sharing the host's network",
        ),
        ("terminal.sandbox = \"none\"", "an unsandboxed command"),
    ] {
        let terminal = OperatorTerminal::open();
        let ws = workspace(extra);
        let printed = call_on(&terminal, &ws, "python3 attack.py");
        // It ran (and found no terminal, or was refused).
        assert!(
            printed.contains("no terminal") || printed.contains("wrote"),
            "{what}: {printed}"
        );
        terminal.assert_untouched(what);
        // A shell's own redirections fare no better.
        let printed = call_on(
            &terminal,
            &ws,
            &format!("printf '\\033]52;c;cHduZWQ=\\a{WRITTEN}\\n' > /dev/tty; echo done"),
        );
        assert!(printed.contains("done"), "{what}: {printed}");
        terminal.assert_untouched(what);
    }
}

/// The result text of an MCP tool call that must succeed.
async fn tool(client: &crate::mcp::Client, name: &str, arguments: Value) -> Value {
    let result = client
        .call_tool(call(name, arguments.clone()))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{name}: {}", text(&result));
    serde_json::from_str(&text(&result)).unwrap()
}

/// Waits for background process `id` of the session to end; its output.
async fn finished(client: &crate::mcp::Client, id: &Value) -> String {
    let waited = tool(
        client,
        "process_wait",
        json!({ "id": id, "timeout_secs": 20 }),
    )
    .await;
    waited.to_string()
}

#[tokio::test]
async fn a_session_cannot_reach_the_operators_terminal_over_mcp() {
    for (extra, sandboxed) in [("", true), ("terminal.sandbox = \"none\"", false)] {
        session_over_mcp(extra, sandboxed).await;
    }
}

/// The session of a `toolhost serve` over stdio on the operator's terminal,
/// under a profile with `extra`.
async fn session_over_mcp(extra: &str, sandboxed: bool) {
    let terminal = OperatorTerminal::open();
    let ws = workspace(extra);
    let mut command = std::process::Command::new(crate::toolhost_cli());
    command
        .arg("--config")
        .arg(ws.join("toolhost.toml"))
        .arg("serve")
        .current_dir(&ws.path)
        .env("RUST_LOG", "error")
        .stderr(std::process::Stdio::null());
    terminal.control(&mut command);
    let client = stdio(command.into()).await;

    // A command of the session, then one in the background.
    let ran = tool(
        &client,
        "run_command",
        json!({ "command": "python3 attack.py" }),
    )
    .await;
    assert!(ran.to_string().contains("no terminal"), "{extra}: {ran}");
    let started = tool(
        &client,
        "process_start",
        json!({ "command": "sleep 0.2; python3 attack.py" }),
    )
    .await;
    let output = finished(&client, &started["id"]).await;
    assert!(output.contains("no terminal"), "{extra}: {output}");
    terminal.assert_untouched("a session's command");

    // On a pseudo-terminal of its own, a background process has that one
    // as its terminal: its writes are its own output, the terminal works
    // (its size, `stty`), and in the sandbox it cannot type into it.
    let started = tool(
        &client,
        "process_start",
        json!({
            "command": "stty size; python3 attack.py",
            "pty": true, "rows": 33, "cols": 101,
        }),
    )
    .await;
    let output = finished(&client, &started["id"]).await;
    assert!(output.contains("33 101"), "{extra}: {output}");
    if sandboxed {
        for request in ["0x5412", "0x100005412", "0xffffffff00005412"] {
            assert!(
                output.contains(&format!("{request} -1 1")),
                "{request} was not refused with EPERM: {output}"
            );
        }
    }
    assert!(output.contains(WRITTEN), "{extra}: {output}");
    terminal.assert_untouched("a background process on a pseudo-terminal");
    client.cancel().await.unwrap();
}

#[test]
fn the_sandbox_dev_has_no_terminal_of_the_host() {
    let terminal = OperatorTerminal::open();
    let ws = workspace("");
    // `/dev/tty` stands for the opener's own terminal, and a command has
    // none; no other terminal device is there.
    let printed = call_on(
        &terminal,
        &ws,
        "ls /dev; cat /proc/self/stat | cut -d' ' -f7; exec 3<>/dev/tty || echo refused",
    );
    assert!(printed.contains("refused"), "{printed}");
    for device in ["pts", "ptmx", "console", "tty0", "tty1"] {
        assert!(
            !printed.contains(&format!("\\n{device}\\n")),
            "/dev/{device}: {printed}"
        );
    }
    // tty_nr is 0: no controlling terminal.
    assert!(printed.contains("\\n0\\n"), "{printed}");
    assert!(Path::new("/dev/tty").exists());
    terminal.assert_untouched("listing /dev");
}

#[tokio::test]
async fn under_landlock_a_device_takes_ioctls_only_as_the_commands_own_terminal() {
    let abi = toolhost::capability::terminal::confine::probe()
        .await
        .landlock_abi
        .unwrap_or(0);
    // TCGETS on /dev/null opened inside: not a terminal (ENOTTY), unless
    // Landlock refuses device ioctls first (EACCES).
    let line = "python3 -c 'import fcntl, termios\ntry:\n fcntl.ioctl(open(\"/dev/null\"), \
                termios.TCGETS, bytes(64))\nexcept OSError as e: print(\"errno\", e.errno)'";
    for (extra, expected) in [
        ("", if abi >= 5 { libc::EACCES } else { libc::ENOTTY }),
        ("terminal.landlock = \"off\"", libc::ENOTTY),
    ] {
        let terminal = OperatorTerminal::open();
        let printed = call_on(&terminal, &workspace(extra), line);
        assert!(
            printed.contains(&format!("errno {expected}")),
            "{extra}: {printed}"
        );
    }
}
