//! The bytes of `/v1/tool_calls` and `/mcp` answers each caller's requests
//! hold, being built or not yet sent, against `tenant_caps.answers_held`. A
//! call whose answer would pass the cap fails as it finishes (its answer is
//! dropped there); an answer's bytes are given back when its body is done.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use hyper::body::Frame;

use crate::contract::content::json_len;
use crate::error::{CallError, ErrorKind};
use crate::host::call::{Admit, Outcome};

/// Bytes handed to the connection at a time, so that it takes an answer no
/// faster than the client reads it.
const CHUNK: usize = 64 * 1024;

/// What each caller's answers hold, by tenant (`""`: the local caller).
#[derive(Debug, Default, Clone)]
pub(crate) struct Answers(Arc<Mutex<HashMap<String, usize>>>);

impl Answers {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, usize>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Adds `bytes` to what `who` holds if that stays within `cap`; else
    /// what it holds.
    fn reserve(&self, who: &str, bytes: usize, cap: usize) -> Result<(), usize> {
        self.with(|held| {
            let now = held.get(who).copied().unwrap_or(0);
            if now.saturating_add(bytes) > cap {
                return Err(now);
            }
            held.insert(who.to_string(), now + bytes);
            Ok(())
        })
    }

    fn release(&self, who: &str, bytes: usize) {
        self.with(|held| {
            if let Some(now) = held.get_mut(who) {
                *now = now.saturating_sub(bytes);
                if *now == 0 {
                    held.remove(who);
                }
            }
        });
    }

    /// The bytes of one request's answer, held by `who` (a tenant's name)
    /// within `cap` until its body is done or dropped.
    pub(crate) fn hold(&self, who: Option<&str>, cap: usize) -> Held {
        Held(Arc::new(Share {
            answers: self.clone(),
            who: who.unwrap_or_default().to_string(),
            cap,
            bytes: AtomicUsize::new(0),
        }))
    }
}

/// One request's share of what its caller holds; given back when the last
/// clone is dropped (the request's handler and its response body each keep
/// one).
#[derive(Debug, Clone)]
pub(crate) struct Held(Arc<Share>);

#[derive(Debug)]
struct Share {
    answers: Answers,
    who: String,
    cap: usize,
    bytes: AtomicUsize,
}

impl Held {
    /// Passes each call's outcome through, or fails it when its answer
    /// would pass the cap.
    pub(crate) fn admit(&self) -> Admit {
        let held = self.clone();
        Arc::new(move |outcome: Outcome| {
            let Ok(output) = &outcome else {
                return outcome;
            };
            match held.keep(json_len(output.to_json().get())) {
                Ok(()) => outcome,
                Err(refused) => Err(refused),
            }
        })
    }

    /// Adds an answer of `size` bytes to this request's share, or says why
    /// it would pass the cap.
    pub(crate) fn keep(&self, size: usize) -> Result<(), CallError> {
        let share = &self.0;
        match share.answers.reserve(&share.who, size, share.cap) {
            Ok(()) => {
                share.bytes.fetch_add(size, Ordering::SeqCst);
                Ok(())
            }
            Err(held) => Err(refusal(
                &share.who,
                held,
                share.bytes.load(Ordering::SeqCst),
                size,
                share.cap,
            )),
        }
    }

    /// [`Held::keep`] for `value` as JSON.
    pub(crate) fn keep_serialized(&self, value: &impl serde::Serialize) -> Result<(), CallError> {
        let mut size = Counted(0);
        // Writing to a counter fails only for a value JSON cannot hold,
        // which is then not sent either.
        let _ = serde_json::to_writer(&mut size, value);
        self.keep(size.0)
    }

