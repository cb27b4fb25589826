//! What starting a command of a session takes and gives, whatever the
//! backend: the [`Launch`], and the [`Started`] command with its pipes, its
//! end and how to signal it.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use russh::client::Msg;
use russh::{ChannelWriteHalf, Sig};

use crate::capability::terminal::confine::control::Control;
use crate::capability::terminal::process_group::{End, GroupGuard, Reader, Writer};

/// One command to start.
pub(crate) struct Launch<'a> {
    /// The shell that runs the script (bash).
    pub(crate) shell: &'a Path,
    /// The shell's arguments: `-c SCRIPT bash LINE DIR`.
    pub(crate) args: Vec<String>,
    /// Where the shell starts.
    pub(crate) dir: &'a Path,
    /// Its whole environment.
    pub(crate) env: &'a [(String, OsString)],
    /// Give it a pipe as stdin (otherwise `/dev/null`).
    pub(crate) stdin: bool,
    /// Run it on a pseudo-terminal of this size (rows, columns).
    pub(crate) pty: Option<(u16, u16)>,
    /// Give it the state pipe at descriptor 3.
    pub(crate) state: bool,
    /// The `cwd` the call asked for, as written (the ssh backend takes it
    /// on the remote host).
    pub(crate) requested_cwd: Option<&'a str>,
    /// `env` is the profile's, not a state a command left (the ssh backend
    /// then adds it to the remote login environment instead of replacing it).
    pub(crate) fresh_env: bool,
}

/// A command started: its input and output, and how to learn its end and
/// signal it.
pub(crate) struct Started {
    pub(crate) stdin: Option<Writer>,
    pub(crate) stdout: Option<Reader>,
    pub(crate) stderr: Option<Reader>,
    pub(crate) state: Option<Reader>,
    /// Resolves when the shell has ended.
    pub(crate) end: BoxFuture<'static, io::Result<End>>,
    pub(crate) signals: Signals,
}

/// How a started command is signalled.
#[derive(Clone)]
pub(crate) enum Signals {
    /// Its process group on the host.
    Group(Arc<GroupGuard>),
    /// Run `id` of the session's sandbox, through its PID 1.
    Sandbox {
        sender: Arc<tokio::sync::Mutex<Control>>,
        id: u32,
    },
    /// Its SSH channel (a signal request).
    Ssh(Arc<ChannelWriteHalf<Msg>>),
    /// However its backend reaches it (a process group in a container).
    Other(Arc<dyn Signaller>),
}

/// How a backend signals one of its commands.
pub(crate) trait Signaller: Send + Sync {
    /// Sends `signal` (a libc number) to the command's process group.
    fn send(&self, signal: libc::c_int) -> BoxFuture<'_, ()>;
}

impl Signals {
    /// Sends `signal` to the command's process group.
    pub(crate) async fn send(&self, signal: libc::c_int) {
        match self {
            Self::Group(group) => group.signal(signal),
            Self::Sandbox { sender, id } => {
                let _ = sender.lock().await.send_kill(*id, signal).await;
            }
            Self::Ssh(channel) => send_ssh_signal(channel, signal).await,
            Self::Other(signaller) => signaller.send(signal).await,
        }
    }
}

/// Sends `signal` (a libc number) as an SSH signal request.
async fn send_ssh_signal(channel: &ChannelWriteHalf<Msg>, signal: libc::c_int) {
    let sig = match signal {
        libc::SIGINT => Sig::INT,
        libc::SIGTERM => Sig::TERM,
        libc::SIGKILL => Sig::KILL,
        libc::SIGHUP => Sig::HUP,
        libc::SIGQUIT => Sig::QUIT,
        libc::SIGUSR1 => Sig::USR1,
        _ => Sig::Custom(format!("{signal}")),
    };
    let _ = channel.signal(sig).await;
}
