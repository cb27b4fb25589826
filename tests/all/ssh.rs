//! The terminal's `ssh` backend against an SSH server started by the test
//! (russh's server, running each `exec` with the local bash): the session
//! flow of issue 17 over SSH, the pinned host key, and nothing left running
//! once the session ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use russh::keys::{Algorithm, PrivateKey, PublicKey};
use russh::server::{Auth, ChannelOpenHandle, Handler, Msg, Session, VerifiedPublicKey};
use russh::{Channel, ChannelId, Sig};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use toolhost::HostBuilder;

use crate::mcp::connect;
use crate::sessions::{serve_fetch_kill_and_repl, tool, wait_running};
use crate::{Workspace, assert_gone};

type Input = Arc<tokio::sync::Mutex<Option<Box<dyn AsyncWrite + Send + Unpin>>>>;

/// One channel of a connection: its pseudo-terminal size, input and group.
#[derive(Default)]
struct Channel_ {
    pty: Option<(u16, u16)>,
    input: Input,
    group: Option<libc::pid_t>,
}

/// One client connection: its channels, and every process group it
/// started, killed when it closes.
struct Connection {
    client: PublicKey,
    channels: HashMap<ChannelId, Channel_>,
    groups: Arc<Mutex<Vec<libc::pid_t>>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        for group in self.groups.lock().unwrap().drain(..) {
            // SAFETY: signals a process group this connection started.
            unsafe {
                libc::killpg(group, libc::SIGKILL);
            }
        }
    }
}

impl Handler for Connection {
    type Error = russh::Error;

    async fn auth_publickey(
        &mut self,
        _user: &str,
        key: VerifiedPublicKey<'_>,
    ) -> Result<Auth, Self::Error> {
        Ok(if key.public_key.key_data() == self.client.key_data() {
            Auth::Accept
        } else {
            Auth::reject()
        })
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        _: &mut Session,
    ) -> Result<(), Self::Error> {
        self.channels.insert(channel.id(), Channel_::default());
        reply.accept().await;
        Ok(())
    }

    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _term: &str,
        cols: u32,
        rows: u32,
        _: u32,
        _: u32,
        _: &[(russh::Pty, u32)],
        _: &mut Session,
    ) -> Result<(), Self::Error> {
        if let Some(state) = self.channels.get_mut(&channel) {
            state.pty = Some((rows as u16, cols as u16));
        }
        Ok(())
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        let line = String::from_utf8_lossy(data).into_owned();
        let handle = session.handle();
        let Some(state) = self.channels.get_mut(&channel) else {
            return Ok(());
        };
        let mut command = tokio::process::Command::new("bash");
        command.arg("-c").arg(&line).kill_on_drop(false);
        let mut readers: Vec<(Box<dyn AsyncRead + Send + Unpin>, Option<u32>)> = Vec::new();
        let child = match state.pty {
            Some((rows, cols)) => {
                let (master, terminal) = open_pty(rows, cols);
                let copy =
                    |fd: &std::os::fd::OwnedFd| std::process::Stdio::from(fd.try_clone().unwrap());
                command
                    .stdin(copy(&terminal))
                    .stdout(copy(&terminal))
                    .stderr(copy(&terminal));
                // SAFETY: setsid and ioctl are async-signal-safe.
                unsafe {
                    command.pre_exec(|| {
                        libc::setsid();
                        libc::ioctl(0, libc::TIOCSCTTY, 0);
                        Ok(())
                    });
                }
                let child = command.spawn().unwrap();
                drop(terminal);
                let reader =
                    tokio::fs::File::from_std(std::fs::File::from(master.try_clone().unwrap()));
                let writer = tokio::fs::File::from_std(std::fs::File::from(master));
                readers.push((Box::new(reader), None));
                *state.input.lock().await = Some(Box::new(writer));
                child
            }
            None => {
                command
                    .process_group(0)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                let mut child = command.spawn().unwrap();
                readers.push((Box::new(child.stdout.take().unwrap()), None));
                readers.push((Box::new(child.stderr.take().unwrap()), Some(1)));
                *state.input.lock().await = Some(Box::new(child.stdin.take().unwrap()));
                child
            }
        };
        let group = child.id().unwrap() as libc::pid_t;
        state.group = Some(group);
        self.groups.lock().unwrap().push(group);
        session.channel_success(channel)?;
        tokio::spawn(async move {
            let mut child = child;
            let pumps = readers.into_iter().map(|(mut reader, ext)| {
                let handle = handle.clone();
                async move {
                    let mut chunk = vec![0u8; 16 * 1024];
                    // A pseudo-terminal's master reads EIO once the command
                    // has gone: the end.
                    while let Ok(n) = reader.read(&mut chunk).await {
                        if n == 0 {
                            break;
                        }
                        let data = bytes::Bytes::copy_from_slice(&chunk[..n]);
                        let _ = match ext {
                            Some(ext) => handle.extended_data(channel, ext, data).await,
                            None => handle.data(channel, data).await,
                        };
                    }
                }
            });
            let pumps: Vec<_> = pumps.map(tokio::spawn).collect();
            let status = child.wait().await;
            for pump in pumps {
                let _ = pump.await;
            }
            let status = status.unwrap();
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => {
                    let _ = handle.exit_status_request(channel, code as u32).await;
                }
                (None, Some(signal)) => {
                    let name = if signal == libc::SIGTERM {
                        Sig::TERM
                    } else {
                        Sig::KILL
                    };
                    let _ = handle
                        .exit_signal_request(channel, name, false, String::new(), String::new())
                        .await;
                }
                _ => {}
            }
            let _ = handle.eof(channel).await;
            let _ = handle.close(channel).await;
        });
        Ok(())
    }

    async fn data(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        _: &mut Session,
    ) -> Result<(), Self::Error> {
        if let Some(state) = self.channels.get(&channel)
            && let Some(input) = state.input.lock().await.as_mut()
        {
            let _ = input.write_all(data).await;
            let _ = input.flush().await;
        }
        Ok(())
    }

    async fn channel_eof(
        &mut self,
        channel: ChannelId,
        _: &mut Session,
    ) -> Result<(), Self::Error> {
        if let Some(state) = self.channels.get(&channel) {
            state.input.lock().await.take();
        }
        Ok(())
    }

    async fn signal(
        &mut self,
        channel: ChannelId,
        signal: Sig,
        _: &mut Session,
    ) -> Result<(), Self::Error> {
        let number = match signal {
            Sig::INT => libc::SIGINT,
            Sig::TERM => libc::SIGTERM,
            _ => libc::SIGKILL,
        };
        if let Some(group) = self.channels.get(&channel).and_then(|state| state.group) {
            // SAFETY: signals a process group this connection started.
            unsafe {
                libc::killpg(group, number);
            }
        }
        Ok(())
    }
}

