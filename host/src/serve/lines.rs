//! The line transport of MCP: one JSON-RPC message per line, which
//! `mcp/stdio` serves on stdin and stdout. In place of rmcp's, so that
//!
//! - every line that cannot be served gets an answer ([`super::jsonrpc`]):
//!   a parse error for what is not JSON, an invalid request for a line over
//!   the size limit (dropped unread), invalid params for params that do not
//!   fit;
//! - stdin is read with backpressure: at most [`MAX_PENDING`] requests are
//!   read and not yet answered; past that, stdin is not read until an
//!   answer has been written (so a client that sends without reading the
//!   answers fills the pipe, not the server's memory);
//! - at shutdown it stops reading and ends only once every request read has
//!   been answered;
//! - a request that reuses the id of one still in flight is refused (MCP
//!   forbids it; the two answers could not be told apart), and rmcp knows
//!   each request by an id of the transport's own, so that a cancelled
//!   request's late answer never finds a request that reused its id;
//! - once the session is up, `tools/call` takes the stdio lane
//!   ([`super::mcp::stdio::Lane`]) past rmcp's per-request machinery.

use std::sync::{Arc, OnceLock};

use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, GetExtensions as _, GetMeta as _, JsonRpcMessage,
    RequestId, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use super::jsonrpc::{self, ClientRequestId, INVALID_REQUEST, Refusal};
use super::mcp::Lane;

mod pending;

use pending::Pending;

/// Most requests read from stdin and not yet answered.
pub(crate) const MAX_PENDING: usize = 128;

/// Longest line read; a longer one is dropped and answered with an error.
pub(crate) const MAX_LINE: usize = 16 << 20;

/// The transport over a reader and a writer (stdin and stdout).
pub(crate) struct LineTransport<R, W> {
    read: BufReader<R>,
    /// The line read so far (kept when a read is cancelled).
    line: Vec<u8>,
    /// Set while the rest of an oversized line is skipped.
    discarding: bool,
    max_line: usize,
    write: Arc<tokio::sync::Mutex<W>>,
    pending: Arc<Pending>,
    /// The slot of the next request, taken before its line is read.
    slot: Option<OwnedSemaphorePermit>,
    /// Cancelled at shutdown: stop reading, end once all is answered.
    stop: CancellationToken,
    /// Set once the session is up (by `mcp/stdio`); unset in tests of the
    /// transport alone.
    lane: Arc<OnceLock<Arc<Lane>>>,
    /// When the lane's calls stop being waited for, once stdin ended.
    drain_until: Option<tokio::time::Instant>,
}

