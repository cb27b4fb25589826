//! A guest's HTTP request, validated (method, URL, headers), the request a
//! redirect leads to, and the secret-free form of a request used in the audit
//! log and in messages.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};

use crate::contract::bindings::toolhost::plugin::http::Request;
use crate::error::bounded;

/// Longest URL accepted, in bytes.
const MAX_URL: usize = 16 * 1024;
/// Longest method accepted, in bytes.
const MAX_METHOD: usize = 32;
/// Most request headers accepted.
const MAX_HEADERS: usize = 128;
/// Largest total size of the request headers (names and values), in bytes.
const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Longest request target written to the audit log, in bytes.
const MAX_TARGET: usize = 512;

/// Connection-level headers the host manages itself; a guest's are dropped.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    header::CONTENT_LENGTH,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    HeaderName::from_static("keep-alive"),
];

/// The only headers a redirect to another origin keeps: any other may carry
/// a credential (`Authorization`, a cookie, or an API key in a header of the
/// tool's own naming, as declarative `auth = {type = "header"}` sends).
const CROSS_ORIGIN_HEADERS: [HeaderName; 8] = [
    header::ACCEPT,
    header::ACCEPT_ENCODING,
    header::ACCEPT_LANGUAGE,
    header::USER_AGENT,
    header::CACHE_CONTROL,
    header::CONTENT_TYPE,
    header::CONTENT_ENCODING,
    header::CONTENT_LANGUAGE,
];

/// Headers that describe the body: dropped when a redirect turns the request
/// into a `GET` without one.
const BODY_HEADERS: [HeaderName; 4] = [
    header::CONTENT_TYPE,
    header::CONTENT_ENCODING,
    header::CONTENT_LANGUAGE,
    header::CONTENT_LOCATION,
];

/// A request the host is willing to send (its host still to be checked).
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    pub(crate) method: Method,
    pub(crate) url: Url,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Option<Bytes>,
    /// The guest's own time limit, if it set one.
    pub(crate) timeout: Option<Duration>,
}

impl Outgoing {
    /// Validates a guest's request. The error says what is wrong with it.
    pub(crate) fn from_guest(request: Request) -> Result<Self, String> {
        let method = parse_method(&request.method)?;
        let url = parse_url(&request.url)?;
        let headers = parse_headers(&request.headers, &url)?;
        Ok(Self {
            method,
            url,
            headers,
            body: request.body.map(Bytes::from),
            timeout: request
                .timeout_ms
                .map(|ms| Duration::from_millis(u64::from(ms))),
        })
    }

    /// `GET https://host[:port]/path`: what the audit log records. Never the
    /// query string, the fragment, header values or the body.
    pub(crate) fn target(&self) -> String {
        target(self.method.as_str(), &self.url)
    }

    /// The request a redirect response leads to, `None` if `status` is not a
    /// redirect the host follows (or names no location), or why the redirect
    /// cannot be followed.
    ///
    /// 301, 302 and 303 turn anything but `GET` and `HEAD` into a `GET`
    /// without a body; 307 and 308 keep method and body. Credentials
    /// (`authorization`, `cookie`) are dropped when the redirect leaves the
    /// origin (scheme, host, port) of the request. The host of the new URL is
    /// not checked here: the caller checks it like any other.
    pub(crate) fn redirect(
        &self,
        status: StatusCode,
        location: Option<&HeaderValue>,
    ) -> Result<Option<Self>, String> {
        let keeps_method = match status {
            StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND | StatusCode::SEE_OTHER => false,
            StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT => true,
            _ => return Ok(None),
        };
        let Some(location) = location else {
            return Ok(None);
        };
        let from = redacted(&self.url);
        let location = location.to_str().map_err(|_| {
            format!("the redirect from {from} ({status}) has a location that is not valid text")
        })?;
        let url = self.url.join(location).map_err(|e| {
            format!("the redirect from {from} ({status}) has an invalid location: {e}")
        })?;
        let url = check_url(url).map_err(|problem| {
            format!("the redirect from {from} ({status}) cannot be followed: {problem}")
        })?;
        let mut next = self.clone();
        if !keeps_method {
            next.body = None;
            for name in &BODY_HEADERS {
                next.headers.remove(name);
            }
            if next.method != Method::GET && next.method != Method::HEAD {
                next.method = Method::GET;
            }
        }
        if url.origin() != self.url.origin() {
            let dropped: Vec<HeaderName> = next
                .headers
                .keys()
                .filter(|name| !CROSS_ORIGIN_HEADERS.contains(name))
                .cloned()
                .collect();
            for name in dropped {
                next.headers.remove(name);
            }
        }
        next.url = url;
        Ok(Some(next))
    }
}

