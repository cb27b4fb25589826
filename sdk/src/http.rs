//! Outbound HTTP through the host. Needs the `network:fetch` permission; the
//! host checks every request (and every redirect) against the caller's
//! permission profile.
//!
//! ```ignore
//! let page = toolhost_sdk::http::get("https://example.com/")?.text();
//! let created = toolhost_sdk::http::Request::post("https://api.example.com/items")
//!     .header("accept", "application/json")
//!     .json(&serde_json::json!({ "name": "x" }))
//!     .send()?;
//! ```

use std::fmt;
use std::time::Duration;

use crate::__private::bindings::toolhost::plugin::http as wit;

/// An HTTP request under construction.
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    timeout: Option<Duration>,
}

impl Request {
    /// A request with the given method (`GET`, `POST`, ...) and URL.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            method: method.into().to_ascii_uppercase(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
            timeout: None,
        }
    }

    /// A `GET` request.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new("GET", url)
    }

    /// A `POST` request.
    pub fn post(url: impl Into<String>) -> Self {
        Self::new("POST", url)
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Sets a JSON body and the `content-type` header.
    pub fn json<T: serde::Serialize>(self, value: &T) -> Self {
        let body = serde_json::to_vec(value).unwrap_or_default();
        self.header("content-type", "application/json").body(body)
    }

    /// Sets a time limit (the host caps it at the profile's limit).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sends the request and waits for the whole response.
    pub fn send(self) -> Result<Response, HttpError> {
        let request = wit::Request {
            method: self.method,
            url: self.url,
            headers: self.headers,
            body: self.body,
            timeout_ms: self
                .timeout
                .map(|t| u32::try_from(t.as_millis()).unwrap_or(u32::MAX)),
        };
        match wit::fetch(&request) {
            Ok(r) => Ok(Response {
                status: r.status,
                headers: r.headers,
                body: r.body,
            }),
            Err(e) => Err(e.into()),
        }
    }
}

/// Sends a `GET` request.
pub fn get(url: impl Into<String>) -> Result<Response, HttpError> {
    Request::get(url).send()
}

/// A complete HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers as name/value pairs (names in lower case).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (invalid UTF-8 is replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }

    /// True for 2xx statuses.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The caller's profile refused the request; the message says why.
    Denied(String),
    /// The request is malformed.
    InvalidRequest(String),
    /// The request ran out of time.
    Timeout,
    /// The response exceeded the size limit (bytes).
    TooLarge(u64),
    /// Connection, TLS or protocol failure.
    Failed(String),
}

impl From<wit::HttpError> for HttpError {
    fn from(e: wit::HttpError) -> Self {
        match e {
            wit::HttpError::Denied(m) => Self::Denied(m),
            wit::HttpError::InvalidRequest(m) => Self::InvalidRequest(m),
            wit::HttpError::Timeout => Self::Timeout,
            wit::HttpError::TooLarge(n) => Self::TooLarge(n),
            wit::HttpError::Failed(m) => Self::Failed(m),
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Denied(m) => write!(f, "request denied: {m}"),
            Self::InvalidRequest(m) => write!(f, "invalid request: {m}"),
            Self::Timeout => write!(f, "request timed out"),
            Self::TooLarge(n) => write!(f, "response larger than {n} bytes"),
            Self::Failed(m) => write!(f, "request failed: {m}"),
        }
    }
}

impl std::error::Error for HttpError {}
