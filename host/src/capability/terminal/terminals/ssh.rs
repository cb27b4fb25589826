//! The `ssh` backend: a session's commands run on a remote host over one
//! SSH connection (the `russh` client), opened at the session's first
//! command with the configured key and refused unless the server shows the
//! pinned host key. Each command is one `exec` channel running the session's
//! script under the remote user's bash; its state is written to a file in
//! the remote `/tmp`, read back (and removed) through a second channel when
//! the command ends. What confines a command there is the remote side's
//! business: toolhost's rules (allow and deny lists, the detector,
//! approvals, the audit record) apply before a line is sent.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use russh::client::{self, Handle};
use russh::keys::{PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate, load_secret_key};
use russh::{ChannelMsg, Sig};
use tokio::io::AsyncWriteExt;

use super::launch::{Launch, Signals, Started};
use crate::capability::terminal::SshSettings;
use crate::capability::terminal::process_group::{End, Reader, Writer};

/// Bytes a pipe between a channel and its reader holds.
const PIPE: usize = 64 * 1024;

/// Accepts the pinned host key only.
struct Pinned(PublicKey);

impl client::Handler for Pinned {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        offered: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        Ok(match offered {
            PublicKeyOrCertificate::PublicKey { key, .. } => key.key_data() == self.0.key_data(),
            PublicKeyOrCertificate::Certificate(_) => false,
        })
    }
}

/// One SSH connection serving a session.
pub(crate) struct SshBackend {
    handle: Arc<Handle<Pinned>>,
    workdir: Option<String>,
    /// Names this session's state files.
    nonce: String,
    next_id: AtomicU32,
}

impl SshBackend {
    /// Connects and logs in; `Err` says which step failed.
    pub(crate) async fn connect(settings: &SshSettings) -> Result<Self, String> {
        let pinned = PublicKey::from_openssh(settings.host_key.trim())
            .map_err(|e| format!("terminal.ssh.host_key: {e}"))?;
        let key = load_secret_key(&settings.key_file, None)
            .map_err(|e| format!("terminal.ssh.key_file {}: {e}", settings.key_file.display()))?;
        let address = if settings.host.contains(':') {
            settings.host.clone()
        } else {
            format!("{}:22", settings.host)
        };
        let config = Arc::new(client::Config {
            inactivity_timeout: None,
            ..Default::default()
        });
        let mut handle = client::connect(config, address.as_str(), Pinned(pinned))
            .await
            .map_err(|e| {
                format!(
                    "connecting to {address} (terminal.ssh): {e}; a host key other than \
                     terminal.ssh.host_key is refused"
                )
            })?;
        let hash = handle
            .best_supported_rsa_hash()
            .await
            .map_err(|e| format!("{address}: {e}"))?
            .flatten();
        let auth = handle
            .authenticate_publickey(
                settings.user.clone(),
                PrivateKeyWithHashAlg::new(Arc::new(key), hash),
            )
            .await
            .map_err(|e| format!("{address}: {e}"))?;
        if !auth.success() {
            return Err(format!(
                "{address} refused user {:?} with the key in {}",
                settings.user,
                settings.key_file.display()
            ));
        }
        Ok(Self {
            handle: Arc::new(handle),
            workdir: settings.workdir.clone(),
            nonce: format!("{:x}", super::script::nonce()),
            next_id: AtomicU32::new(1),
        })
    }

    /// Why no more commands can start, once the connection is gone.
    pub(crate) fn broken(&self) -> Option<String> {
        self.handle
            .is_closed()
            .then(|| "the SSH connection of the session closed".to_string())
    }

