//! The handles each tenant holds: their profile, last use, calls in flight
//! and which state they made (plugins, terminal); and the handles whose
//! state was dropped, with why, so a later call says so instead of
//! starting over.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::codec::Nonce;
use crate::capability::Profile;

/// Most dropped handles remembered per tenant (the oldest is forgotten
/// first; a forgotten one is still `state_lost`, without the reason).
pub(crate) const MAX_LOST_PER_TENANT: usize = 1024;

/// One live handle.
struct Entry {
    /// The caller's profile when it was made: under another one (a reloaded
    /// configuration) its state is dropped.
    profile: Weak<Profile>,
    last_used: Instant,
    in_flight: usize,
    /// Each part of its state (a plugin's name, or `terminal`) and what it
    /// was made by (the plugin version's hash).
    parts: BTreeMap<String, String>,
}

/// The handles of one tenant.
#[derive(Default)]
pub(crate) struct Held {
    live: HashMap<Nonce, Entry>,
    lost: HashMap<Nonce, String>,
    /// `lost` in the order they were dropped.
    lost_order: VecDeque<Nonce>,
}

/// Why a handle cannot be used or made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Its state was dropped, for this reason.
    Lost(String),
    /// The tenant holds `max` handles, each with a call in flight.
    Full(usize),
}

impl Held {
    /// Drops the handles idle for `idle` (for `reason`) and returns them.
    pub(crate) fn expire_idle(&mut self, idle: Duration, reason: &str) -> Vec<Nonce> {
        let now = Instant::now();
        let idle_ones: Vec<Nonce> = self
            .live
            .iter()
            .filter(|(_, e)| e.in_flight == 0 && now.duration_since(e.last_used) >= idle)
            .map(|(nonce, _)| *nonce)
            .collect();
        for nonce in &idle_ones {
            self.lose(nonce, reason.to_string());
        }
        idle_ones
    }

