//! The narrowings HTTP clients chose for their sessions (`POST
//! /v1/sessions`), applied to the calls of those sessions. Each tenant has a
//! table of its own, holding at most `tenant_caps.narrowed_sessions`
//! sessions of at most 256 patterns (16 KiB of them) each; a session no call used
//! for `tenant_caps.narrowing_idle` is forgotten, and its later calls are
//! refused rather than run un-narrowed. The server-wide lock only finds a
//! tenant's table, and narrowed profiles are made outside every table lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::caller::{Caller, SessionNarrowing, too_large};
use crate::config::TenantCaps;
use crate::policy::Narrowing;

/// How many expired sessions a tenant's table remembers, per narrowed
/// session it may hold: their calls are refused until then.
const EXPIRED_PER_SESSION: usize = 4;

/// The narrowings of every tenant (`None`: the local caller).
#[derive(Debug, Clone, Default)]
pub(crate) struct Narrowings(Arc<Mutex<HashMap<Option<String>, Arc<Table>>>>);

/// One tenant's narrowed sessions, by session id.
#[derive(Debug, Default)]
struct Table(Mutex<HashMap<String, Entry>>);

#[derive(Debug)]
enum Entry {
    Live {
        narrowing: Arc<SessionNarrowing>,
        used: Instant,
    },
    /// Forgotten after `narrowing_idle`, at that time.
    Expired(Instant),
}

/// Why a narrowing was not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The tenant holds its cap of narrowed sessions.
    Full(String),
    /// The session's narrowings would hold too many patterns.
    TooLarge(String),
}

impl Narrowings {
    /// The table of `tenant`, made if new; the server-wide lock is held
    /// only for this lookup.
    fn table(&self, tenant: Option<&str>) -> Arc<Table> {
        let mut tables = self.0.lock().unwrap_or_else(|e| e.into_inner());
        tables.entry(tenant.map(String::from)).or_default().clone()
    }

    /// Narrows `session` of `tenant` by `narrowing` too; the session's
    /// narrowings, or why they were not kept.
    pub(crate) fn narrow(
        &self,
        tenant: Option<&str>,
        session: &str,
        narrowing: Narrowing,
        caps: &TenantCaps,
    ) -> Result<Arc<SessionNarrowing>, Refusal> {
        let table = self.table(tenant);
        let mut sessions = table.0.lock().unwrap_or_else(|e| e.into_inner());
        expire(&mut sessions, caps);
        let before = match sessions.get(session) {
            Some(Entry::Live { narrowing, .. }) => Some(narrowing.clone()),
            _ => None,
        };
        let (patterns, bytes) = before.as_ref().map_or((0, 0), |b| b.size());
        let patterns = patterns + narrowing.patterns();
        if let Some(message) = too_large(patterns, bytes + narrowing.bytes()) {
            return Err(Refusal::TooLarge(message));
        }
        let live = sessions
            .values()
            .filter(|entry| matches!(entry, Entry::Live { .. }))
            .count();
        if before.is_none() && live >= caps.narrowed_sessions {
            return Err(Refusal::Full(format!(
                "{} holds {live} narrowed sessions, its cap of tenant_caps.narrowed_sessions = \
                 {}; reuse a session, or wait until one is unused for tenant_caps.narrowing_idle \
                 = {:?}",
                who(tenant),
                caps.narrowed_sessions,
                caps.narrowing_idle
            )));
        }
        let narrowed = Arc::new(match &before {
            Some(before) => before.and(narrowing),
            None => SessionNarrowing::default().and(narrowing),
        });
        sessions.insert(
            session.to_string(),
            Entry::Live {
                narrowing: narrowed.clone(),
                used: Instant::now(),
            },
        );
        Ok(narrowed)
    }

    /// `caller` as session `session` narrowed it (unchanged if it did not),
    /// or why the session's calls are refused.
    pub(crate) fn apply(
        &self,
        caller: &Caller,
        session: &str,
        caps: &TenantCaps,
    ) -> Result<Caller, String> {
        let tenant = caller.tenant_name();
        let table = self.table(tenant);
        let narrowing = {
            let mut sessions = table.0.lock().unwrap_or_else(|e| e.into_inner());
            match sessions.get_mut(session) {
                None => None,
                Some(Entry::Expired(_)) => return Err(expired(session, caps)),
                Some(Entry::Live { narrowing, used }) if used.elapsed() < caps.narrowing_idle => {
                    *used = Instant::now();
                    Some(narrowing.clone())
                }
                Some(Entry::Live { .. }) => {
                    expire(&mut sessions, caps);
                    return Err(expired(session, caps));
                }
            }
        };
        let narrowed = match &narrowing {
            Some(narrowing) => narrowing.apply(caller),
            None => caller.clone(),
        };
        // A call that starts after the session was narrowed again (or
        // forgotten) does not run under what it was given before.
        let session = session.to_string();
        Ok(narrowed.in_force_while(move || {
            let sessions = table.0.lock().unwrap_or_else(|e| e.into_inner());
            let now = match sessions.get(&session) {
                Some(Entry::Live { narrowing, .. }) => Some(narrowing),
                Some(Entry::Expired(_)) => None,
                None => None,
            };
            let same = match (&narrowing, now) {
                (None, None) => !matches!(sessions.get(&session), Some(Entry::Expired(_))),
                (Some(was), Some(now)) => Arc::ptr_eq(was, now),
                _ => false,
            };
            match same {
                true => Ok(()),
                false => Err(format!(
                    "session {:?} was narrowed or forgotten while this call waited for a slot \
                     or an approval, and the call was given the session's rights before that; \
                     nothing ran; call again",
                    crate::escape::escape(&session)
                )),
            }
        }))
    }
}