fn open_pty(rows: u16, cols: u16) -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let (mut master, mut terminal) = (-1, -1);
    // SAFETY: openpty fills two new descriptors.
    unsafe {
        assert_eq!(
            libc::openpty(
                &mut master,
                &mut terminal,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size
            ),
            0
        );
        (
            std::os::fd::OwnedFd::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(terminal),
        )
    }
}

/// A running test server: its address, its host key (public, OpenSSH
/// form) and the client's private key file.
struct Server {
    address: String,
    host_key: String,
    key_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

async fn server() -> Server {
    let host = PrivateKey::random(&mut rand::rng(), Algorithm::Ed25519).unwrap();
    let client = PrivateKey::random(&mut rand::rng(), Algorithm::Ed25519).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("id_ed25519");
    client
        .write_openssh_file(&key_file, russh::keys::ssh_key::LineEnding::LF)
        .unwrap();
    let config = Arc::new(russh::server::Config {
        keys: vec![host.clone()],
        auth_rejection_time: std::time::Duration::from_millis(10),
        auth_rejection_time_initial: Some(std::time::Duration::ZERO),
        ..Default::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let client_key = client.public_key().clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let connection = Connection {
                client: client_key.clone(),
                channels: HashMap::new(),
                groups: Arc::default(),
            };
            let config = config.clone();
            tokio::spawn(async move {
                if let Ok(running) = russh::server::run_stream(config, stream, connection).await {
                    let _ = running.await;
                }
            });
        }
    });
    Server {
        address,
        host_key: host.public_key().to_openssh().unwrap(),
        key_file,
        _dir: dir,
    }
}

fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// A profile whose commands run on `server`, starting in `workdir`.
fn profile(server: &Server, host_key: &str, workdir: &std::path::Path) -> String {
    format!(
        "allow = [\"terminal:*\"]\nfile.read = [\".\"]\nterminal.backend = \"ssh\"\n\
         terminal.ssh = {{ host = {:?}, user = \"agent\", key_file = {:?}, host_key = {:?}, \
         workdir = {:?} }}\n",
        server.address,
        server.key_file.display().to_string(),
        host_key,
        workdir.display().to_string()
    )
}

