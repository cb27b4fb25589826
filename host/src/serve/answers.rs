//! The bytes of `/v1/tool_calls` answers each caller's requests hold, being
//! built or not yet sent, against `tenant_caps.answers_held`. A call whose
//! answer would pass the cap fails as it finishes (its answer is dropped
//! there); an answer's bytes are given back as its body is sent.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};

use crate::contract::content::json_len;
use crate::dispatch::{Admit, Outcome};
use crate::error::{CallError, ErrorKind};

/// Bytes sent to the connection at a time; each is given back once the
/// server took it.
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
    /// within `cap` until they are sent.
    pub(crate) fn hold(&self, who: Option<&str>, cap: usize) -> Held {
        Held {
            answers: self.clone(),
            who: who.unwrap_or_default().to_string(),
            cap,
            bytes: Arc::new(AtomicUsize::new(0)),
        }
    }
}

/// One request's share of what its caller holds; given back when dropped.
#[derive(Debug)]
pub(crate) struct Held {
    answers: Answers,
    who: String,
    cap: usize,
    bytes: Arc<AtomicUsize>,
}

impl Held {
    /// Passes each call's outcome through, or fails it when its answer
    /// would pass the cap.
    pub(crate) fn admit(&self) -> Admit {
        let (answers, who, cap, mine) = (
            self.answers.clone(),
            self.who.clone(),
            self.cap,
            self.bytes.clone(),
        );
        Arc::new(move |outcome: Outcome| {
            let Ok(output) = &outcome else {
                return outcome;
            };
            let size = json_len(output.to_json().get());
            match answers.reserve(&who, size, cap) {
                Ok(()) => {
                    mine.fetch_add(size, Ordering::SeqCst);
                    outcome
                }
                Err(held) => Err(refusal(&who, held, mine.load(Ordering::SeqCst), size, cap)),
            }
        })
    }

    /// `answer` as a response body: what it holds beyond what the calls
    /// reserved is held too, and each chunk is given back as it is sent.
    pub(crate) fn body(self, answer: Vec<u8>) -> Body {
        let reserved = self.bytes.swap(0, Ordering::SeqCst);
        // Kept whole: the framing beyond the results is small.
        self.answers.with(|held| {
            let now = held.entry(self.who.clone()).or_insert(0);
            *now = now.saturating_sub(reserved).saturating_add(answer.len());
        });
        self.bytes.store(answer.len(), Ordering::SeqCst);
        let answer = Bytes::from(answer);
        let chunks = (0..answer.len())
            .step_by(CHUNK)
            .map(move |at| answer.slice(at..(at + CHUNK).min(answer.len())));
        let sent = Sending { held: self, chunks };
        Body::from_stream(futures::stream::iter(sent))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.answers
            .release(&self.who, self.bytes.swap(0, Ordering::SeqCst));
    }
}

/// An answer's chunks, each given back as the server takes it.
struct Sending<I> {
    held: Held,
    chunks: I,
}

impl<I: Iterator<Item = Bytes>> Iterator for Sending<I> {
    type Item = Result<Bytes, Infallible>;

    fn next(&mut self) -> Option<Self::Item> {
        let chunk = self.chunks.next()?;
        let given = chunk.len().min(self.held.bytes.load(Ordering::SeqCst));
        self.held.bytes.fetch_sub(given, Ordering::SeqCst);
        self.held.answers.release(&self.held.who, given);
        Some(Ok(chunk))
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
    fn held_bytes_come_back_as_the_answer_is_sent_or_dropped() {
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
}