    /// `answer` as a response body, held whole (what it holds beyond what
    /// the calls reserved is held too) until the body is done or dropped.
    pub(crate) fn body(self, answer: Vec<u8>) -> Body {
        let share = &self.0;
        let reserved = share.bytes.swap(answer.len(), Ordering::SeqCst);
        // Kept whole: the framing beyond the results is small.
        share.answers.with(|held| {
            let now = held.entry(share.who.clone()).or_insert(0);
            *now = now.saturating_sub(reserved).saturating_add(answer.len());
        });
        self.keep_with(Body::from(answer))
    }

    /// `body`, keeping this share until it is done or dropped; its data goes
    /// to the connection in pieces of 64 KiB.
    pub(crate) fn keep_with(self, body: Body) -> Body {
        Body::new(Holding {
            body,
            rest: Bytes::new(),
            _held: self,
        })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        self.answers
            .release(&self.who, self.bytes.swap(0, Ordering::SeqCst));
    }
}

/// Counts the bytes written to it.
pub(crate) struct Counted(pub(crate) usize);

impl std::io::Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A response body that keeps its answer's share until it is done.
struct Holding {
    body: Body,
    /// What is left of the data frame being handed on.
    rest: Bytes,
    _held: Held,
}

impl hyper::body::Body for Holding {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.rest.is_empty() {
            let frame = match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => frame,
                other => return other,
            };
            match frame.into_data() {
                Ok(data) => self.rest = data,
                Err(frame) => return Poll::Ready(Some(Ok(frame))),
            }
        }
        let take = self.rest.len().min(CHUNK);
        Poll::Ready(Some(Ok(Frame::data(self.rest.split_to(take)))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.body.is_end_stream()
    }
}

/// Why a call's answer of `size` bytes is not kept: the batch's own answer
/// (`mine`) would pass the cap, or the caller's other answers (it holds
/// `held` in all) leave no room.
fn refusal(who: &str, held: usize, mine: usize, size: usize, cap: usize) -> CallError {
    let named = if who.is_empty() {
        "the local caller".to_string()
    } else {
        format!("tenant {who:?}")
    };
    if mine + size > cap {
        return CallError::new(
            ErrorKind::OutputTooLarge,
            format!(
                "this call's answer ({size} bytes) would make the batch's answer hold {} bytes, \
                 more than the cap of tenant_caps.answers_held = {cap} bytes of {named}; send \
                 fewer calls per batch, or ask each for less",
                mine + size
            ),
        );
    }
    CallError::new(
        ErrorKind::Busy,
        format!(
            "{named} holds {held} bytes of answers not yet sent, and this call's answer \
             ({size} bytes) would pass its cap of tenant_caps.answers_held = {cap}; read the \
             answers of its earlier requests first"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_bytes_come_back_when_the_whole_answer_is_sent_or_dropped() {
        let answers = Answers::default();
        let held = answers.hold(Some("a"), 100);
        assert!(answers.reserve("a", 60, 100).is_ok());
        assert_eq!(answers.reserve("a", 50, 100), Err(60));
        answers.release("a", 60);
        let body = held.body(vec![b'x'; 3 * CHUNK]);
        assert_eq!(answers.with(|h| h.get("a").copied()), Some(3 * CHUNK));
        drop(body);
        assert_eq!(answers.with(|h| h.get("a").copied()), None);
    }

    #[tokio::test]
    async fn an_answer_is_held_whole_until_its_last_piece_is_taken() {
        use futures::StreamExt as _;
        let answers = Answers::default();
        let body = answers
            .hold(Some("a"), usize::MAX)
            .body(vec![b'x'; 3 * CHUNK]);
        let mut pieces = body.into_data_stream();
        for _ in 0..3 {
            let piece = pieces.next().await.unwrap().unwrap();
            assert_eq!(piece.len(), CHUNK);
            assert_eq!(answers.with(|h| h.get("a").copied()), Some(3 * CHUNK));
        }
        assert!(pieces.next().await.is_none());
        drop(pieces);
        assert_eq!(answers.with(|h| h.get("a").copied()), None);
    }
}
