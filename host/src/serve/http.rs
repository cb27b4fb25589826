//! The HTTP server: `/mcp` and `/v1/*` on one port. Every request passes one
//! front door (Host and Origin checks, body size, bearer-token
//! authentication) before it reaches a route; connections are HTTP/1.1 with a
//! header timeout and a cap on how many are open; shutdown answers new
//! requests 503, drains the requests in flight (answering those past the
//! drain timeout with an error), then closes the MCP sessions. The front
//! door is `front`; `sessions` keeps each MCP session to its tenant.

mod front;
mod sessions;
mod shares;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::api::{self, Api};
use super::connections::Connections;
use super::mcp::streamable::McpEndpoint;
use super::mcp::{self, McpHttp};
use super::tenants::Tenants;
use crate::host::Host;
use crate::registry::ReloadEvent;
use front::{FrontDoor, front_door};
use sessions::{SessionOwners, keep_sessions_to_their_tenant};

/// Limits and policies of the HTTP server. [`ServeOptions::default`] gives
/// the documented defaults.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Largest request body, in bytes (default 4 MiB); larger is 413.
    pub max_body: usize,
    /// Most tool calls in one `POST /v1/tool_calls` (default 1024).
    pub max_calls: usize,
    /// Connections served at once (default 512). Further connections wait
    /// in the listen backlog until one closes.
    pub max_connections: usize,
    /// Longest a client may take to send a request's headers, and longest
    /// an idle keep-alive connection stays open (default 10 s).
    pub header_timeout: Duration,
    /// Longest a client may take to send a request body (default 30 s); for
    /// `/mcp`, the longest pause between two chunks of it.
    pub body_timeout: Duration,
    /// Longest a `/v1` request may run (default 5 min); `/mcp` streams are
    /// not limited (each call has its own time limit).
    pub request_timeout: Duration,
    /// How long shutdown waits for requests in flight (default 30 s).
    pub drain_timeout: Duration,
    /// `Host` header values accepted besides the defaults: on a loopback
    /// address, `localhost`, `127.0.0.1` and `::1` (any port); on any other
    /// address, any host unless this list is given.
    pub allowed_hosts: Vec<String>,
    /// `Origin` header values accepted besides `http://localhost:*`,
    /// `http://127.0.0.1:*` and `http://[::1]:*`. Requests without `Origin`
    /// (not from a browser) are accepted.
    pub allowed_origins: Vec<String>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            max_body: 4 << 20,
            max_calls: 1024,
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(300),
            drain_timeout: Duration::from_secs(30),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        }
    }
}

/// An HTTP server bound to its address, ready to [`HttpServer::run`].
#[derive(Debug)]
pub struct HttpServer {
    host: Host,
    listener: TcpListener,
    options: ServeOptions,
    tenants: Arc<Tenants>,
    front: Arc<FrontDoor>,
    /// Closes the MCP sessions at shutdown.
    mcp_cancel: CancellationToken,
    /// Cancelled when shutdown begins (`/v1/health` turns 503).
    draining: CancellationToken,
    /// Cancelled when the drain timeout has passed: the calls still running
    /// end with an error saying the server is shutting down.
    abandon: CancellationToken,
}

