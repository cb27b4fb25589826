//! MCP served on stdin and stdout: one session until the client leaves or
//! shutdown drains it, and the poll of stdin before the thread sleeps.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context as _, Result};
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use super::server::McpServer;
use crate::host::Host;
use crate::serve::lines::{LineTransport, MAX_PENDING};

mod lane;
pub(crate) use lane::Lane;

/// Serves MCP on stdin and stdout until the client disconnects or `stop` is
/// cancelled. Logs go to stderr; nothing but protocol messages is written to
/// stdout.
///
/// When `stop` is cancelled, stdin is no longer read; the requests already
/// read are answered, those still running after `drain_timeout` with an
/// error saying the server is shutting down, and then this returns.
///
/// When both are pipes (as MCP clients start servers) they are read and
/// written on the runtime's IO driver, through descriptors of their own in
/// non-blocking mode; otherwise (a terminal, a file) through Tokio's blocking
/// stdio, which hands every read and write to another thread.
pub async fn serve_stdio(
    host: Host,
    stop: CancellationToken,
    drain_timeout: Duration,
) -> Result<()> {
    let abandon = CancellationToken::new();
    let server = McpServer::with_abandon(host, abandon.clone());
    let (read, write) = rmcp::transport::stdio_pipes();
    let lane = Arc::new(OnceLock::new());
    let transport =
        LineTransport::new(read, write, MAX_PENDING, stop.clone()).with_lane(lane.clone());
    let running = match server.clone().serve(transport).await {
        Ok(running) => running,
        // Stopped before the client initialized the session.
        Err(_) if stop.is_cancelled() => return Ok(()),
        Err(e) => return Err(e).context("starting the MCP server on stdio"),
    };
    // From here on `tools/call` is answered past rmcp's per-request
    // machinery, on the session's peer.
    let _ = lane.set(Arc::new(Lane::new(server, running.peer().clone())));
    let mut waiting = std::pin::pin!(running.waiting());
    let gave_up = async {
        stop.cancelled().await;
        tracing::info!("shutting down: answering the requests in flight");
        tokio::time::sleep(drain_timeout).await;
    };
    tokio::select! {
        served = &mut waiting => {
            served.context("serving MCP on stdio")?;
            return Ok(());
        }
        () = gave_up => {}
    }
    tracing::warn!(
        "calls still running after the drain timeout of {drain_timeout:?}; answering them \
         with an error"
    );
    abandon.cancel();
    match tokio::time::timeout(ABANDON_GRACE, waiting).await {
        Ok(served) => {
            served.context("serving MCP on stdio")?;
        }
        Err(_) => tracing::warn!("the MCP session did not end in time; exiting anyway"),
    }
    Ok(())
}

/// How long the answers of abandoned calls have to be written.
const ABANDON_GRACE: Duration = Duration::from_secs(2);

/// Polls `fd` until it is readable (or closed) or `budget` has passed,
/// without sleeping. `toolhost serve` on stdio runs this each time its
/// thread is about to sleep with nothing to do, so a client that sends its
/// next message within the budget does not also pay for waking the thread
/// (tens of microseconds on a virtual machine, more than the rest of a
/// round trip). The CPU spent is bounded by the budget per idle period.
pub fn poll_readable(fd: std::os::fd::BorrowedFd<'_>, budget: Duration) {
    use std::os::fd::AsRawFd as _;
    let started = std::time::Instant::now();
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd for a descriptor borrowed for this call; a zero
    // timeout never blocks.
    while unsafe { libc::poll(&mut poll, 1, 0) } == 0 && started.elapsed() < budget {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests;