    /// Starts one command on the remote host.
    pub(crate) async fn launch(&self, launch: Launch<'_>) -> io::Result<Started> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state_file = launch
            .state
            .then(|| format!("/tmp/.toolhost-state-{}-{id}", self.nonce));
        let command = self.command(&launch, state_file.as_deref());
        let channel = self
            .handle
            .channel_open_session()
            .await
            .map_err(io::Error::other)?;
        if let Some((rows, cols)) = launch.pty {
            channel
                .request_pty(false, "xterm-256color", cols.into(), rows.into(), 0, 0, &[])
                .await
                .map_err(io::Error::other)?;
        }
        channel
            .exec(true, command)
            .await
            .map_err(io::Error::other)?;
        let (mut reading, writing) = channel.split();
        let stdin: Writer = Box::new(writing.make_writer());
        let writing = Arc::new(writing);
        let (mut out, out_read) = tokio::io::duplex(PIPE);
        let (mut err, err_read) = tokio::io::duplex(PIPE);
        let (mut state, state_read) = tokio::io::duplex(PIPE);
        let (ended, end) = tokio::sync::oneshot::channel();
        // Weak: a channel still open does not keep the connection.
        let handle = Arc::downgrade(&self.handle);
        tokio::spawn(async move {
            let mut status = None;
            while let Some(message) = reading.wait().await {
                match message {
                    ChannelMsg::Data { data } => {
                        let _ = out.write_all(&data).await;
                    }
                    ChannelMsg::ExtendedData { data, ext: 1 } => {
                        let _ = err.write_all(&data).await;
                    }
                    ChannelMsg::ExitStatus { exit_status } => {
                        status = Some(exit_status.min(255) as i32 * 256);
                    }
                    ChannelMsg::ExitSignal { signal_name, .. } => {
                        status = Some(signal_number(&signal_name));
                    }
                    ChannelMsg::Close => break,
                    _ => {}
                }
            }
            drop((out, err));
            if let (Some(file), Some(handle)) = (state_file, handle.upgrade()) {
                let read = format!("cat -- '{file}' 2>/dev/null; rm -f -- '{file}'");
                if let Ok(bytes) = capture(&handle, &read).await {
                    let _ = state.write_all(&bytes).await;
                }
            }
            drop(state);
            let _ = ended.send(status);
        });
        let end = Box::pin(async move {
            use std::os::unix::process::ExitStatusExt;
            match end.await {
                Ok(Some(status)) => Ok(End::Exited(std::process::ExitStatus::from_raw(status))),
                Ok(None) | Err(_) => Err(io::Error::other(
                    "the SSH channel closed without the command's exit status",
                )),
            }
        });
        let reader = |pipe: tokio::io::DuplexStream| Some(Box::new(pipe) as Reader);
        Ok(Started {
            stdin: Some(stdin),
            stdout: reader(out_read),
            stderr: reader(err_read),
            state: launch.state.then(|| Box::new(state_read) as Reader),
            end,
            signals: Signals::Ssh(writing),
        })
    }

    /// The remote command line: start in the directory, set the
    /// environment, run the script.
    fn command(&self, launch: &Launch<'_>, state_file: Option<&str>) -> String {
        let start = match (launch.requested_cwd, &self.workdir) {
            (Some(cwd), _) if cwd.starts_with('/') => Some(cwd.to_string()),
            (Some(cwd), Some(workdir)) => Some(format!("{workdir}/{cwd}")),
            (Some(cwd), None) => Some(cwd.to_string()),
            (None, workdir) => workdir.clone(),
        };
        let mut words = Vec::new();
        if let Some(start) = start {
            words.push(format!("cd -- {} &&", quote(&start)));
        }
        words.push("exec env".into());
        if !launch.fresh_env {
            words.push("-i".into());
        }
        for (name, value) in launch.env {
            words.push(quote(&format!("{name}={}", value.to_string_lossy())));
        }
        words.push("bash".into());
        words.extend(launch.args.iter().map(|arg| quote(arg)));
        words.push(quote(state_file.unwrap_or("")));
        words.join(" ")
    }
}

impl Drop for SshBackend {
    /// Ends the connection: the remote side ends the session's commands
    /// with it (an OpenSSH server hangs up commands on a pseudo-terminal;
    /// others it leaves to the remote system).
    fn drop(&mut self) {
        let handle = self.handle.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = handle
                    .disconnect(russh::Disconnect::ByApplication, "session ended", "en")
                    .await;
            });
        }
    }
}

/// Runs `command` on its own channel; its stdout.
async fn capture(handle: &Handle<Pinned>, command: &str) -> Result<Vec<u8>, russh::Error> {
    let mut channel = handle.channel_open_session().await?;
    channel.exec(true, command).await?;
    let mut bytes = Vec::new();
    while let Some(message) = channel.wait().await {
        match message {
            ChannelMsg::Data { data } => bytes.extend_from_slice(&data),
            ChannelMsg::Close => break,
            _ => {}
        }
    }
    Ok(bytes)
}

/// The wait status of a process a named signal ended.
fn signal_number(signal: &Sig) -> i32 {
    match signal {
        Sig::INT => libc::SIGINT,
        Sig::TERM => libc::SIGTERM,
        Sig::KILL => libc::SIGKILL,
        Sig::HUP => libc::SIGHUP,
        Sig::QUIT => libc::SIGQUIT,
        Sig::USR1 => libc::SIGUSR1,
        Sig::PIPE => libc::SIGPIPE,
        Sig::ABRT => libc::SIGABRT,
        Sig::SEGV => libc::SIGSEGV,
        _ => libc::SIGTERM,
    }
}

/// A word for the remote shell, single-quoted.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_for_the_remote_shell() {
        assert_eq!(quote("it's"), r#"'it'\''s'"#);
        assert_eq!(quote(""), "''");
    }
}
