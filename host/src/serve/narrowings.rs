//! The narrowings HTTP clients chose for their sessions (`POST
//! /v1/sessions`), applied to the calls of those sessions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::caller::{Caller, SessionNarrowing};

/// Most sessions narrowed at once on one server.
pub(crate) const MAX_NARROWED: usize = 4096;

/// A tenant (none for the local caller) and a session id.
type SessionKey = (Option<String>, String);

/// The narrowings sessions chose, by tenant and session id.
#[derive(Debug, Clone, Default)]
pub(crate) struct Narrowings(pub(crate) Arc<Mutex<HashMap<SessionKey, SessionNarrowing>>>);

impl Narrowings {
    /// `caller` as session `session` narrowed it (unchanged if it did not).
    pub(crate) fn apply(&self, caller: &Caller, session: &str) -> Caller {
        let table = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = (caller.tenant_name().map(String::from), session.to_string());
        match table.get(&key) {
            Some(narrowing) => narrowing.apply(caller),
            None => caller.clone(),
        }
    }
}
