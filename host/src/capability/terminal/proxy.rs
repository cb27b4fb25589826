//! The network of sandboxed terminal commands under `terminal.network =
//! "proxy"`: an HTTP proxy the host runs for one command, on a Unix socket
//! the command's sandbox forwards its loopback port to. Every request
//! (`CONNECT host:port` for TLS, absolute-form `GET http://...` for plain
//! HTTP) is checked as `http_request` checks its
//! requests: the host against `network.allow_hosts`, every address it
//! resolves to (private, loopback, metadata and the host's own interface
//! addresses only when listed), one lookup whose checked addresses are the
//! ones connected to. A plain request goes upstream with a `Host` built from
//! the checked URL (a client `Host` naming another is refused) and only its
//! own body: nothing pipelined behind it is relayed. A tunnel carries only
//! TLS whose ClientHello names the tunnel's host ([`tunnel`]). A refused
//! request gets `403` with the reason; nothing else leaves the sandbox.
//!
//! The proxy serves only while its [`Gate`] is open: while the effective
//! permissions of the call that runs the command (the global layer, the
//! session's narrowing, the terminal tool's rules) allow `network:fetch`,
//! which the terminal tool need not declare, and the terminal session
//! that holds it has not ended. Closing the gate cuts every open tunnel.

mod tunnel;

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};

use crate::capability::Profile;
use crate::capability::network::HostRules;
use crate::capability::network::NETWORK_FETCH;
use crate::capability::network::connect::{Destination, Unreachable};
use crate::capability::terminal::confine::PROXY_CONNECTIONS;
use crate::contract::CapabilityUse;
use crate::policy::{PermissionDecision, PermissionRefusal};

/// The socket's file name in the proxy's private directory.
const SOCKET: &str = "proxy.sock";

/// Largest request head (request line and headers) read.
const MAX_HEAD: usize = 32 * 1024;

/// Most headers in a request head.
const MAX_HEADERS: usize = 100;

/// How long a client has to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long connecting to a checked address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Most requests of one command kept for the audit record.
const MAX_RECORDED: usize = 64;

/// Why the commands of a call under `profile` may not reach the network,
/// if they may not: its effective permissions do not allow `network:fetch`.
pub(crate) fn network_refusal(profile: &Profile) -> Option<String> {
    let permission = NETWORK_FETCH.to_string();
    let refusal = match profile.permissions.decide(NETWORK_FETCH.as_str()) {
        PermissionDecision::Allowed => return None,
        PermissionDecision::NeedsApproval { pattern } => {
            return Some(format!(
                "profile {:?} asks approval for {NETWORK_FETCH:?} (approval_required \
                 \"{pattern}\"), which a command's connections cannot ask for; allow it \
                 without approval for the terminal tool to let commands reach \
                 network.allow_hosts",
                profile.name
            ));
        }
        PermissionDecision::Denied { pattern } => PermissionRefusal::Denied {
            permission,
            pattern,
        },
        PermissionDecision::NotGranted => PermissionRefusal::NotGranted { permission },
        PermissionDecision::Narrowed { rule } => PermissionRefusal::Narrowed { permission, rule },
    };
    Some(format!("profile {:?}: {refusal}", profile.name))
}

/// Whether a proxy may serve: open, or closed with why. Clones share it.
#[derive(Debug, Clone)]
pub(crate) struct Gate(Arc<tokio::sync::watch::Sender<Option<String>>>);

impl Gate {
    /// Open while `profile` allows `network:fetch`, else closed saying why.
    pub(crate) fn for_profile(profile: &Profile) -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(network_refusal(
            profile,
        ))))
    }

    /// Closes the gate (if open) for `reason`: open tunnels are cut, and
    /// later requests refused.
    pub(crate) fn close(&self, reason: &str) {
        self.0.send_if_modified(|state| {
            let open = state.is_none();
            if open {
                *state = Some(reason.to_string());
            }
            open
        });
    }

    /// Why the gate is closed, if it is.
    fn refused(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    /// Resolves once the gate is closed.
    async fn closed(&self) {
        let mut state = self.0.subscribe();
        let _ = state.wait_for(Option::is_some).await;
    }
}

/// A proxy serving one command; it stops, with every connection through it,
/// when dropped.
pub(crate) struct Proxy {
    dir: tempfile::TempDir,
    task: JoinHandle<()>,
    uses: Arc<Mutex<Vec<CapabilityUse>>>,
}

