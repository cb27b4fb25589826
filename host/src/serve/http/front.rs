//! The front door every HTTP request passes before a route: Host and Origin
//! checks, the declared body size and bearer-token authentication, and the
//! count of requests in flight that shutdown drains.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::serve::api::{self, error_response};
use crate::serve::mcp::streamable as mcp_http;
use crate::serve::tenants::Tenants;

/// Host names a loopback server answers to by default.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Browser origins accepted by default: pages served from this machine.
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// What every request passes before a route sees it.
#[derive(Debug)]
pub(super) struct FrontDoor {
    pub(super) tenants: Arc<Tenants>,
    hosts: Vec<AllowedHost>,
    origins: Vec<AllowedOrigin>,
    /// The same lists as written, for the MCP transport's own checks.
    pub(super) allowed_hosts: Vec<String>,
    pub(super) allowed_origins: Vec<String>,
    max_body: usize,
    /// Each tenant's share of the connections for its requests in flight.
    shares: Arc<super::shares::Shares>,
    pub(super) requests: Arc<Requests>,
    /// Cancelled when shutdown begins: new requests are answered 503.
    pub(super) draining: CancellationToken,
}

/// Checks `Host` and `Origin` (DNS rebinding and cross-site requests), the
/// declared body size, and the bearer token; puts the [`Caller`] (and the
/// [`Authenticated`] record) in the request's extensions; counts the request
/// as in flight until its response body is dropped.
///
/// [`Caller`]: crate::Caller
/// [`Authenticated`]: crate::serve::tenants::Authenticated
pub(super) async fn front_door(
    State(front): State<Arc<FrontDoor>>,
    mut request: Request,
    next: Next,
) -> Response {
    // The MCP event stream (GET /mcp) lives as long as the session; it is
    // closed at shutdown rather than waited for.
    let tracked = !(request.method() == Method::GET && request.uri().path() == "/mcp");
    let guard = tracked.then(|| front.requests.begin());
    let mcp = request.uri().path() == "/mcp";
    // The health check and the server card need no token; the card may be
    // read from any web origin (it holds nothing of any caller).
    let card = request.uri().path() == crate::serve::card::PATH;
    let public = card || request.uri().path() == "/v1/health";
    if let Err(refusal) = front.check_headers(request.headers(), mcp, card) {
        return *refusal;
    }
    if front.draining.is_cancelled() && request.uri().path() != "/v1/health" {
        return if mcp {
            mcp_http::shutting_down()
        } else {
            api::shutting_down()
        };
    }
    let mut share_guard = None;
    let mut revoked = None;
    if !public {
        match front
            .tenants
            .authenticate(request.headers().get(header::AUTHORIZATION))
        {
            Ok(authenticated) => {
                let tenant = authenticated.caller.tenant_name();
                match front.shares.take(tenant, front.tenants.len()) {
                    Ok(share) => share_guard = Some(share),
                    Err(message) => {
                        let message = format!("busy: {message}");
                        return error_response(StatusCode::TOO_MANY_REQUESTS, message);
                    }
                }
                request
                    .extensions_mut()
                    .insert(authenticated.caller.clone());
                revoked = Some(authenticated.revoked.clone());
                request.extensions_mut().insert(authenticated);
            }
            Err(unauthorized) => {
                let mut response = error_response(StatusCode::UNAUTHORIZED, unauthorized.message());
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(unauthorized.challenge()),
                );
                return response;
            }
        }
    }
    let response = next.run(request).await;
    // A stream (MCP's, an approvals event stream) lasts no longer than the
    // token it was opened with: a reload that revokes it ends the stream.
    let response = match revoked {
        Some(revoked) if is_stream(&response) => {
            crate::serve::connections::ended_by(response, revoked)
        }
        _ => response,
    };
    let response = match share_guard {
        Some(share) => crate::serve::connections::held_with_body(response, share),
        None => response,
    };
    match guard {
        Some(guard) => crate::serve::connections::held_with_body(response, guard),
        None => response,
    }
}

/// Most bytes of a client's value a refusal's log line shows.
const LOGGED_VALUE: usize = 120;

/// Logs a refusal of a request no token was checked for yet, showing the
/// start of the client's `value` (escaped), at most one line a second: the
/// lines held back meanwhile are counted in the next. A client cannot make
/// the log grow faster than that, whatever it sends.
fn logged_refusal(what: &str, value: &[u8]) {
    use std::sync::atomic::AtomicU64;
    static LAST: AtomicU64 = AtomicU64::new(0);
    static HELD_BACK: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let last = LAST.load(Ordering::Relaxed);
    if last == now
        || LAST
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        HELD_BACK.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let shown = String::from_utf8_lossy(&value[..value.len().min(LOGGED_VALUE)]);
    let cut = if value.len() > LOGGED_VALUE {
        "…"
    } else {
        ""
    };
    let held_back = HELD_BACK.swap(0, Ordering::Relaxed);
    tracing::warn!(
        value = %format!("{shown:?}{cut}"),
        bytes = value.len(),
        like_it_in_the_last_second = held_back,
        "{what}"
    );
}

