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
    /// Made for the call in flight, which has not yet kept any state: it
    /// counts against no cap and evicts no one until that call keeps some
    /// (`establish`), and goes away unseen if it keeps none.
    fresh: bool,
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

    /// Adds a fresh handle under `profile` for a call about to run: it
    /// takes no one's place yet (see `establish`). Refused when the tenant
    /// already has `max` fresh ones, each a new conversation's first call
    /// still running.
    pub(crate) fn insert(
        &mut self,
        nonce: Nonce,
        profile: &Arc<Profile>,
        max: usize,
    ) -> Result<(), Refused> {
        if self.live.values().filter(|e| e.fresh).count() >= max {
            return Err(Refused::Full(max));
        }
        self.live.insert(
            nonce,
            Entry {
                profile: Arc::downgrade(profile),
                last_used: Instant::now(),
                in_flight: 0,
                parts: BTreeMap::new(),
                fresh: true,
            },
        );
        Ok(())
    }

    /// Fresh handle `nonce`'s call kept state: it now counts against `max`,
    /// and the tenant's least recently used handles without a call in
    /// flight are dropped (returned) until it holds no more than `max`.
    pub(crate) fn establish(&mut self, nonce: &Nonce, max: usize) -> Vec<Nonce> {
        if let Some(entry) = self.live.get_mut(nonce) {
            entry.fresh = false;
        }
        let mut evicted = Vec::new();
        while self.live.values().filter(|e| !e.fresh).count() > max {
            let Some(oldest) = self.least_recently_used(|n, e| n != nonce && e.in_flight == 0)
            else {
                break;
            };
            self.lose(
                &oldest,
                format!(
                    "it was the least recently used of the {max} handles its tenant may hold \
                     ([state] max_handles_per_tenant)"
                ),
            );
            evicted.push(oldest);
        }
        evicted
    }

    /// Drops fresh handle `nonce`, whose call kept no state: it was never
    /// shown, so nothing remembers it.
    pub(crate) fn forget(&mut self, nonce: &Nonce) {
        if self.live.get(nonce).is_some_and(|e| e.fresh) {
            self.live.remove(nonce);
        }
    }

    /// The least recently used of the handles `which` picks.
    fn least_recently_used(&self, which: impl Fn(&Nonce, &Entry) -> bool) -> Option<Nonce> {
        self.live
            .iter()
            .filter(|(nonce, e)| !e.fresh && which(nonce, e))
            .min_by_key(|(_, e)| e.last_used)
            .map(|(nonce, _)| *nonce)
    }

    /// The least recently used handle without a call in flight that holds
    /// `part`, other than `except`.
    pub(crate) fn idle_holder_of(&self, part: &str, except: &Nonce) -> Option<Nonce> {
        self.least_recently_used(|nonce, e| {
            nonce != except && e.in_flight == 0 && e.parts.contains_key(part)
        })
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

    /// A handle whose first call kept state (what `Handles::mint` and the
    /// call's end do).
    fn made(held: &mut Held, nonce: Nonce, p: &Arc<Profile>, max: usize) -> Vec<Nonce> {
        held.insert(nonce, p, max).unwrap();
        held.begin(&nonce, p).unwrap();
        held.record(&nonce, "todo", "v1");
        let evicted = held.establish(&nonce, max);
        held.finish(&nonce);
        evicted
    }

    #[test]
    fn a_full_tenant_drops_its_least_recently_used_idle_handle() {
        let p = profile();
        let mut held = Held::default();
        made(&mut held, [1; 16], &p, 2);
        made(&mut held, [2; 16], &p, 2);
        held.begin(&[1; 16], &p).unwrap();
        held.finish(&[1; 16]);
        // [2] is the least recently used.
        assert_eq!(made(&mut held, [3; 16], &p, 2), vec![[2; 16]]);
        assert!(
            matches!(held.begin(&[2; 16], &p), Err(Refused::Lost(r)) if r.contains("least recently used"))
        );
        // Every handle busy: the new one is kept over the cap for now, and
        // none is dropped.
        held.begin(&[1; 16], &p).unwrap();
        held.begin(&[3; 16], &p).unwrap();
        held.insert([4; 16], &p, 2).unwrap();
        held.begin(&[4; 16], &p).unwrap();
        assert_eq!(held.establish(&[4; 16], 2), Vec::<Nonce>::new());
        assert_eq!(held.len(), 3);
    }

    #[test]
    fn a_fresh_handle_takes_no_place_until_its_call_keeps_state() {
        let p = profile();
        let mut held = Held::default();
        made(&mut held, [1; 16], &p, 1);
        // A new conversation whose first call is refused: nobody dropped,
        // and nothing remembers it.
        held.insert([2; 16], &p, 1).unwrap();
        held.begin(&[2; 16], &p).unwrap();
        held.finish(&[2; 16]);
        held.forget(&[2; 16]);
        assert_eq!(held.len(), 1);
        assert!(held.begin(&[1; 16], &p).is_ok());
        held.finish(&[1; 16]);
        // Fresh ones are capped on their own.
        held.insert([3; 16], &p, 1).unwrap();
        assert_eq!(held.insert([4; 16], &p, 1), Err(Refused::Full(1)));
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
        made(&mut held, [1; 16], &p, 8);
        made(&mut held, [2; 16], &p, 8);
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
            held.insert(nonce, &p, 1).unwrap();
            held.lose(&nonce, "x".into());
        }
        assert_eq!(held.lost.len(), MAX_LOST_PER_TENANT);
        assert_eq!(held.lost_order.len(), MAX_LOST_PER_TENANT);
    }
}