impl HttpServer {
    /// Binds `addr` (`IP:PORT`, or `localhost:PORT`). Without tenants only a
    /// loopback address is accepted.
    pub async fn bind(host: Host, addr: &str, options: ServeOptions) -> Result<Self> {
        let tenants = Tenants::new(&host).map_err(anyhow::Error::msg)?;
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr)
            .await
            .with_context(|| {
                format!("cannot resolve {addr:?}; give an address like 127.0.0.1:8080")
            })?
            .collect();
        for resolved in &addrs {
            refuse_open(&host, &tenants, *resolved)?;
        }
        let mut last_error = None;
        for resolved in addrs {
            match TcpListener::bind(resolved).await {
                Ok(listener) => return Self::with_tenants(host, listener, tenants, options),
                Err(e) => last_error = Some(e),
            }
        }
        Err(match last_error {
            Some(e) => anyhow::Error::new(e).context(format!(
                "cannot listen on {addr}; is another server using the port?"
            )),
            None => anyhow::anyhow!("{addr:?} resolves to no address"),
        })
    }

    /// Serves on an already bound `listener`. Without tenants it must be on
    /// a loopback address.
    pub fn from_listener(host: Host, listener: TcpListener, options: ServeOptions) -> Result<Self> {
        let tenants = Tenants::new(&host).map_err(anyhow::Error::msg)?;
        Self::with_tenants(host, listener, tenants, options)
    }

    fn with_tenants(
        host: Host,
        listener: TcpListener,
        tenants: Tenants,
        options: ServeOptions,
    ) -> Result<Self> {
        let addr = listener
            .local_addr()
            .context("reading the listener's address")?;
        refuse_open(&host, &tenants, addr)?;
        let front = FrontDoor::new(
            tenants,
            &options.allowed_hosts,
            &options.allowed_origins,
            addr.ip().is_loopback(),
            options.max_body,
            options.max_connections,
        );
        Ok(Self {
            host,
            listener,
            tenants: front.tenants.clone(),
            options,
            mcp_cancel: CancellationToken::new(),
            draining: front.draining.clone(),
            abandon: CancellationToken::new(),
            front: Arc::new(front),
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Whether requests must carry a tenant's bearer token.
    pub fn requires_tokens(&self) -> bool {
        !self.tenants.is_open()
    }

    /// The routes, with the front door in front of them.
    fn app(&self) -> Router {
        let answers = super::answers::Answers::default();
        let endpoint = Arc::new(McpEndpoint::new(
            self.host.clone(),
            McpHttp {
                allowed_hosts: self.front.allowed_hosts.clone(),
                allowed_origins: self.front.allowed_origins.clone(),
                cancel: self.mcp_cancel.clone(),
                abandon: self.abandon.clone(),
                max_body: self.options.max_body,
            },
            answers.clone(),
        ));
        let owners = Arc::new(SessionOwners::new(
            self.host.clone(),
            endpoint.clone(),
            self.options.max_connections,
        ));
        let mcp = mcp::streamable::route_to(endpoint);
        let api = Api {
            host: self.host.clone(),
            max_body: self.options.max_body,
            max_calls: self.options.max_calls,
            body_timeout: self.options.body_timeout,
            request_timeout: self.options.request_timeout,
            draining: self.draining.clone(),
            abandon: self.abandon.clone(),
            pending: self.tenants.pending().clone(),
            narrowings: Default::default(),
            answers: answers.clone(),
        };
        let mcp = Router::new()
            .route("/mcp", mcp)
            .layer(axum::middleware::from_fn_with_state(
                owners,
                keep_sessions_to_their_tenant,
            ));
        Router::new()
            .nest(
                "/v1",
                api::routes(api.clone()).merge(
                    super::approvals::routes()
                        .with_state(api)
                        .merge(super::tasks::routes(answers).with_state(self.host.clone())),
                ),
            )
            .route(super::card::PATH, super::card::route(self.host.clone()))
            .merge(mcp)
            .fallback(api::not_found)
            .method_not_allowed_fallback(api::method_not_allowed)
            // No route reads a body without a time limit.
            .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
                self.options.body_timeout,
            ))
            .layer(axum::middleware::from_fn_with_state(
                self.front.clone(),
                front_door,
            ))
    }

    /// Serves until `shutdown` completes, then answers every new request
    /// 503, waits up to the drain timeout for the requests in flight, stops
    /// those still running with an error answer, closes the MCP sessions
    /// and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<()> {
        let app = self.app();
        let reload = AbortOnDrop(tokio::spawn(follow_config(
            self.host.clone(),
            self.tenants.clone(),
        )));
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(self.options.header_timeout)
            .keep_alive(true);
        let graceful = GracefulShutdown::new();
        let connections = Connections::new(self.options.max_connections);
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                biased;
                () = &mut shutdown => break,
                accepted = self.listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        accept_failed(&e).await;
                        continue;
                    }
                },
            };
            // A slot: a free one, or one an idle connection gives up.
            let slot = tokio::select! {
                biased;
                () = &mut shutdown => break,
                slot = connections.slot() => slot,
            };
            let _ = stream.set_nodelay(true);
            cap_send_buffer(&stream);
            let activity = slot.activity.clone();
            let app = app.clone();
            let service = TowerToHyperService::new(tower::service_fn(
                move |request: hyper::Request<hyper::body::Incoming>| {
                    // Serving until the response body is done or dropped.
                    let serving = activity.serve();
                    let mut app = app.clone();
                    async move {
                        let response = tower::Service::call(&mut app, request).await?;
                        Ok::<_, std::convert::Infallible>(serving.keep_with(response))
                    }
                },
            ));
            let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
            let tracker = connections.clone();
            let id = slot.id();
            let task = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                tracker.ended(slot);
            });
            connections.started(id, task.abort_handle());
        }
        drop(reload);
        self.draining.cancel();
        // The port stays open while draining: new requests are answered 503
        // (`/v1/health` with its documented body) rather than refused.
        let late = AbortOnDrop(tokio::spawn(answer_while_draining(
            self.listener,
            app,
            self.options.header_timeout,
            self.options.max_connections,
        )));
        let requests = &self.front.requests;
        tracing::info!(
            in_flight = requests.count(),
            "shutting down: answering new requests with 503; draining the requests in flight"
        );
        let deadline = tokio::time::Instant::now() + self.options.drain_timeout;
        // Idle keep-alive connections close now; busy ones after their
        // current request.
        let connections = tokio::spawn(graceful.shutdown());
        if tokio::time::timeout_at(deadline, requests.idle())
            .await
            .is_err()
        {
            tracing::warn!(
                in_flight = requests.count(),
                "requests still in flight after the drain timeout of {:?}; answering them with \
                 an error",
                self.options.drain_timeout
            );
            self.abandon.cancel();
            if tokio::time::timeout(ABANDON_GRACE, requests.idle())
                .await
                .is_err()
            {
                tracing::warn!(
                    in_flight = requests.count(),
                    "requests still unanswered; closing anyway"
                );
            }
        }
        // MCP streams (GET /mcp) end here, so their connections can close.
        self.mcp_cancel.cancel();
        let rest = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .max(Duration::from_secs(2));
        if tokio::time::timeout(rest, connections).await.is_err() {
            tracing::warn!("some connections did not close in time; exiting anyway");
        }
        drop(late);
        tracing::info!("HTTP server stopped");
        Ok(())
    }
}