impl FrontDoor {
    /// The front door of a server on a loopback address or not, accepting
    /// `allowed_hosts` and `allowed_origins` besides the defaults (see
    /// `ServeOptions`).
    pub(super) fn new(
        tenants: Tenants,
        allowed_hosts: &[String],
        allowed_origins: &[String],
        loopback: bool,
        max_body: usize,
        max_connections: usize,
    ) -> Self {
        let mut allowed_hosts = allowed_hosts.to_vec();
        if loopback {
            allowed_hosts.extend(LOOPBACK_HOSTS.iter().map(|h| h.to_string()));
        }
        let mut origins: Vec<String> = LOOPBACK_ORIGINS.iter().map(|o| o.to_string()).collect();
        origins.extend(allowed_origins.iter().cloned());
        Self {
            tenants: Arc::new(tenants),
            hosts: allowed_hosts
                .iter()
                .filter_map(|h| AllowedHost::parse(h))
                .collect(),
            origins: origins
                .iter()
                .filter_map(|o| AllowedOrigin::parse(o))
                .collect(),
            allowed_hosts,
            allowed_origins: origins,
            max_body,
            shares: super::shares::Shares::new(max_connections),
            requests: Arc::default(),
            draining: CancellationToken::new(),
        }
    }

    /// Refuses foreign hosts and origins and declared oversized bodies; the
    /// refusal is boxed as it is the rare path.
    fn check_headers(
        &self,
        headers: &HeaderMap,
        mcp: bool,
        any_origin: bool,
    ) -> Result<(), Box<Response>> {
        if !self.hosts.is_empty() {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.parse::<axum::http::uri::Authority>().ok())
                .ok_or_else(|| {
                    Box::new(error_response(
                        StatusCode::BAD_REQUEST,
                        "invalid_request: the Host header is missing or malformed",
                    ))
                })?;
            if !self.hosts.iter().any(|allowed| allowed.matches(&host)) {
                logged_refusal(
                    "refused a request for a host that is not allowed (DNS rebinding?)",
                    host.as_str().as_bytes(),
                );
                return Err(Box::new(error_response(
                    StatusCode::FORBIDDEN,
                    format!(
                        "forbidden: host {:?} is not served here; the server's operator can allow \
                         it with --allowed-host",
                        host.as_str()
                    ),
                )));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN).filter(|_| !any_origin) {
            let allowed = origin
                .to_str()
                .ok()
                .and_then(Origin::parse)
                .is_some_and(|origin| self.origins.iter().any(|a| a.matches(&origin)));
            if !allowed {
                logged_refusal(
                    "refused a request from an origin that is not allowed",
                    origin.as_bytes(),
                );
                return Err(Box::new(error_response(
                    StatusCode::FORBIDDEN,
                    "forbidden: requests from this web origin are not allowed; the server's \
                     operator can allow it with --allowed-origin",
                )));
            }
        }
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(length) = declared
            && length > self.max_body as u64
        {
            return Err(Box::new(if mcp {
                mcp_http::too_large(self.max_body)
            } else {
                api::too_large(self.max_body)
            }));
        }
        Ok(())
    }
}

/// An allowed `Host`: a name or address, with or without a port.
#[derive(Debug)]
struct AllowedHost {
    host: String,
    port: Option<u16>,
}

impl AllowedHost {
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        if let Ok(authority) = text.parse::<axum::http::uri::Authority>() {
            return Some(Self {
                host: normalize_host(authority.host()),
                port: authority.port_u16(),
            });
        }
        // A bare IPv6 address (`::1`) is not an authority.
        Some(Self {
            host: normalize_host(text),
            port: None,
        })
    }

    fn matches(&self, host: &axum::http::uri::Authority) -> bool {
        self.host == normalize_host(host.host())
            && self.port.is_none_or(|port| host.port_u16() == Some(port))
    }
}

fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// A browser origin: scheme, host and port.
#[derive(Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Origin {
    fn parse(text: &str) -> Option<Self> {
        let uri = text.trim().parse::<axum::http::Uri>().ok()?;
        let authority = uri.authority()?;
        Some(Self {
            scheme: uri.scheme_str()?.to_ascii_lowercase(),
            host: normalize_host(authority.host()),
            port: authority.port_u16(),
        })
    }

    fn port_or_default(&self) -> Option<u16> {
        self.port.or(match self.scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        })
    }
}

/// An allowed origin; a port of `*` (or none) accepts any port.
#[derive(Debug)]
struct AllowedOrigin {
    origin: Origin,
    any_port: bool,
}

impl AllowedOrigin {
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        match text.strip_suffix(":*") {
            Some(base) => Some(Self {
                origin: Origin::parse(base).filter(|o| o.port.is_none())?,
                any_port: true,
            }),
            None => {
                let origin = Origin::parse(text)?;
                Some(Self {
                    any_port: origin.port.is_none(),
                    origin,
                })
            }
        }
    }

    fn matches(&self, origin: &Origin) -> bool {
        self.origin.scheme == origin.scheme
            && self.origin.host == origin.host
            && (self.any_port || self.origin.port_or_default() == origin.port_or_default())
    }
}

/// Requests in flight, and a way to wait until there are none.
#[derive(Debug, Default)]
pub(super) struct Requests {
    count: AtomicUsize,
    idle: Notify,
}

impl Requests {
    fn begin(self: &Arc<Self>) -> RequestGuard {
        self.count.fetch_add(1, Ordering::AcqRel);
        RequestGuard(self.clone())
    }

    pub(super) fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    pub(super) async fn idle(&self) {
        crate::serve::until_none(&self.idle, || self.count()).await;
    }
}

#[derive(Debug)]
struct RequestGuard(Arc<Requests>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// Whether `response` is an event stream.
fn is_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"))
}

#[cfg(test)]
mod tests;