enum LineRead {
    Line,
    Oversized,
    Eof,
    Io(std::io::Error),
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub(crate) fn new(read: R, write: W, max_pending: usize, stop: CancellationToken) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            max_line: MAX_LINE,
            write: Arc::new(tokio::sync::Mutex::new(write)),
            pending: Arc::new(Pending::new(max_pending)),
            slot: None,
            stop,
            lane: Arc::default(),
            drain_until: None,
        }
    }

    /// The transport with `lane` for `tools/call`, once it is set.
    pub(crate) fn with_lane(mut self, lane: Arc<OnceLock<Arc<Lane>>>) -> Self {
        self.lane = lane;
        self
    }

    #[cfg(test)]
    fn with_max_line(mut self, max_line: usize) -> Self {
        self.max_line = max_line;
        self
    }

    /// Reads one line into `self.line`, never holding more than
    /// `max_line` bytes of it. Cancel-safe: a partial line stays in
    /// `self.line` for the next call.
    async fn read_line(&mut self) -> LineRead {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(e) => return LineRead::Io(e),
            };
            if available.is_empty() {
                return LineRead::Eof;
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let mut oversized = false;
            if self.discarding {
                self.discarding = newline.is_none();
            } else if self.line.len() + take > self.max_line {
                self.line.clear();
                self.discarding = newline.is_none();
                oversized = true;
            } else {
                self.line.extend_from_slice(&available[..take]);
            }
            self.read.consume(take);
            if oversized {
                return LineRead::Oversized;
            }
            if newline.is_some() && !self.line.is_empty() {
                return LineRead::Line;
            }
        }
    }

    /// Writes `refusal` as an answer, in a task of its own so that a
    /// cancelled `receive` never cuts a line short. The task holds the slot
    /// the refused line was read with until the answer is written: a client
    /// that sends without reading its answers stops being read, whether
    /// what it sends is answered or refused.
    fn answer(&mut self, refusal: &Refusal) {
        tracing::debug!(code = refusal.code, message = %refusal.message, "refused a message");
        let line = refusal.to_line();
        let write = self.write.clone();
        let slot = self.slot.take();
        tokio::spawn(async move {
            let _slot = slot;
            let mut write = write.lock().await;
            if write.write_all(&line).await.is_ok() {
                let _ = write.flush().await;
            }
        });
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let (write, pending) = (self.write.clone(), self.pending.clone());
        // rmcp names a `subscriptions/listen` stream by the listen
        // request's id, which is the transport's: the client's instead. A
        // notice of a stream no longer open (cancelled, maybe while the
        // notice waited for the writer, and its id used again) is not
        // written.
        let mut stream = None;
        if let Some(own) = subscription_of(&item) {
            let Some(client) = self.pending.client_of(&own) else {
                tracing::debug!(%own, "dropped a message of a stream no longer open");
                return send_line(write, pending, None, None, Box::new(|| true));
            };
            set_subscription(&mut item, client.clone());
            stream = Some((own, client));
        }
        let id = match &mut item {
            JsonRpcMessage::Response(response) => Some(&mut response.id),
            JsonRpcMessage::Error(error) => error.id.as_mut(),
            _ => None,
        };
        let (answered, to_write) = match id {
            None => (None, true),
            Some(id) => match self.pending.answering(id) {
                Some((client, own)) => {
                    *id = client.clone();
                    (Some((client, own)), true)
                }
                None => {
                    // Not an id a request of the client's was given:
                    // nothing the client asked is answered by it.
                    tracing::debug!(%id, "dropped an answer to no request in flight");
                    (None, false)
                }
            },
        };
        let item = to_write.then_some(item);
        let wanted: Wanted = match (answered.clone(), stream) {
            (Some((client, own)), _) => {
                let pending = pending.clone();
                Box::new(move || pending.wanted(&client, own))
            }
            (None, Some((own, client))) => {
                let pending = pending.clone();
                Box::new(move || pending.client_of(&own).as_ref() == Some(&client))
            }
            (None, None) => Box::new(|| true),
        };
        send_line(write, pending, answered, item, wanted)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let stop = self.stop.clone();
        loop {
            if stop.is_cancelled() {
                self.slot = None;
                self.pending.until_idle().await;
                if let Some(lane) = self.lane.get() {
                    lane.until_idle().await;
                }
                return None;
            }
            if self.slot.is_none() {
                let slots = self.pending.slots.clone();
                let slot = tokio::select! {
                    slot = slots.acquire_owned() => slot.ok()?,
                    () = stop.cancelled() => continue,
                };
                self.slot = Some(slot);
            }
            let read = tokio::select! {
                read = self.read_line() => read,
                () = stop.cancelled() => continue,
            };
            match read {
                LineRead::Line => {}
                LineRead::Oversized => {
                    tracing::warn!(
                        limit = self.max_line,
                        "dropped a message longer than the limit"
                    );
                    self.answer(&Refusal::new(
                        serde_json::Value::Null,
                        INVALID_REQUEST,
                        format!(
                            "Invalid Request: the message is longer than the limit of {} bytes; \
                             it was dropped",
                            self.max_line
                        ),
                    ));
                    continue;
                }
                // rmcp then answers its calls in flight for a while, and the
                // lane its own in the same while ([`Self::close`]).
                LineRead::Eof => {
                    self.ended();
                    return None;
                }
                LineRead::Io(error) => {
                    tracing::error!(%error, "cannot read stdin");
                    self.ended();
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.iter().all(u8::is_ascii_whitespace) {
                self.line = line;
                self.line.clear();
                continue;
            }
            let decoded = jsonrpc::decode(text);
            self.line = line;
            self.line.clear();
            match decoded {
                Ok(Some(message)) => {
                    if let Some(refusal) = self.reused(&message) {
                        self.answer(&refusal);
                        continue;
                    }
                    if let Some(lane) = self.lane.get()
                        && Lane::takes(&message)
                        && let JsonRpcMessage::Request(request) = message
                    {
                        let (write, pending) = (self.write.clone(), self.pending.clone());
                        lane.start(request, self.slot.take(), move |answer, wanted| {
                            send_line(write, pending, None, Some(answer), wanted)
                        });
                        continue;
                    }
                    let mut message = message;
                    if self.track(&mut message) {
                        return Some(message);
                    }
                }
                Ok(None) => {}
                Err(refusal) => self.answer(&refusal),
            }
        }
    }

    /// rmcp closes the transport once its own calls in flight are answered
    /// (or have had their time): the lane's calls get the same time, from
    /// when stdin ended, and are then cancelled.
    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(lane) = self.lane.get() {
            let until = self
                .drain_until
                .unwrap_or_else(|| tokio::time::Instant::now() + Lane::DRAIN);
            lane.drain(until).await;
        }
        self.write.lock().await.shutdown().await
    }
}

/// Whether an answer handed to the writer is still to be written once the
/// writer is free (its request may be cancelled while it waits).
type Wanted = Box<dyn Fn() -> bool + Send>;

/// Writes `item` as a line, unless it is no longer `wanted` when the
/// writer is free; then frees the id and slot of the request it answers
/// (`answered`: the client's id and the transport's).
fn send_line<W>(
    write: Arc<tokio::sync::Mutex<W>>,
    pending: Arc<Pending>,
    answered: Option<(RequestId, i64)>,
    item: Option<TxJsonRpcMessage<RoleServer>>,
    wanted: Wanted,
) -> impl Future<Output = std::io::Result<()>> + Send + 'static
where
    W: AsyncWrite + Send + Unpin + 'static,
{
    let line = item.map(|item| {
        serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            line
        })
    });
    async move {
        let Some(line) = line else {
            return Ok(());
        };
        let line = line.map_err(std::io::Error::other)?;
        let written = {
            let mut write = write.lock().await;
            if wanted() {
                match write.write_all(&line).await {
                    Ok(()) => write.flush().await,
                    Err(e) => Err(e),
                }
            } else {
                Ok(())
            }
        };
        if let Some((client, own)) = answered {
            pending.answered(&client, own);
        }
        written
    }
}