    /// Adds a new handle under `profile`; when the tenant holds `max`
    /// already, drops the least recently used one without a call in flight
    /// first (returned), or refuses when every one has a call in flight.
    pub(crate) fn insert(
        &mut self,
        nonce: Nonce,
        profile: &Arc<Profile>,
        max: usize,
    ) -> Result<Option<Nonce>, Refused> {
        let mut evicted = None;
        if self.live.len() >= max {
            let oldest = self
                .live
                .iter()
                .filter(|(_, e)| e.in_flight == 0)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(nonce, _)| *nonce)
                .ok_or(Refused::Full(max))?;
            self.lose(
                &oldest,
                format!(
                    "it was the least recently used of the {max} handles its tenant may hold \
                     ([state] max_handles_per_tenant)"
                ),
            );
            evicted = Some(oldest);
        }
        self.live.insert(
            nonce,
            Entry {
                profile: Arc::downgrade(profile),
                last_used: Instant::now(),
                in_flight: 0,
                parts: BTreeMap::new(),
            },
        );
        Ok(evicted)
    }

    /// Starts a call on handle `nonce` under `profile`: the parts of its
    /// state so far. A handle made under another profile is dropped.
    pub(crate) fn begin(
        &mut self,
        nonce: &Nonce,
        profile: &Arc<Profile>,
    ) -> Result<BTreeMap<String, String>, Refused> {
        if let Some(reason) = self.lost.get(nonce) {
            return Err(Refused::Lost(reason.clone()));
        }
        let Some(entry) = self.live.get_mut(nonce) else {
            return Err(Refused::Lost(
                "this server no longer knows it: it was restarted, or the state was dropped \
                 long ago"
                    .into(),
            ));
        };
        if !Weak::ptr_eq(&entry.profile, &Arc::downgrade(profile)) {
            let reason = format!(
                "the caller's profile {:?} changed since (the configuration was reloaded)",
                profile.name
            );
            self.lose(nonce, reason.clone());
            return Err(Refused::Lost(reason));
        }
        entry.in_flight += 1;
        entry.last_used = Instant::now();
        Ok(entry.parts.clone())
    }

    /// Ends a call on handle `nonce`.
    pub(crate) fn finish(&mut self, nonce: &Nonce) {
        if let Some(entry) = self.live.get_mut(nonce) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            entry.last_used = Instant::now();
        }
    }

    /// Notes that handle `nonce` now holds `part`, made by `maker`.
    pub(crate) fn record(&mut self, nonce: &Nonce, part: &str, maker: &str) {
        if let Some(entry) = self.live.get_mut(nonce) {
            entry.parts.insert(part.to_string(), maker.to_string());
        }
    }

    /// Drops handle `nonce`'s state for `reason`: later calls with it get
    /// `state_lost` with that reason.
    pub(crate) fn lose(&mut self, nonce: &Nonce, reason: String) {
        self.live.remove(nonce);
        if self.lost.insert(*nonce, reason).is_none() {
            self.lost_order.push_back(*nonce);
        }
        while self.lost_order.len() > MAX_LOST_PER_TENANT {
            if let Some(oldest) = self.lost_order.pop_front() {
                self.lost.remove(&oldest);
            }
        }
    }

    /// How many handles are live.
    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> Arc<Profile> {
        Arc::new(Profile::deny_all("p", "/"))
    }

    #[test]
    fn a_full_tenant_drops_its_least_recently_used_idle_handle() {
        let p = profile();
        let mut held = Held::default();
        held.insert([1; 16], &p, 2).unwrap();
        held.insert([2; 16], &p, 2).unwrap();
        held.begin(&[1; 16], &p).unwrap();
        held.finish(&[1; 16]);
        // [2] is the least recently used.
        assert_eq!(held.insert([3; 16], &p, 2), Ok(Some([2; 16])));
        assert!(
            matches!(held.begin(&[2; 16], &p), Err(Refused::Lost(r)) if r.contains("least recently used"))
        );
        // Every handle busy: refused, none dropped.
        held.begin(&[1; 16], &p).unwrap();
        held.begin(&[3; 16], &p).unwrap();
        assert_eq!(held.insert([4; 16], &p, 2), Err(Refused::Full(2)));
        assert_eq!(held.len(), 2);
    }

    #[test]
    fn a_dropped_handle_stays_dropped_and_says_why() {
        let p = profile();
        let mut held = Held::default();
        held.insert([1; 16], &p, 8).unwrap();
        held.lose(&[1; 16], "the instance trapped".into());
        for _ in 0..2 {
            assert_eq!(
                held.begin(&[1; 16], &p),
                Err(Refused::Lost("the instance trapped".into()))
            );
        }
        assert!(
            matches!(held.begin(&[9; 16], &p), Err(Refused::Lost(r)) if r.contains("restarted"))
        );
    }

    #[test]
    fn another_profile_drops_the_state() {
        let (p, q) = (profile(), profile());
        let mut held = Held::default();
        held.insert([1; 16], &p, 8).unwrap();
        assert!(matches!(held.begin(&[1; 16], &q), Err(Refused::Lost(r)) if r.contains("profile")));
        assert!(matches!(held.begin(&[1; 16], &p), Err(Refused::Lost(_))));
    }

    #[test]
    fn idle_handles_expire_but_busy_ones_do_not() {
        let p = profile();
        let mut held = Held::default();
        held.insert([1; 16], &p, 8).unwrap();
        held.insert([2; 16], &p, 8).unwrap();
        held.begin(&[2; 16], &p).unwrap();
        assert_eq!(
            held.expire_idle(Duration::ZERO, "it was idle"),
            vec![[1; 16]]
        );
        assert!(matches!(held.begin(&[1; 16], &p), Err(Refused::Lost(r)) if r.contains("idle")));
    }

    #[test]
    fn lost_markers_are_bounded() {
        let p = profile();
        let mut held = Held::default();
        for i in 0..MAX_LOST_PER_TENANT + 10 {
            let mut nonce = [0u8; 16];
            nonce[..8].copy_from_slice(&(i as u64).to_be_bytes());
            held.insert(nonce, &p, usize::MAX).unwrap();
            held.lose(&nonce, "x".into());
        }
        assert_eq!(held.lost.len(), MAX_LOST_PER_TENANT);
        assert_eq!(held.lost_order.len(), MAX_LOST_PER_TENANT);
    }
}