/// `METHOD scheme://host[:port]/path`, bounded, for the audit log.
pub(crate) fn target(method: &str, url: &Url) -> String {
    let method = bounded(method, MAX_METHOD);
    bounded(&format!("{method} {}", redacted(url)), MAX_TARGET).into_owned()
}

/// What the audit log records of a request the host could not parse.
pub(crate) fn unparsed_target(request: &Request) -> String {
    let method = bounded(&request.method, MAX_METHOD)
        .escape_debug()
        .to_string();
    match Url::parse(&request.url) {
        Ok(url) if url.has_host() => target(&method, &url),
        _ => format!("{method} (invalid url)"),
    }
}

/// `scheme://host[:port]/path`: the URL without credentials, query or fragment.
pub(crate) fn redacted(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{}://{host}:{port}{}", url.scheme(), url.path()),
        None => format!("{}://{host}{}", url.scheme(), url.path()),
    }
}

fn parse_method(text: &str) -> Result<Method, String> {
    let shown = bounded(text, MAX_METHOD);
    if text.is_empty() || text.len() > MAX_METHOD {
        return Err(format!(
            "method {shown:?} is not a valid HTTP method; use GET, POST, PUT, ... \
             (1 to {MAX_METHOD} token characters)"
        ));
    }
    let method = Method::from_bytes(text.as_bytes()).map_err(|_| {
        format!(
            "method {shown:?} is not a valid HTTP method; use GET, POST, PUT, ... \
             (letters, digits and !#$%&'*+-.^_`|~ only)"
        )
    })?;
    if method == Method::CONNECT {
        return Err("method CONNECT is not supported; the host makes the connection".to_owned());
    }
    Ok(method)
}

fn parse_url(text: &str) -> Result<Url, String> {
    if text.len() > MAX_URL {
        return Err(format!(
            "the url is {} bytes long; at most {MAX_URL} are accepted",
            text.len()
        ));
    }
    let url = Url::parse(text)
        .map_err(|e| format!("the url is not a valid absolute http:// or https:// url ({e})"))?;
    check_url(url)
}

/// Checks that `url` is one the host sends: http or https, with a host and no
/// credentials. Drops the fragment, which is never sent.
fn check_url(mut url: Url) -> Result<Url, String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "url scheme {:?} is not supported; use http or https",
            url.scheme()
        ));
    }
    if !url.has_host() || url.host_str().is_none_or(str::is_empty) {
        return Err("the url has no host".to_owned());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "the url to {} contains credentials (user:password@); \
             send them in an authorization header instead",
            url.host_str().unwrap_or_default()
        ));
    }
    url.set_fragment(None);
    Ok(url)
}

fn parse_headers(pairs: &[(String, String)], url: &Url) -> Result<HeaderMap, String> {
    if pairs.len() > MAX_HEADERS {
        return Err(format!(
            "the request has {} headers; at most {MAX_HEADERS} are accepted",
            pairs.len()
        ));
    }
    let size: usize = pairs.iter().map(|(n, v)| n.len() + v.len()).sum();
    if size > MAX_HEADER_BYTES {
        return Err(format!(
            "the request headers take {size} bytes; at most {MAX_HEADER_BYTES} are accepted"
        ));
    }
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            format!(
                "header name {:?} is not a valid HTTP header name \
                 (letters, digits and !#$%&'*+-.^_`|~ only)",
                bounded(name, 64)
            )
        })?;
        let value = HeaderValue::from_bytes(value.as_bytes()).map_err(|_| {
            format!("the value of header {name:?} contains control characters (such as CR or LF)")
        })?;
        if name == header::HOST {
            if names_url_host(&value, url) {
                // The host sets it from the URL anyway.
                continue;
            }
            return Err(format!(
                "header \"host\" must name the url's host {:?} (or be left out)",
                url.host_str().unwrap_or_default()
            ));
        }
        if HOP_BY_HOP.contains(&name) {
            tracing::debug!(header = %name, "dropping a connection-level request header");
            continue;
        }
        headers.append(name, value);
    }
    Ok(headers)
}

