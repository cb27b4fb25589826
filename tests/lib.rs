//! Paths of the test-only guest plugins built by `build.rs`; the tests
//! themselves live in `all/`.

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

/// Starts `command` (the toolhost binary) without `RUST_LOG` and
/// `TOOLHOST_CONFIG` from the environment, with stdin, stdout and stderr
/// piped; stderr's lines arrive on the receiver, read by a thread of their
/// own so that the pipe never fills.
pub fn spawn_piped(
    command: &mut std::process::Command,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead as _;
    use std::process::Stdio;
    let mut child = command
        .env_remove("RUST_LOG")
        .env_remove("TOOLHOST_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the toolhost binary runs");
    let stderr = child.stderr.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    (child, receiver)
}