fn who(tenant: Option<&str>) -> String {
    match tenant {
        Some(tenant) => format!("tenant {tenant:?}"),
        None => "the local caller".into(),
    }
}

fn expired(session: &str, caps: &TenantCaps) -> String {
    format!(
        "session {session:?} was narrowed, and its narrowing was forgotten after \
         tenant_caps.narrowing_idle = {:?} without a call; its calls are refused rather than run \
         un-narrowed: narrow a new session",
        caps.narrowing_idle
    )
}

/// Forgets the sessions unused for `narrowing_idle` (remembering that
/// they expired), and the oldest expired ones past what is remembered.
fn expire(sessions: &mut HashMap<String, Entry>, caps: &TenantCaps) {
    let now = Instant::now();
    for entry in sessions.values_mut() {
        if let Entry::Live { used, .. } = entry
            && now.duration_since(*used) >= caps.narrowing_idle
        {
            *entry = Entry::Expired(now);
        }
    }
    let remembered = caps.narrowed_sessions.saturating_mul(EXPIRED_PER_SESSION);
    let mut expired: Vec<(Instant, String)> = sessions
        .iter()
        .filter_map(|(id, entry)| match entry {
            Entry::Expired(at) => Some((*at, id.clone())),
            Entry::Live { .. } => None,
        })
        .collect();
    if expired.len() > remembered {
        expired.sort();
        for (_, id) in &expired[..expired.len() - remembered] {
            sessions.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::Approvals;
    use crate::capability::Profile;
    use crate::policy::PermissionPattern;

    fn deny(patterns: &[&str]) -> Narrowing {
        Narrowing {
            allow: None,
            deny: patterns
                .iter()
                .map(|p| PermissionPattern::parse(p).unwrap())
                .collect(),
        }
    }

    fn caller(tenant: &str) -> Caller {
        let profile = Profile::deny_all("p", "/w");
        Caller::new(Arc::new(profile), Arc::new(Approvals::deny_all())).tenant(tenant, 1)
    }

    #[test]
    fn a_tenant_holds_its_cap_of_sessions_and_another_is_not_affected() {
        let caps = TenantCaps {
            narrowed_sessions: 3,
            ..TenantCaps::default()
        };
        let narrowings = Narrowings::default();
        for n in 0..3 {
            let session = format!("s{n}");
            narrowings
                .narrow(Some("a"), &session, deny(&["file:write"]), &caps)
                .unwrap();
        }
        let refused = narrowings
            .narrow(Some("a"), "one-more", deny(&["file:write"]), &caps)
            .unwrap_err();
        let Refusal::Full(message) = refused else {
            panic!("{refused:?}")
        };
        assert!(
            message.contains("tenant_caps.narrowed_sessions = 3"),
            "{message}"
        );
        // Its own sessions narrow further; another tenant is served.
        narrowings
            .narrow(Some("a"), "s0", deny(&["network:*"]), &caps)
            .unwrap();
        narrowings
            .narrow(Some("b"), "s0", deny(&["file:write"]), &caps)
            .unwrap();
    }

    #[test]
    fn a_session_holds_at_most_its_patterns() {
        let caps = TenantCaps::default();
        let narrowings = Narrowings::default();
        let many: Vec<String> = (0..crate::caller::MAX_PATTERNS)
            .map(|n| format!("x{n}:y"))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        narrowings.narrow(None, "s", deny(&many), &caps).unwrap();
        let refused = narrowings
            .narrow(None, "s", deny(&["file:write"]), &caps)
            .unwrap_err();
        let Refusal::TooLarge(message) = refused else {
            panic!("{refused:?}")
        };
        assert!(message.contains("limit of 256 per session"), "{message}");
        let long = "x".repeat(17 << 10);
        let refused = narrowings
            .narrow(None, "t", deny(&[&long]), &caps)
            .unwrap_err();
        let Refusal::TooLarge(message) = refused else {
            panic!("{refused:?}")
        };
        assert!(message.contains("limit of 16384 bytes"), "{message}");
    }

    #[test]
    fn an_idle_session_is_forgotten_and_its_calls_refused() {
        let caps = TenantCaps {
            narrowed_sessions: 1,
            narrowing_idle: std::time::Duration::from_millis(30),
            ..TenantCaps::default()
        };
        let narrowings = Narrowings::default();
        let a = caller("a");
        narrowings
            .narrow(Some("a"), "s", deny(&["file:write"]), &caps)
            .unwrap();
        assert!(narrowings.apply(&a, "s", &caps).is_ok());
        std::thread::sleep(std::time::Duration::from_millis(40));
        let refused = narrowings.apply(&a, "s", &caps).unwrap_err();
        assert!(refused.contains("tenant_caps.narrowing_idle"), "{refused}");
        // Its place is free, and the expired one stays refused.
        narrowings
            .narrow(Some("a"), "t", deny(&["file:write"]), &caps)
            .unwrap();
        assert!(narrowings.apply(&a, "s", &caps).is_err());
        // A session never narrowed runs as the caller.
        assert!(narrowings.apply(&a, "never", &caps).is_ok());
    }

    #[test]
    fn narrowing_many_times_makes_one_profile_with_every_narrowing() {
        let caps = TenantCaps::default();
        let narrowings = Narrowings::default();
        let a = caller("a");
        for n in 0..100 {
            let pattern = format!("perm{n}:x");
            narrowings
                .narrow(Some("a"), "s", deny(&[&pattern]), &caps)
                .unwrap();
        }
        let narrowed = narrowings.apply(&a, "s", &caps).unwrap();
        assert_eq!(narrowed.profile().permissions.narrowed.len(), 100);
        // Made once: the next call gets the same profile.
        let again = narrowings.apply(&a, "s", &caps).unwrap();
        assert!(Arc::ptr_eq(narrowed.profile(), again.profile()));
    }
}