/// Whether a `Host` header value names the URL's host (and port, if given).
fn names_url_host(value: &HeaderValue, url: &Url) -> bool {
    let Ok(value) = value.to_str() else {
        return false;
    };
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default();
    value.eq_ignore_ascii_case(host)
        || port.is_some_and(|port| value.eq_ignore_ascii_case(&format!("{host}:{port}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, url: &str, headers: &[(&str, &str)]) -> Request {
        Request {
            method: method.into(),
            url: url.into(),
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).into(), (*v).into()))
                .collect(),
            body: Some(b"payload".to_vec()),
            timeout_ms: Some(250),
        }
    }

    fn outgoing(method: &str, url: &str, headers: &[(&str, &str)]) -> Outgoing {
        Outgoing::from_guest(request(method, url, headers)).unwrap()
    }

    fn refusal(method: &str, url: &str, headers: &[(&str, &str)]) -> String {
        Outgoing::from_guest(request(method, url, headers)).unwrap_err()
    }

    #[test]
    fn a_valid_request_is_kept() {
        let o = outgoing(
            "POST",
            "https://api.example.com:8443/v1/items?q=secret#frag",
            &[("X-Token", "abc"), ("accept", "a"), ("Accept", "b")],
        );
        assert_eq!(o.method, Method::POST);
        assert_eq!(o.url.fragment(), None);
        assert_eq!(o.url.query(), Some("q=secret"));
        assert_eq!(o.headers["x-token"], "abc");
        assert_eq!(o.headers.get_all("accept").iter().count(), 2);
        assert_eq!(o.body.as_deref(), Some(&b"payload"[..]));
        assert_eq!(o.timeout, Some(Duration::from_millis(250)));
        assert_eq!(o.target(), "POST https://api.example.com:8443/v1/items");
    }

    #[test]
    fn bad_methods_are_refused() {
        assert!(refusal("", "http://a.example/", &[]).contains("not a valid HTTP method"));
        assert!(refusal("GE T", "http://a.example/", &[]).contains("not a valid HTTP method"));
        assert!(refusal("GET\r\n", "http://a.example/", &[]).contains("not a valid HTTP method"));
        assert!(refusal(&"A".repeat(40), "http://a.example/", &[]).contains("1 to 32"));
        assert!(refusal("CONNECT", "http://a.example/", &[]).contains("CONNECT"));
        assert_eq!(outgoing("PURGE", "http://a.example/", &[]).method, "PURGE");
    }

    #[test]
    fn bad_urls_are_refused() {
        let cases = [
            ("/relative", "not a valid absolute"),
            ("ftp://a.example/file", "scheme \"ftp\""),
            ("file:///etc/passwd", "scheme \"file\""),
            ("http://user:pw@a.example/", "credentials"),
            ("http://user@a.example/", "credentials"),
            ("data:text/plain,hi", "scheme \"data\""),
            ("http://", "not a valid absolute"),
        ];
        for (url, expected) in cases {
            let message = refusal("GET", url, &[]);
            assert!(message.contains(expected), "{url}: {message}");
        }
        let long = format!("http://a.example/{}", "a".repeat(MAX_URL));
        assert!(refusal("GET", &long, &[]).contains("bytes long"));
    }

    #[test]
    fn numeric_hosts_are_normalized_to_addresses() {
        // The address checks see 127.0.0.1, however the guest spells it.
        for url in ["http://2130706433/", "http://0x7f.1/", "http://127.1/"] {
            let o = outgoing("GET", url, &[]);
            assert_eq!(o.url.host_str(), Some("127.0.0.1"), "{url}");
        }
    }

    #[test]
    fn bad_headers_are_refused() {
        let url = "http://a.example/";
        assert!(refusal("GET", url, &[("bad name", "x")]).contains("header name"));
        assert!(refusal("GET", url, &[("x", "a\r\nInjected: 1")]).contains("control"));
        assert!(refusal("GET", url, &[("x", "a\0")]).contains("control"));
        let many: Vec<(&str, &str)> = (0..=MAX_HEADERS).map(|_| ("x", "y")).collect();
        assert!(refusal("GET", url, &many).contains("headers"));
        let big = "v".repeat(MAX_HEADER_BYTES);
        assert!(refusal("GET", url, &[("x", &big)]).contains("bytes"));
    }

    #[test]
    fn the_host_header_must_name_the_url_host() {
        let message = refusal("GET", "http://a.example/", &[("Host", "internal.corp")]);
        assert!(message.contains("\"a.example\""), "{message}");
        let o = outgoing("GET", "http://a.example/", &[("Host", "A.example:80")]);
        assert!(o.headers.get(header::HOST).is_none());
        let o = outgoing(
            "GET",
            "http://a.example:8080/",
            &[("host", "a.example:8080")],
        );
        assert!(o.headers.get(header::HOST).is_none());
    }

    #[test]
    fn connection_headers_are_dropped() {
        let o = outgoing(
            "POST",
            "http://a.example/",
            &[
                ("Connection", "close"),
                ("Content-Length", "999"),
                ("Transfer-Encoding", "chunked"),
                ("Upgrade", "h2c"),
                ("Proxy-Authorization", "Basic x"),
                ("keep-alive", "5"),
                ("x-kept", "1"),
            ],
        );
        assert_eq!(o.headers.len(), 1);
        assert_eq!(o.headers["x-kept"], "1");
    }

    fn location(text: &str) -> HeaderValue {
        HeaderValue::from_str(text).unwrap()
    }

    #[test]
    fn see_other_becomes_a_get_without_body() {
        let o = outgoing(
            "POST",
            "http://a.example/form",
            &[("content-type", "text/plain"), ("authorization", "t")],
        );
        let next = o
            .redirect(StatusCode::SEE_OTHER, Some(&location("/done?x=1")))
            .unwrap()
            .unwrap();
        assert_eq!(next.method, Method::GET);
        assert_eq!(next.body, None);
        assert!(next.headers.get(header::CONTENT_TYPE).is_none());
        assert_eq!(next.url.as_str(), "http://a.example/done?x=1");
        // Same origin: credentials stay.
        assert_eq!(next.headers["authorization"], "t");
    }

    #[test]
    fn temporary_and_permanent_redirects_keep_method_and_body() {
        let o = outgoing("PUT", "http://a.example/x", &[("content-type", "a/b")]);
        for status in [
            StatusCode::TEMPORARY_REDIRECT,
            StatusCode::PERMANENT_REDIRECT,
        ] {
            let next = o.redirect(status, Some(&location("y"))).unwrap().unwrap();
            assert_eq!(next.method, Method::PUT);
            assert_eq!(next.body.as_deref(), Some(&b"payload"[..]));
            assert_eq!(next.headers["content-type"], "a/b");
            assert_eq!(next.url.as_str(), "http://a.example/y");
        }
    }

    #[test]
    fn found_keeps_head_and_get() {
        let o = outgoing("HEAD", "http://a.example/x", &[]);
        let next = o
            .redirect(StatusCode::FOUND, Some(&location("/y")))
            .unwrap()
            .unwrap();
        assert_eq!(next.method, Method::HEAD);
    }

    #[test]
    fn credentials_are_dropped_when_the_origin_changes() {
        let o = outgoing(
            "GET",
            "https://a.example/",
            &[
                ("authorization", "Bearer t"),
                ("cookie", "s=1"),
                ("x-api-key", "secret"),
                ("accept", "application/json"),
            ],
        );
        for target in [
            "https://b.example/",
            "http://a.example/",
            "https://a.example:8443/",
        ] {
            let next = o
                .redirect(StatusCode::FOUND, Some(&location(target)))
                .unwrap()
                .unwrap();
            assert!(
                next.headers.get(header::AUTHORIZATION).is_none(),
                "{target}"
            );
            assert!(next.headers.get(header::COOKIE).is_none(), "{target}");
            // A header of the tool's own naming may hold a key too.
            assert!(next.headers.get("x-api-key").is_none(), "{target}");
            assert_eq!(next.headers["accept"], "application/json");
        }
        // Within the origin every header stays.
        let next = o
            .redirect(StatusCode::FOUND, Some(&location("/next")))
            .unwrap()
            .unwrap();
        assert_eq!(next.headers["x-api-key"], "secret");
    }

    #[test]
    fn other_statuses_and_missing_locations_are_not_followed() {
        let o = outgoing("GET", "http://a.example/", &[]);
        assert!(o.redirect(StatusCode::OK, None).unwrap().is_none());
        assert!(
            o.redirect(StatusCode::NOT_MODIFIED, Some(&location("/x")))
                .unwrap()
                .is_none()
        );
        assert!(o.redirect(StatusCode::FOUND, None).unwrap().is_none());
    }

    #[test]
    fn redirects_to_other_schemes_or_credentials_are_refused() {
        let o = outgoing("GET", "http://a.example/p?token=s3cret", &[]);
        let message = o
            .redirect(StatusCode::FOUND, Some(&location("file:///etc/passwd")))
            .unwrap_err();
        assert!(message.contains("scheme \"file\""), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
        let message = o
            .redirect(StatusCode::FOUND, Some(&location("http://u:p@b.example/")))
            .unwrap_err();
        assert!(message.contains("credentials"), "{message}");
    }

    #[test]
    fn targets_leave_out_secrets() {
        let url = Url::parse("https://u:p@a.example:444/path/x?key=s3cret#f").unwrap();
        assert_eq!(target("GET", &url), "GET https://a.example:444/path/x");
        let url = Url::parse("http://[::1]/").unwrap();
        assert_eq!(target("GET", &url), "GET http://[::1]/");
        let bad = request("GET", "not a url?secret=1", &[]);
        assert_eq!(unparsed_target(&bad), "GET (invalid url)");
    }
}
