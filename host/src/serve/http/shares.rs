//! Each tenant's share of the server's connections: requests of one tenant
//! in flight on any route (a body still arriving, a call waiting or
//! running, an answer or stream not yet read) are at most
//! `--max-connections` divided among the tenants and the local caller, so
//! one tenant's slow or held requests never take the slots another needs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Requests in flight, by tenant (`None`: the local caller).
#[derive(Debug)]
pub(super) struct Shares {
    max_connections: usize,
    in_flight: Mutex<HashMap<Option<String>, usize>>,
}

/// One request in flight, counted until dropped (keep it with the
/// response body).
pub(super) struct Share {
    shares: Arc<Shares>,
    tenant: Option<String>,
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut in_flight = self.shares.lock();
        if let Some(count) = in_flight.get_mut(&self.tenant) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.tenant);
            }
        }
    }
}

impl Shares {
    pub(super) fn new(max_connections: usize) -> Arc<Self> {
        Arc::new(Self {
            max_connections,
            in_flight: Mutex::default(),
        })
    }

    /// A place for one more request of `tenant` among `tenants` configured
    /// ones, or why there is none. A server without tenants gives its one
    /// caller every connection.
    pub(super) fn take(
        self: &Arc<Self>,
        tenant: Option<&str>,
        tenants: usize,
    ) -> Result<Share, String> {
        let share = (self.max_connections / (tenants + 1)).max(1);
        let mut in_flight = self.lock();
        let count = in_flight.entry(tenant.map(String::from)).or_default();
        if tenants > 0 && *count >= share {
            let whose = match tenant {
                Some(tenant) => format!("tenant {tenant:?}"),
                None => "the local caller".into(),
            };
            return Err(format!(
                "{whose} has {share} requests in flight, its share of --max-connections = {} \
                 among {tenants} tenants and the local caller; wait for one to finish, read \
                 its answers, or close a stream first",
                self.max_connections
            ));
        }
        *count += 1;
        Ok(Share {
            shares: self.clone(),
            tenant: tenant.map(String::from),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Option<String>, usize>> {
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_past_its_share_is_refused_until_one_of_its_requests_ends() {
        let shares = Shares::new(9);
        // Two tenants and the local caller: 3 each.
        let held: Vec<Share> = (0..3).map(|_| shares.take(Some("a"), 2).unwrap()).collect();
        let refused = shares.take(Some("a"), 2).err().unwrap();
        assert!(
            refused.contains("tenant \"a\" has 3 requests in flight"),
            "{refused}"
        );
        assert!(shares.take(Some("b"), 2).is_ok());
        drop(held);
        assert!(shares.take(Some("a"), 2).is_ok());
        // Without tenants, no share.
        let all: Vec<Share> = (0..20).map(|_| shares.take(None, 0).unwrap()).collect();
        assert_eq!(all.len(), 20);
    }
}