impl Proxy {
    /// Starts a proxy applying `rules` while `gate` is open, listening in a
    /// new private directory.
    pub(crate) fn start(rules: HostRules, gate: Gate) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("toolhost-proxy-")
            .tempdir()?;
        let listener = UnixListener::bind(dir.path().join(SOCKET))?;
        let uses = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(serve(listener, Arc::new(rules), gate, uses.clone()));
        Ok(Self { dir, task, uses })
    }

    /// The socket the proxy listens on.
    pub(crate) fn socket(&self) -> PathBuf {
        self.dir.path().join(SOCKET)
    }

    /// Makes the proxy's private directory and socket host id `id`'s (the
    /// uid and gid of the commands that use it), so they, and only they
    /// and root, reach it.
    pub(crate) fn give_to(&self, id: u32) -> io::Result<()> {
        std::os::unix::fs::chown(self.dir.path(), Some(id), Some(id))?;
        std::os::unix::fs::chown(self.socket(), Some(id), Some(id))
    }

    /// The requests made through the proxy so far, allowed and refused.
    pub(crate) fn take_uses(&self) -> Vec<CapabilityUse> {
        std::mem::take(&mut *self.uses.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Accepts connections until aborted; aborting drops every connection.
async fn serve(
    listener: UnixListener,
    rules: Arc<HostRules>,
    gate: Gate,
    uses: Arc<Mutex<Vec<CapabilityUse>>>,
) {
    let slots = Arc::new(Semaphore::new(PROXY_CONNECTIONS));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((mut client, _)) = accepted else { continue };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    let reason = format!("more than {PROXY_CONNECTIONS} connections at once");
                    connections.spawn(async move {
                        let _ = reply(&mut client, 503, &reason).await;
                    });
                    continue;
                };
                let (rules, uses, gate) = (rules.clone(), uses.clone(), gate.clone());
                connections.spawn(async move {
                    let _slot = slot;
                    let record = |used: CapabilityUse| {
                        let mut uses = uses.lock().unwrap_or_else(|e| e.into_inner());
                        if uses.len() < MAX_RECORDED {
                            uses.push(used);
                        }
                    };
                    handle(client, &rules, &gate, record).await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// What a client asked the proxy for.
#[derive(Debug, PartialEq, Eq)]
struct Asked {
    /// `CONNECT host:port` (a tunnel) rather than a plain HTTP request.
    tunnel: bool,
    /// The host as written (IPv6 in brackets) and the port.
    host: String,
    port: u16,
    /// What to send upstream before the client's further bytes: nothing for
    /// a tunnel, else the request head in origin form.
    upstream_head: Vec<u8>,
    /// How many body bytes follow a plain request's head (its
    /// `content-length`); nothing after them is relayed.
    body: u64,
    /// A client `Host` header naming another host than the checked one.
    foreign_host: Option<String>,
    /// How the request is named in refusals and the audit record.
    described: String,
}

/// Serves one client connection.
async fn handle(
    mut client: UnixStream,
    rules: &HostRules,
    gate: &Gate,
    record: impl Fn(CapabilityUse),
) {
    let (head, rest) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(Some(read))) => read,
        Ok(Ok(None)) | Ok(Err(_)) => return,
        Err(_) => {
            let _ = reply(&mut client, 408, "no request head within 10s").await;
            return;
        }
    };
    let asked = match parse(&head) {
        Ok(asked) => asked,
        Err(problem) => {
            let _ = reply(&mut client, 400, &problem).await;
            return;
        }
    };
    let checked = match (gate.refused(), &asked.foreign_host) {
        (Some(reason), _) => Err(Unreachable::Refused(reason)),
        (None, Some(named)) => Err(Unreachable::Refused(format!(
            "the Host header {named:?} names another host than the request's URL \
             ({}:{}); leave it out or make it name the URL's host",
            asked.host, asked.port
        ))),
        (None, None) => Destination::check_host(rules, &asked.host, asked.port).await,
    };
    let destination = match checked {
        Ok(destination) => destination,
        Err(Unreachable::Refused(reason)) => {
            tracing::debug!(request = %asked.described, reason, "terminal proxy refused");
            let _ = reply(&mut client, 403, &reason).await;
            record(CapabilityUse::refused(
                "network",
                asked.described,
                reason.as_str(),
            ));
            return;
        }
        Err(Unreachable::Unresolved(reason)) => {
            let _ = reply(&mut client, 502, &reason).await;
            return;
        }
    };
    let mut upstream = match connect(destination.addrs()).await {
        Ok(upstream) => upstream,
        Err(problem) => {
            let _ = reply(&mut client, 502, &problem).await;
            return;
        }
    };
    tracing::debug!(request = %asked.described, "terminal proxy connected");
    if asked.tunnel {
        let started = client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await;
        if started.is_ok() {
            let host = asked.host.clone();
            relay(client, upstream, rest, &host, gate, record, asked.described).await;
        }
        return;
    }
    record(CapabilityUse::allowed("network", asked.described));
    // A plain request: its head and its own body go up, nothing after them
    // (a request pipelined behind it was not checked); the answer comes back
    // until the server closes.
    let in_rest = usize::try_from(asked.body)
        .unwrap_or(usize::MAX)
        .min(rest.len());
    let started = upstream.write_all(&asked.upstream_head).await;
    if started.is_err() || upstream.write_all(&rest[..in_rest]).await.is_err() {
        return;
    }
    let remaining = asked.body - in_rest as u64;
    let (client_read, mut client_write) = client.split();
    let (upstream_read, mut upstream_write) = upstream.split();
    let send = async {
        let _ = tokio::io::copy(&mut client_read.take(remaining), &mut upstream_write).await;
        std::future::pending::<()>().await;
    };
    let mut upstream_read = upstream_read;
    tokio::select! {
        () = send => {}
        _ = tokio::io::copy(&mut upstream_read, &mut client_write) => {}
        () = gate.closed() => {}
    }
}

/// Serves a tunnel to `host` once the proxy said `200`: the client's
/// ClientHello (`rest`: what it sent after its `CONNECT`) is judged (see
/// [`tunnel`]), then sent upstream, and bytes are copied both ways until
/// either side closes or `gate` closes.
async fn relay(
    mut client: UnixStream,
    mut upstream: TcpStream,
    rest: Vec<u8>,
    host: &str,
    gate: &Gate,
    record: impl Fn(CapabilityUse),
    described: String,
) {
    let hello = tunnel::first_flight(&mut client, rest, host);
    let judged = tokio::select! {
        judged = tokio::time::timeout(HEAD_TIMEOUT, hello) => judged,
        () = gate.closed() => return,
    };
    let refusal = match judged {
        Ok(Ok(Some(hello))) => {
            record(CapabilityUse::allowed("network", described));
            if upstream.write_all(&hello).await.is_err() {
                return;
            }
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
                () = gate.closed() => {}
            }
            return;
        }
        // Closed before a whole ClientHello.
        Ok(Ok(None)) => return,
        Ok(Err(refusal)) => refusal,
        Err(_) => tunnel::Refusal::NotTls(format!(
            "no TLS ClientHello came within {}s: {}",
            HEAD_TIMEOUT.as_secs(),
            tunnel::not_tls(host)
        )),
    };
    let reason = match refusal {
        tunnel::Refusal::NotTls(reason) => {
            let _ = reply(&mut client, 403, &reason).await;
            reason
        }
        tunnel::Refusal::Tls(reason, alert) => {
            let _ = client.write_all(&tunnel::Refusal::alert(alert)).await;
            let _ = client.shutdown().await;
            reason
        }
    };
    tracing::debug!(request = %described, reason, "terminal proxy refused a tunnel");
    record(CapabilityUse::refused(
        "network",
        described,
        reason.as_str(),
    ));
}

/// Reads up to the end of the request head: the head and whatever followed
/// it. `None` when the client closed first.
async fn read_head(client: &mut UnixStream) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut buffer = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        let searched_from = buffer.len().saturating_sub(3);
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = find(&buffer[searched_from..], b"\r\n\r\n") {
            let end = searched_from + end + 4;
            let rest = buffer.split_off(end);
            return Ok(Some((buffer, rest)));
        }
        if buffer.len() > MAX_HEAD {
            let _ = reply(client, 431, "the request head is over 32 KiB").await;
            return Ok(None);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Reads a request head: a tunnel's target, or a plain request's absolute
/// URL rewritten to the origin form a server expects.
fn parse(head: &[u8]) -> Result<Asked, String> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("incomplete request head".into()),
        Err(e) => return Err(format!("malformed request head: {e}")),
    }
    let method = request.method.unwrap_or_default();
    let target = request.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target)
            .ok_or_else(|| format!("CONNECT needs host:port, got {target:?}"))?;
        return Ok(Asked {
            tunnel: true,
            described: format!("CONNECT {host}:{port}"),
            host,
            port,
            upstream_head: Vec::new(),
            body: 0,
            foreign_host: None,
        });
    }
    let url = reqwest::Url::parse(target)
        .map_err(|_| format!("a proxy request needs an absolute http:// URL, got {target:?}"))?;
    if url.scheme() != "http" {
        return Err(format!(
            "only http:// URLs are forwarded as plain requests (https goes through \
             CONNECT), got {:?}",
            url.scheme()
        ));
    }
    let host = url
        .host_str()
        .ok_or_else(|| format!("{target:?} names no host"))?
        .to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    let mut origin = url.path().to_string();
    if let Some(query) = url.query() {
        origin.push('?');
        origin.push_str(query);
    }
    let mut upstream_head = format!("{method} {origin} HTTP/1.1\r\n").into_bytes();
    upstream_head.extend_from_slice(format!("Host: {host}:{port}\r\n").as_bytes());
    let mut foreign_host = None;
    let mut body: Option<u64> = None;
    for header in request.headers.iter() {
        let name = header.name.to_ascii_lowercase();
        if name.starts_with("proxy-") || name == "connection" || name == "keep-alive" {
            continue;
        }
        let value = String::from_utf8_lossy(header.value);
        match name.as_str() {
            "host" => {
                if !names_host(value.trim(), &host, port) {
                    foreign_host = Some(value.trim().to_string());
                }
                continue;
            }
            "transfer-encoding" => {
                return Err(format!(
                    "a plain http request with transfer-encoding {value:?} is not forwarded; \
                     send its body with a content-length (or use https, which goes \
                     through CONNECT)"
                ));
            }
            "content-length" => {
                let length = value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| format!("content-length {value:?} is not a number of bytes"))?;
                if body.is_some_and(|seen| seen != length) {
                    return Err("the request has content-length headers that disagree".into());
                }
                body = Some(length);
            }
            _ => {}
        }
        upstream_head.extend_from_slice(header.name.as_bytes());
        upstream_head.extend_from_slice(b": ");
        upstream_head.extend_from_slice(header.value);
        upstream_head.extend_from_slice(b"\r\n");
    }
    upstream_head.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Asked {
        tunnel: false,
        described: format!("{method} http://{host}:{port}{}", url.path()),
        host,
        port,
        upstream_head,
        body: body.unwrap_or(0),
        foreign_host,
    })
}

