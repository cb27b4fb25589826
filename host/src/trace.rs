//! W3C trace context: a call's `traceparent` (from MCP's `_meta` or the
//! HTTP header) is checked, written into its audit record, and continued
//! into the `http` requests its tool sends (declarative tools included), as
//! a child span; `tracestate` goes along unchanged, `baggage` never.

use std::future::Future;

use reqwest::header::{HeaderMap, HeaderValue};

/// The trace a call belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// 32 lower-case hex digits, not all zero.
    pub trace_id: String,
    /// The caller's span: 16 lower-case hex digits, not all zero.
    pub parent_id: String,
    flags: String,
    state: Option<HeaderValue>,
}

impl std::fmt::Display for Trace {
    /// As a `traceparent`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "00-{}-{}-{}", self.trace_id, self.parent_id, self.flags)
    }
}

tokio::task_local! {
    static TRACE: Trace;
}

impl Trace {
    /// The trace `traceparent` names, with `tracestate`; `None` when it is
    /// absent or not a version-00 traceparent (then the call has none).
    pub fn parse(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<Self> {
        let text = traceparent?.trim();
        let parts: Vec<&str> = text.split('-').collect();
        let hex = |part: &str, len: usize| {
            part.len() == len && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        let zero = |part: &str| part.bytes().all(|b| b == b'0');
        let [version, trace_id, parent_id, flags] = parts[..] else {
            tracing::debug!(traceparent = text, "ignoring a malformed traceparent");
            return None;
        };
        let valid = version == "00"
            && hex(trace_id, 32)
            && !zero(trace_id)
            && hex(parent_id, 16)
            && !zero(parent_id)
            && hex(flags, 2);
        if !valid {
            tracing::debug!(traceparent = text, "ignoring a malformed traceparent");
            return None;
        }
        let state = tracestate
            .filter(|s| s.len() <= 512)
            .and_then(|s| HeaderValue::from_str(s.trim()).ok());
        Some(Self {
            trace_id: trace_id.to_string(),
            parent_id: parent_id.to_string(),
            flags: flags.to_string(),
            state,
        })
    }

    /// The trace of an HTTP request's `traceparent` and `tracestate`.
    pub fn of_headers(headers: &HeaderMap) -> Option<Self> {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        Self::parse(text("traceparent"), text("tracestate"))
    }

    /// Its `tracestate`, if it has one.
    pub fn state(&self) -> Option<&str> {
        self.state.as_ref().and_then(|s| s.to_str().ok())
    }

    /// The trace of the call running now, if it has one.
    pub fn current() -> Option<Self> {
        TRACE.try_with(Clone::clone).ok()
    }

    /// `call`, run in this trace.
    pub fn scoped<F: Future>(self, call: F) -> impl Future<Output = F::Output> {
        TRACE.scope(self, call)
    }

    /// `call`, run in `trace` (as is, without one).
    pub fn scope<F: Future>(trace: Option<Self>, call: F) -> impl Future<Output = F::Output> {
        match trace {
            Some(trace) => futures::future::Either::Left(TRACE.scope(trace, call)),
            None => futures::future::Either::Right(call),
        }
    }

    /// Continues the current call's trace into an outgoing request's
    /// `headers`: a `traceparent` with a new span of this host, and the
    /// caller's `tracestate`. A request that carries its own keeps it.
    pub(crate) fn continue_into(headers: &mut HeaderMap) {
        let Some(trace) = Self::current() else {
            return;
        };
        if headers.contains_key("traceparent") {
            return;
        }
        let span: String = span_id().iter().map(|b| format!("{b:02x}")).collect();
        let parent = format!("00-{}-{span}-{}", trace.trace_id, trace.flags);
        if let Ok(value) = HeaderValue::from_str(&parent) {
            headers.insert("traceparent", value);
            if let Some(state) = trace.state {
                headers.insert("tracestate", state);
            }
        }
    }
}

/// 8 random bytes, never all zero, for a span id.
fn span_id() -> [u8; 8] {
    let mut span = [0u8; 8];
    // SAFETY: the pointer and length describe `span`.
    let got = unsafe { libc::getrandom(span.as_mut_ptr().cast(), span.len(), 0) };
    if got != 8 || span == [0; 8] {
        // Unique enough for a span without the kernel's random numbers.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        span = (now as u64 | 1).to_be_bytes();
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";

    #[test]
    fn only_a_well_formed_version_00_traceparent_is_taken() {
        let trace = Trace::parse(Some(GOOD), Some("k=v")).unwrap();
        assert_eq!(trace.trace_id, "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(trace.parent_id, "00f067aa0ba902b7");
        for bad in [
            "",
            "01-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0AF7651916CD43DD8448EB211C80319C-00f067aa0ba902b7-01",
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7",
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01-x",
            "00-0af7651916cd43dd8448eb211c80319-c00f067aa0ba902b7-01",
        ] {
            assert_eq!(Trace::parse(Some(bad), None), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn an_outgoing_request_continues_the_trace_as_a_child() {
        let mut headers = HeaderMap::new();
        Trace::continue_into(&mut headers);
        assert!(headers.is_empty(), "no trace, no header");
        let trace = Trace::parse(Some(GOOD), Some("k=v"));
        Trace::scope(trace, async {
            Trace::continue_into(&mut headers);
        })
        .await;
        let parent = headers["traceparent"].to_str().unwrap();
        assert!(
            parent.starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
            "{parent}"
        );
        assert!(
            parent.ends_with("-01") && !parent.contains("00f067aa0ba902b7"),
            "{parent}"
        );
        assert_eq!(headers["tracestate"], "k=v");
    }
}
