//! Signalling a command in a container: `kill` of its process group, run
//! in the container, or the container removed when that cannot run.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::Docker;

use super::engine::{capture, remove};
use crate::capability::terminal::terminals::launch::Signaller;

/// Longest a `kill` in a container may take to start and answer before
/// the container is given up.
const KILL_TIMEOUT: Duration = Duration::from_secs(2);

/// What the shell of a `kill` in a container prints first.
const KILL_RAN: &str = "toolhost-kill-ran";

/// How a command in a container is signalled: `kill` of its process group,
/// run in the container. A container that cannot run the `kill` (its
/// process limit taken by a fork bomb, say) is removed with everything in
/// it, so no command outlives its deadline; the session's next command gets
/// a new one.
pub(super) struct ContainerSignals {
    pub(super) docker: Docker,
    pub(super) socket: PathBuf,
    pub(super) container: String,
    pub(super) pid_file: String,
    /// Who the commands run as (the kill must be theirs).
    pub(super) user: String,
    /// The last signal sent, to tell a job it ended from an exit code.
    pub(super) signalled: Arc<AtomicI32>,
    pub(super) broken: Arc<Mutex<Option<String>>>,
}

impl Signaller for ContainerSignals {
    fn send(&self, signal: libc::c_int) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(self.signal(signal))
    }
}

impl ContainerSignals {
    async fn signal(&self, signal: libc::c_int) {
        self.signalled.store(signal, Ordering::Relaxed);
        let file = &self.pid_file;
        // The group id is written as the command starts: wait for it a
        // little. Reading it and the kill are built into the shell, so they
        // need no process of their own (a fork bomb leaves none); whatever
        // kill answers, the shell prints a line starting with KILL_RAN.
        let script = format!(
            "for i in 1 2 3 4 5 6 7 8 9 10; do [ -s '{file}' ] && break; sleep 0.1; done; \
             read group < '{file}'; [ \"$group\" = done ] && {{ echo {KILL_RAN} ended; exit; }}; \
             kill -{signal} -\"$group\" 2>/dev/null; echo {KILL_RAN} $?"
        );
        let ran = tokio::time::timeout(
            KILL_TIMEOUT,
            capture(&self.docker, &self.container, &self.user, &script),
        )
        .await;
        // The engine may put its own error in the output: the shell's line
        // is the proof that it ran.
        if let Ok(Ok(out)) = &ran
            && out.starts_with(KILL_RAN.as_bytes())
        {
            return;
        }
        let reason = "the session's container could not run kill (its process limit reached?) \
                      and was removed with everything in it"
            .to_string();
        tracing::warn!(container = %self.container, "{reason}");
        *self.broken.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
        let (socket, id) = (self.socket.clone(), self.container.clone());
        let _ = tokio::task::spawn_blocking(move || remove(&socket, &id)).await;
    }
}