/// Whether a `Host` header value names `host` at `port` (the port may be
/// left out for 80), as the URL's parser would read it.
fn names_host(value: &str, host: &str, port: u16) -> bool {
    let Ok(url) = reqwest::Url::parse(&format!("http://{value}/")) else {
        return false;
    };
    let trim = |s: &str| s.trim_end_matches('.').to_ascii_lowercase();
    url.host_str()
        .is_some_and(|named| trim(named) == trim(host))
        && url.port_or_known_default() == Some(port)
        && url.path() == "/"
        && url.username().is_empty()
}

/// `host:port` of a CONNECT target; IPv6 hosts stay in brackets.
fn split_authority(target: &str) -> Option<(String, u16)> {
    let (host, port) = target.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let bracketed = host.starts_with('[') && host.ends_with(']');
    if host.is_empty() || (host.contains(':') && !bracketed) {
        return None;
    }
    Some((host.to_string(), port))
}

/// Connects to the first of `addrs` that answers.
async fn connect(addrs: &[std::net::SocketAddr]) -> Result<TcpStream, String> {
    let mut last = String::from("no address to connect to");
    for addr in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = format!("cannot connect to {addr}: {e}"),
            Err(_) => last = format!("connecting to {addr} took over 10s"),
        }
    }
    Err(last)
}

/// Answers with `status` and `reason` as a plain-text body, and closes.
async fn reply(client: &mut UnixStream, status: u16, reason: &str) -> io::Result<()> {
    let phrase = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        _ => "Service Unavailable",
    };
    let body = format!("toolhost proxy: {reason}\n");
    let message = format!(
        "HTTP/1.1 {status} {phrase}\r\ncontent-type: text/plain; charset=utf-8\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(message.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests;
