//! Captures a guest's stdout or stderr up to a cap; the rest is counted and
//! dropped, so a chatty guest neither fails its writes nor fills the host's memory.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// A bounded in-memory sink for one stream of one call.
#[derive(Debug, Clone)]
pub(crate) struct Capture {
    inner: Arc<Mutex<Captured>>,
    cap: usize,
}

#[derive(Debug, Default)]
struct Captured {
    bytes: Vec<u8>,
    dropped: usize,
}

impl Capture {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            inner: Arc::default(),
            cap,
        }
    }

    fn push(&self, data: &[u8]) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = self.cap.saturating_sub(inner.bytes.len());
        let kept = data.len().min(room);
        inner.bytes.extend_from_slice(&data[..kept]);
        inner.dropped += data.len() - kept;
    }

    /// What was captured, as text, with a note when some was dropped.
    pub(crate) fn text(&self) -> String {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut text = String::from_utf8_lossy(&inner.bytes).into_owned();
        if inner.dropped > 0 {
            text.push_str(&format!("… ({} more bytes dropped)", inner.dropped));
        }
        text
    }

    /// Forgets what was captured (between calls of a reused instance).
    pub(crate) fn clear(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.bytes.clear();
        inner.dropped = 0;
    }

    pub(crate) fn is_empty(&self) -> bool {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.bytes.is_empty() && inner.dropped == 0
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Capture {
    async fn ready(&mut self) {}
}

impl OutputStream for Capture {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_bytes_and_counts_the_rest() {
        let capture = Capture::new(5);
        capture.push(b"hello world");
        capture.push(b"!");
        assert_eq!(capture.text(), "hello… (7 more bytes dropped)");
    }
}