#[tokio::test]
async fn the_session_flow_runs_over_ssh() {
    let server = server().await;
    let ws = Workspace::new(bundled);
    let remote = tempfile::tempdir().unwrap();
    let remote_path = remote.path().canonicalize().unwrap();
    std::fs::create_dir_all(remote_path.join("site/sub")).unwrap();
    std::fs::write(remote_path.join("site/hello.txt"), "hello over ssh").unwrap();
    std::fs::write(
        remote_path.join("fetch.py"),
        "import sys, urllib.request\nprint(urllib.request.urlopen(sys.argv[1]).read().decode())\n",
    )
    .unwrap();
    let host = ws
        .host(&profile(&server, &server.host_key, &remote_path))
        .await;
    let (client, _) = connect(host, None).await;

    // State carries between calls.
    let first = tool(
        &client,
        "run_command",
        json!({ "command": "cd site/sub && export X=1" }),
    )
    .await;
    assert_eq!(first["exit_code"], 0, "{first}");
    let second = tool(&client, "run_command", json!({ "command": "pwd; echo $X" })).await;
    assert_eq!(
        second["stdout"],
        format!("{}\n1\n", remote_path.join("site/sub").display())
    );

    // A background server, reached by the next command, then killed; a
    // REPL on a pseudo-terminal.
    let port = "8461";
    let fetch = format!(
        "python3 {}/fetch.py http://127.0.0.1:{port}/hello.txt",
        remote_path.display()
    );
    serve_fetch_kill_and_repl(&client, port, &fetch, "hello over ssh\n").await;

    // Nothing outlives the session.
    let marker = "8462319";
    tool(
        &client,
        "process_start",
        json!({ "command": format!("sleep {marker}") }),
    )
    .await;
    wait_running(&format!("sleep {marker}")).await;
    client.cancel().await.unwrap();
    assert_gone(&format!("sleep {marker}")).await;
    assert_gone("python3 -q -i").await;
}

#[tokio::test]
async fn a_server_with_another_host_key_is_refused() {
    let server = server().await;
    let ws = Workspace::new(bundled);
    let other = PrivateKey::random(&mut rand::rng(), Algorithm::Ed25519).unwrap();
    let other = other.public_key().to_openssh().unwrap();
    let host = ws.host(&profile(&server, &other, &ws.path)).await;
    let (kind, message) = crate::call_err(&host, "run_command", r#"{"command": "true"}"#).await;
    assert_eq!(kind, toolhost::ErrorKind::ToolFailed, "{message}");
    assert!(message.contains("terminal.ssh.host_key"), "{message}");
}

#[tokio::test]
async fn commands_over_ssh_pass_the_profiles_rules_first() {
    let server = server().await;
    let ws = Workspace::new(bundled);
    let body = format!(
        "{}terminal.allow_commands = [\"echo *\"]\n",
        profile(&server, &server.host_key, &ws.path)
    );
    let host = ws.host(&body).await;
    let ok = crate::call_ok(&host, "run_command", r#"{"command": "echo over ssh"}"#).await;
    assert_eq!(ok["stdout"], "over ssh\n");
    let (kind, message) = crate::call_err(&host, "run_command", r#"{"command": "touch x"}"#).await;
    assert_eq!(kind, toolhost::ErrorKind::Denied, "{message}");
    assert!(message.contains("allow_commands"), "{message}");
    assert!(!ws.join("x").exists());
}

#[tokio::test]
async fn doctor_says_what_the_ssh_backend_and_a_wrapper_alone_cannot_enforce() {
    let server = server().await;
    let ws = Workspace::new(bundled);
    let config = ws.write(
        "toolhost.toml",
        format!(
            "default_profile = \"remote\"\n[profiles.remote]\n{}\n\
             [profiles.wrapped]\nterminal.sandbox = \"none\"\nterminal.wrapper = [\"env\"]\n\
             [profiles.kernel]\nterminal.wrapper = [\"env\"]\n",
            profile(&server, &server.host_key, &ws.path)
        ),
    );
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(["--config", config.to_str().unwrap(), "doctor"])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let said = |name: &str| {
        text.lines()
            .find(|line| line.starts_with(&format!("! profile {name:?}: ")))
            .unwrap_or_default()
            .to_string()
    };
    let remote = said("remote");
    assert!(
        remote.contains("ssh backend") && remote.contains("repository metadata"),
        "{text}"
    );
    let wrapped = said("wrapped");
    assert!(
        wrapped.contains("terminal.wrapper") && wrapped.contains("file.deny"),
        "{text}"
    );
    // Under the kernel sandbox the wrapper runs inside it: nothing to say.
    assert_eq!(said("kernel"), "", "{text}");
}
