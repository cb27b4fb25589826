//! Attack tests: control sequences a guest or a command line chooses reach
//! the operator's terminal only escaped, through `toolhost call`, `check`,
//! the terminal approval prompt (on a pty the test owns) and `-v` guest logs.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Text that would erase and repaint a line, retitle the terminal, recolour
/// it through an 8-bit CSI and reverse what follows: everything a hostile
/// guest or command line would try.
const HOSTILE: &str =
    "ok\r\x1b[2K\x1b]0;owned\x07\u{9b}31mfine\x7f \u{202e}fr- mr\u{2066}x\u{2069}\u{200f}\u{61c}";

/// The characters a terminal acts on instead of showing (newline aside):
/// C0 controls, DEL, C1 controls and the bidirectional controls.
fn acts_on_terminal(c: char) -> bool {
    matches!(c,
        '\0'..='\x09' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// The control characters in `bytes`, for a failure message.
fn controls(bytes: &[u8]) -> Vec<char> {
    String::from_utf8_lossy(bytes)
        .chars()
        .filter(|&c| acts_on_terminal(c))
        .collect()
}

fn toolhost(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the toolhost binary runs")
}

#[test]
fn call_prints_a_tools_control_sequences_escaped() {
    let arguments = serde_json::json!({ "text": HOSTILE }).to_string();
    let output = toolhost(&["call", "echo", &arguments]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(controls(&output.stdout), Vec::<char>::new(), "{output:?}");
    // Still the same value for whoever parses it.
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["text"], HOSTILE);
}

#[test]
fn check_shows_a_tools_description_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tools.toml");
    // TOML's \u escapes put the raw controls into the description.
    std::fs::write(
        &file,
        "[[tools]]\nname = \"painter\"\n\
         description = \"Looks fine\\r\\u001b[2K\\u001b]0;owned\\u0007\\u009b31m \\u202Efr- mr\"\n\
         url = \"https://status.example.com/api\"\n",
    )
    .unwrap();
    let output = toolhost(&["check", file.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(text.contains("painter"), "{text}");
    assert_eq!(controls(&output.stdout), Vec::<char>::new(), "{text:?}");
    assert!(text.contains("Looks fine\\r\\x1b[2K"), "{text}");
}

#[test]
fn verbose_guest_logs_and_output_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(toolhost_tests::MISBEHAVE, dir.path().join("misbehave.wasm")).unwrap();
    let arguments = serde_json::json!({ "text": HOSTILE }).to_string();
    let output = toolhost(&[
        "-vv",
        "--plugins",
        dir.path().to_str().unwrap(),
        "call",
        "say",
        &arguments,
    ]);
    assert!(output.status.success(), "{output:?}");
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    // The guest's log line and its captured stdout and stderr are there, as text.
    assert!(
        log.lines().filter(|l| l.contains("ok\\r\\x1b[2K")).count() >= 2,
        "{log}"
    );
    assert_eq!(controls(&output.stderr), Vec::<char>::new(), "{log:?}");
    assert_eq!(controls(&output.stdout), Vec::<char>::new(), "{output:?}");
}

/// A pseudo-terminal the test owns: the master end, and the slave end given
/// to the child as its controlling terminal.
struct Pty {
    master: std::fs::File,
    slave: OwnedFd,
}

fn open_pty() -> Pty {
    // SAFETY: plain libc calls on descriptors this function owns; each
    // result is checked before use.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
        let slave = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            slave >= 0,
            "open pty slave: {}",
            std::io::Error::last_os_error()
        );
        Pty {
            master: std::fs::File::from_raw_fd(master),
            slave: OwnedFd::from_raw_fd(slave),
        }
    }
}

/// Waits until `seen` holds `needle`, or panics after `limit` with what came.
fn wait_for(seen: &Mutex<Vec<u8>>, needle: &str, limit: Duration) {
    let start = Instant::now();
    loop {
        let text = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
        if text.contains(needle) {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "{needle:?} did not appear on the terminal within {limit:?}:\n{text:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_approval_prompt_shows_a_command_lines_controls_escaped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("toolhost.toml"),
        "default_profile = \"p\"\n[profiles.p]\nallow = [\"terminal:*\", \"file:write\"]\n\
         file.write = [\".\"]\nterminal.dangerous = \"approve\"\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("scratch")).unwrap();
    // A recursive delete that tries to erase its own line and paint a
    // harmless one over it, then reverse the rest.
    let command = format!("rm -rf ./scratch {HOSTILE}");
    let arguments = serde_json::json!({ "command": command }).to_string();

    let pty = open_pty();
    let slave = || Stdio::from(pty.slave.try_clone().unwrap());
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"));
    command
        .args([
            "--config",
            "toolhost.toml",
            "call",
            "run_command",
            &arguments,
        ])
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .stdin(slave())
        .stdout(slave())
        .stderr(slave());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    // Only the child keeps the terminal open now, so the reader sees its
    // end when the child is gone.
    drop(command);
    drop(pty.slave);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let seen = seen.clone();
        let mut master = pty.master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            // Ends with EIO once the child and its terminal are gone.
            while let Ok(n) = master.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                seen.lock().unwrap().extend_from_slice(&buffer[..n]);
            }
        })
    };
    wait_for(&seen, "[d]eny? ", Duration::from_secs(300));
    let mut master = pty.master;
    master.write_all(b"d\n").unwrap();
    let status = child.wait().unwrap();
    drop(master);
    reader.join().unwrap();
    assert!(!status.success());

    let shown = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
    let prompt = shown
        .split("approval needed: ")
        .nth(1)
        .and_then(|rest| rest.split("[d]eny? ").next())
        .unwrap_or_else(|| panic!("no prompt in {shown:?}"));
    // The terminal turns the prompt's own newline into "\r\n"; nothing else
    // in the question may act on the terminal.
    let question = prompt.replace("\r\n", "\n");
    assert_eq!(
        controls(question.as_bytes()),
        Vec::<char>::new(),
        "{question:?}"
    );
    assert!(
        question.contains("rm -rf ./scratch ok\\r\\x1b[2K\\x1b]0;owned\\x07\\u{9b}31mfine"),
        "{question}"
    );
    assert!(question.contains("\\u{202e}fr- mr"), "{question}");
    // Denied: the directory is still there.
    assert!(dir.path().join("scratch").exists());
}

#[test]
fn check_and_doctor_show_own_paths_resolved_on_disk_escaped() {
    // A command made the plugin directory a symlink to a directory whose
    // name is control sequences; `check` and `doctor` print where it
    // really leads.
    let dir = tempfile::tempdir().unwrap();
    let named = dir.path().join(HOSTILE.replace('\x7f', ""));
    std::fs::create_dir(&named).unwrap();
    std::os::unix::fs::symlink(&named, dir.path().join("plugins")).unwrap();
    let config = dir.path().join("toolhost.toml");
    std::fs::write(
        &config,
        "plugins = \"plugins\"\ndefault_profile = \"p\"\n[profiles.p]\n",
    )
    .unwrap();
    for command in ["check", "doctor"] {
        let output = toolhost(&["--config", config.to_str().unwrap(), command]);
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(text.contains("plugin directory"), "{command}: {text}");
        assert!(text.contains("really "), "{command}: {text}");
        assert_eq!(
            controls(&output.stdout),
            Vec::<char>::new(),
            "{command}: {text:?}"
        );
    }
}