/// The stream `item` names (`subscriptions/listen`): a notice's, or the
/// listen's final result's.
fn subscription_of(item: &TxJsonRpcMessage<RoleServer>) -> Option<RequestId> {
    match item {
        JsonRpcMessage::Notification(notice) => notice.notification.get_meta().subscription_id(),
        JsonRpcMessage::Response(response) => match &response.result {
            ServerResult::SubscriptionsListenResult(listen) => listen.meta.subscription_id(),
            _ => None,
        },
        _ => None,
    }
}

fn set_subscription(item: &mut TxJsonRpcMessage<RoleServer>, id: RequestId) {
    match item {
        JsonRpcMessage::Notification(notice) => {
            notice.notification.get_meta_mut().set_subscription_id(id);
        }
        JsonRpcMessage::Response(response) => {
            if let ServerResult::SubscriptionsListenResult(listen) = &mut response.result {
                listen.meta.set_subscription_id(id);
            }
        }
        _ => {}
    }
}

impl<R, W> LineTransport<R, W> {
    /// Stdin has ended: the calls in flight have [`Lane::DRAIN`] from now.
    fn ended(&mut self) {
        self.drain_until
            .get_or_insert_with(|| tokio::time::Instant::now() + Lane::DRAIN);
    }

    /// The refusal of a request that names the id of one still in flight.
    fn reused(&self, message: &ClientJsonRpcMessage) -> Option<Refusal> {
        let JsonRpcMessage::Request(request) = message else {
            return None;
        };
        let in_flight = self.pending.in_flight(&request.id)
            || self.lane.get().is_some_and(|lane| lane.has(&request.id));
        in_flight.then(|| {
            Refusal::new(
                serde_json::to_value(&request.id).unwrap_or_default(),
                INVALID_REQUEST,
                "Invalid Request: the id is already used by a request in flight; give each \
                 request an id of its own"
                    .to_string(),
            )
        })
    }

    /// A request keeps its id and slot until answered, and rmcp is given it
    /// under an id of the transport's own; a cancelled one is never
    /// answered, so the cancellation frees them, and it reaches rmcp under
    /// that id. Whether `message` goes on to rmcp: a cancellation of no
    /// request rmcp serves does not (the number it names could be one of
    /// the transport's ids).
    fn track(&mut self, message: &mut ClientJsonRpcMessage) -> bool {
        match message {
            JsonRpcMessage::Request(request) => {
                let client = request.id.clone();
                request
                    .request
                    .extensions_mut()
                    .insert(ClientRequestId(client.clone()));
                request.id = self.pending.begin(client, self.slot.take());
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &mut notification.notification
                    && let Some(id) = &mut cancelled.params.request_id
                {
                    match self.pending.cancelled(id) {
                        Some(own) => *id = RequestId::Number(own),
                        None => {
                            if let Some(lane) = self.lane.get() {
                                lane.cancel(id);
                            }
                            return false;
                        }
                    }
                }
            }
            _ => {}
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

    use super::*;

    fn request(id: u64) -> String {
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
        )
    }

    #[tokio::test]
    async fn no_more_than_the_limit_of_requests_are_read_before_one_is_answered() {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server);
        let (_client_read, mut client_write) = tokio::io::split(client);
        for id in 0..10 {
            client_write
                .write_all(request(id).as_bytes())
                .await
                .unwrap();
        }
        let mut transport =
            LineTransport::new(server_read, server_write, 3, CancellationToken::new());
        for _ in 0..3 {
            assert!(transport.receive().await.is_some());
        }
        let blocked = tokio::time::timeout(Duration::from_millis(100), transport.receive()).await;
        assert!(blocked.is_err(), "a fourth request was read");
        assert_eq!(transport.pending.count(), 3);
        let answer: TxJsonRpcMessage<RoleServer> =
            serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "result": {}})).unwrap();
        transport.send(answer).await.unwrap();
        assert!(transport.receive().await.is_some());
    }

    #[tokio::test]
    async fn an_oversized_line_is_answered_and_the_next_one_read() {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server);
        let (client_read, mut client_write) = tokio::io::split(client);
        let mut transport =
            LineTransport::new(server_read, server_write, 8, CancellationToken::new())
                .with_max_line(64);
        let long = format!("{{\"x\":\"{}\"}}\n", "a".repeat(500));
        client_write.write_all(long.as_bytes()).await.unwrap();
        client_write.write_all(request(5).as_bytes()).await.unwrap();
        assert!(transport.receive().await.is_some());
        let mut lines = BufReader::new(client_read).lines();
        let answer: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(answer["id"], Value::Null);
        assert_eq!(answer["error"]["code"], json!(INVALID_REQUEST));
    }
}