/// What the kernel may hold of one connection's unsent answer: setting it
/// stops the send buffer's growth (to 4 MiB by default), so an answer a
/// client does not read stays in the server, counted against its tenant's
/// `answers_held`, rather than in the kernel's socket memory uncounted.
const SEND_BUFFER: libc::c_int = 64 * 1024;

fn cap_send_buffer(stream: &tokio::net::TcpStream) {
    use std::os::fd::AsRawFd as _;
    let size = SEND_BUFFER;
    // SAFETY: an option of an open socket, set with a plain value.
    let set = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&raw const size).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if set != 0 {
        tracing::debug!(
            error = %std::io::Error::last_os_error(),
            "cannot cap a connection's send buffer"
        );
    }
}

/// How long the answers of requests stopped at the drain timeout have to
/// be written.
const ABANDON_GRACE: Duration = Duration::from_secs(2);

/// Accepts connections while the server drains, one request each, which
/// the front door answers with 503. Ends when aborted, closing them all.
async fn answer_while_draining(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    max_connections: usize,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(false);
    let mut open = tokio::task::JoinSet::new();
    loop {
        while open.try_join_next().is_some() {}
        if open.len() >= max_connections.max(1) {
            open.join_next().await;
            continue;
        }
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                accept_failed(&e).await;
                continue;
            }
        };
        let service = TowerToHyperService::new(app.clone());
        let connection = http.serve_connection(TokioIo::new(stream), service);
        open.spawn(async move {
            let _ = connection.await;
        });
    }
}

/// [`refuse_open_non_loopback`] for `host` serving `tenants`.
fn refuse_open(host: &Host, tenants: &Tenants, addr: SocketAddr) -> Result<()> {
    let config = host.config();
    refuse_open_non_loopback(
        config.as_ref().map(|c| &c.source),
        &host.caller().profile().name,
        tenants.len(),
        addr,
    )
}

/// Refuses a server without tenants (`tenants` of them) on an address
/// other than loopback: anyone reaching it would run tools without a token.
pub(crate) fn refuse_open_non_loopback(
    source: Option<&crate::config::ConfigSource>,
    profile: &str,
    tenants: usize,
    addr: SocketAddr,
) -> Result<()> {
    if tenants > 0 || addr.ip().is_loopback() {
        return Ok(());
    }
    let how = match source {
        Some(crate::config::ConfigSource::File(path)) => format!(
            "add [tenants.NAME] entries with bearer tokens to {} (see docs/config.md, \
             [tenants.NAME])",
            path.display()
        ),
        _ => "create a toolhost.toml with [tenants.NAME] entries with bearer tokens (start \
              from `toolhost config show > toolhost.toml`; see docs/config.md, [tenants.NAME])"
            .to_string(),
    };
    anyhow::bail!(
        "refusing to listen on {addr}: no tenants are configured, so anyone who can reach this \
         address could run tools as profile {profile:?} without a token; listen on a loopback \
         address (for example 127.0.0.1:{port}), or {how}",
        port = addr.port()
    )
}

/// Transient accept errors (the client gave up) are skipped; running out of
/// file descriptors backs off briefly instead of spinning.
async fn accept_failed(error: &std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted
    ) {
        return;
    }
    tracing::warn!(%error, "cannot accept a connection; retrying in 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Rebuilds the tenants whenever the host applies a new config.
async fn follow_config(host: Host, tenants: Arc<Tenants>) {
    let mut events = host.events();
    loop {
        match events.recv().await {
            Ok(ReloadEvent::ConfigReloaded { .. })
            | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                let Some(config) = host.config() else {
                    continue;
                };
                match tenants.reload(&config) {
                    Ok(()) => tracing::info!(tenants = tenants.len(), "tenants reloaded"),
                    Err(e) => tracing::error!("tenants not reloaded, the running ones stay: {e}"),
                }
            }
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
