//! Tenants: each `[tenants.NAME]` of the config becomes one [`Caller`] (its
//! profile rooted in its workspace, its own concurrency bound and rate limit),
//! and a request's bearer token picks it. Rebuilt when the config reloads.

use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::http::HeaderValue;
use sha2::{Digest, Sha256};

use crate::approval::pending::{Pending, PendingApprover};
use crate::approval::webhook::Webhook;
use crate::approval::{Allowlist, Approvals};
use tokio_util::sync::CancellationToken;

use crate::caller::Caller;
use crate::config::Config;
use crate::host::Host;

/// The tenants of an HTTP server, and who a request is.
#[derive(Debug)]
pub struct Tenants {
    host: Host,
    table: ArcSwap<Vec<Entry>>,
    /// Started without tenants (so on loopback) and none configured since:
    /// while there are still none, requests run as the host's default
    /// caller without a token.
    open: std::sync::atomic::AtomicBool,
    /// The approvals waiting for an answer, of every tenant.
    pending: Arc<Pending>,
    /// SHA-256 of the token that may answer every tenant's approvals.
    approver: ArcSwap<Option<[u8; 32]>>,
    /// Cancelled once the approver token above is changed or removed.
    approver_revoked: ArcSwap<CancellationToken>,
    /// Cancelled once tenants are configured on a server started without
    /// (so without a token).
    open_revoked: CancellationToken,
    /// What the approver token's requests run as: no permission.
    approver_caller: Caller,
}

#[derive(Debug)]
struct Entry {
    name: String,
    token_sha256: [u8; 32],
    /// Cancelled once a reload removes the tenant or changes its token.
    revoked: CancellationToken,
    caller: Caller,
    /// Seconds until the rate limit admits another call, for `Retry-After`.
    retry_after: u64,
}

/// Who a request is.
#[derive(Debug, Clone)]
pub struct Authenticated {
    /// The caller its calls run as.
    pub caller: Caller,
    /// Seconds a refused (busy) client should wait before retrying.
    pub retry_after: u64,
    /// The approver's token: it may list and answer every tenant's
    /// approvals, and its calls have no permission.
    pub approver: bool,
    /// Cancelled once the credential it was made from no longer holds (a
    /// reload removed the tenant or changed the token): what it opened
    /// that outlives the request (an event stream) ends then.
    pub revoked: CancellationToken,
}

/// Why a request is not authenticated. The messages never say which tenants
/// exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unauthorized {
    /// No `Authorization` header.
    Missing,
    /// An `Authorization` header that is not `Bearer <token>`.
    Malformed,
    /// A token that belongs to no tenant.
    Invalid,
}

impl Unauthorized {
    /// `unauthorized: ...`, for the `{"error": ...}` body.
    pub fn message(self) -> &'static str {
        match self {
            Self::Missing => {
                "unauthorized: this server needs a bearer token; send `Authorization: Bearer <token>`"
            }
            Self::Malformed => {
                "unauthorized: the Authorization header is malformed; send `Authorization: Bearer <token>`"
            }
            Self::Invalid => {
                "unauthorized: the bearer token is not valid; check the token you were given"
            }
        }
    }

    /// The `WWW-Authenticate` header value (RFC 6750).
    pub fn challenge(self) -> &'static str {
        match self {
            Self::Missing => "Bearer realm=\"toolhost\"",
            Self::Malformed => "Bearer realm=\"toolhost\", error=\"invalid_request\"",
            Self::Invalid => "Bearer realm=\"toolhost\", error=\"invalid_token\"",
        }
    }
}

impl Tenants {
    /// The tenants of `host`'s config (none when it has no config).
    pub fn new(host: &Host) -> Result<Self, String> {
        let pending = Arc::new(Pending::default());
        let config = host.config();
        let table = match &config {
            Some(config) => build(host, config, &pending)?,
            None => Vec::new(),
        };
        Ok(Self {
            host: host.clone(),
            open: std::sync::atomic::AtomicBool::new(table.is_empty()),
            table: ArcSwap::from_pointee(table),
            pending,
            approver: ArcSwap::from_pointee(config.and_then(|c| c.approver_token_sha256)),
            approver_revoked: ArcSwap::from_pointee(CancellationToken::new()),
            open_revoked: CancellationToken::new(),
            approver_caller: Caller::new(
                Arc::new(crate::capability::Profile::deny_all("approver", "/")),
                Arc::new(Approvals::deny_all()),
            ),
        })
    }

    /// The approvals waiting for an answer.
    pub fn pending(&self) -> &Arc<Pending> {
        &self.pending
    }

    /// Whether no tenant is configured now.
    pub fn is_empty(&self) -> bool {
        self.table.load().is_empty()
    }

    /// How many tenants are configured now.
    pub fn len(&self) -> usize {
        self.table.load().len()
    }

    /// Whether requests need no token: the server started without tenants
    /// and none has been configured since.
    pub fn is_open(&self) -> bool {
        self.open.load(std::sync::atomic::Ordering::SeqCst) && self.is_empty()
    }

    /// Rebuilds the tenants from `config` (after a config reload). On an
    /// error the running tenants stay. Each tenant starts with fresh
    /// concurrency and rate counters; calls in flight keep their old ones.
    pub fn reload(&self, config: &Config) -> Result<(), String> {
        let mut table = build(&self.host, config, &self.pending)?;
        // A credential that still holds keeps what it opened; one gone
        // ends it.
        let old = self.table.load();
        for entry in &mut table {
            if let Some(was) = old
                .iter()
                .find(|was| was.name == entry.name && was.token_sha256 == entry.token_sha256)
            {
                entry.revoked = was.revoked.clone();
            }
        }
        for was in old.iter() {
            let kept = table
                .iter()
                .any(|entry| entry.name == was.name && entry.token_sha256 == was.token_sha256);
            if !kept {
                was.revoked.cancel();
            }
        }
        if **self.approver.load() != config.approver_token_sha256 {
            self.approver_revoked.load().cancel();
            self.approver_revoked
                .store(Arc::new(CancellationToken::new()));
        }
        if !table.is_empty() {
            // Tenants configured once: a later configuration without any
            // refuses every request rather than open the server again.
            self.open.store(false, std::sync::atomic::Ordering::SeqCst);
            self.open_revoked.cancel();
        }
        self.approver.store(Arc::new(config.approver_token_sha256));
        if table.is_empty() && !self.open.load(std::sync::atomic::Ordering::SeqCst) {
            tracing::warn!(
                "the config no longer defines any tenant; every HTTP request is refused until \
                 tenants are configured again"
            );
        }
        self.table.store(Arc::new(table));
        Ok(())
    }

    /// The caller a request with this `Authorization` header runs as.
    pub fn authenticate(
        &self,
        authorization: Option<&HeaderValue>,
    ) -> Result<Authenticated, Unauthorized> {
        let table = self.table.load();
        if table.is_empty() && self.open.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(Authenticated {
                caller: self.host.caller(),
                retry_after: 1,
                approver: false,
                revoked: self.open_revoked.clone(),
            });
        }
        let token = bearer_token(authorization.ok_or(Unauthorized::Missing)?)?;
        let presented: [u8; 32] = Sha256::digest(token).into();
        if let Some(approver) = &**self.approver.load()
            && constant_time_eq(&presented, approver)
        {
            return Ok(Authenticated {
                caller: self.approver_caller.clone(),
                retry_after: 1,
                approver: true,
                revoked: (**self.approver_revoked.load()).clone(),
            });
        }
        // Every entry is compared, in constant time, whatever matches.
        let mut found = None;
        for entry in table.iter() {
            if constant_time_eq(&presented, &entry.token_sha256) {
                found = Some(entry);
            }
        }
        found
            .map(|entry| Authenticated {
                caller: entry.caller.clone(),
                retry_after: entry.retry_after,
                approver: false,
                revoked: entry.revoked.clone(),
            })
            .ok_or(Unauthorized::Invalid)
    }
}

/// The token of `Bearer <token>` (the scheme is case-insensitive).
fn bearer_token(header: &HeaderValue) -> Result<&[u8], Unauthorized> {
    let bytes = header.as_bytes();
    let space = bytes
        .iter()
        .position(|&b| b == b' ')
        .ok_or(Unauthorized::Malformed)?;
    let (scheme, rest) = bytes.split_at(space);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return Err(Unauthorized::Malformed);
    }
    let token = rest.trim_ascii();
    // RFC 6750 b64token: one visible word.
    if token.is_empty() || !token.iter().all(|b| b.is_ascii_graphic()) {
        return Err(Unauthorized::Malformed);
    }
    Ok(token)
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

/// One caller per tenant of `config`. A tenant's approvals are published
/// on `pending` (and its webhook) and wait up to `approvals.timeout`; its
/// `always` answers are kept under its name in the allowlist file.
fn build(host: &Host, config: &Config, pending: &Arc<Pending>) -> Result<Vec<Entry>, String> {
    // The tokens and secrets come from the environment: a server cannot
    // serve without them.
    if !config.unset_variables.is_empty() {
        let problems: Vec<String> = config
            .unset_variables
            .iter()
            .map(|(key, problem)| format!("{key}: {problem}"))
            .collect();
        return Err(problems.join("; "));
    }
    let mut table = Vec::with_capacity(config.tenants.len());
    let allowlist = Arc::new(Allowlist::load(Some(config.allowlist.clone())));
    for tenant in config.tenants.values() {
        // Each tenant's hook tools run in call slots of its own.
        let auto = host.auto_rules(&config.approvals_auto)?;
        let profile = config
            .tenant_profile(tenant)
            .map_err(|e| format!("tenant {:?}: {e}", tenant.name))?;
        if !tenant.workspace.is_dir() {
            tracing::warn!(
                tenant = %tenant.name, workspace = %tenant.workspace.display(),
                "the tenant's workspace is not a directory; its file grants will find nothing"
            );
        }
        let approver = PendingApprover {
            pending: pending.clone(),
            webhook: match &tenant.webhook {
                Some((url, secret)) => Some(Arc::new(
                    Webhook::new(url.clone(), secret.clone())
                        .map_err(|e| format!("tenant {:?}: {e}", tenant.name))?,
                )),
                None => None,
            },
            timeout: config.approval_timeout,
            max_waiting: config.tenant_caps.pending_approvals,
        };
        let approvals = Arc::new(
            Approvals::new(Arc::new(approver), config.approval_timeout, None)
                .sharing(allowlist.clone())
                .editing(Some(config.source.clone()))
                .with_auto(auto),
        );
        let mut caller = Caller::new(profile, approvals).tenant(&tenant.name, tenant.concurrency);
        let mut retry_after = 1;
        if let Some(per_minute) = tenant.calls_per_minute {
            caller = caller.rate_limited(per_minute);
            retry_after = 60u64.div_ceil(u64::from(per_minute.max(1)));
        }
        let Some(token_sha256) = tenant.token_sha256 else {
            return Err(format!("tenants.{}: has no token", tenant.name));
        };
        table.push(Entry {
            name: tenant.name.clone(),
            token_sha256,
            revoked: CancellationToken::new(),
            caller,
            retry_after,
        });
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(text: &str) -> HeaderValue {
        HeaderValue::from_str(text).unwrap()
    }

    #[test]
    fn bearer_tokens_are_parsed_strictly() {
        assert_eq!(bearer_token(&header("Bearer abc")), Ok(&b"abc"[..]));
        assert_eq!(bearer_token(&header("bearer  abc ")), Ok(&b"abc"[..]));
        for bad in [
            "Basic abc",
            "Bearer",
            "Bearer ",
            "Bearerabc",
            "Bearer a b",
            "abc",
        ] {
            assert_eq!(
                bearer_token(&header(bad)),
                Err(Unauthorized::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn hashes_compare_by_value() {
        let a = [7u8; 32];
        let mut b = a;
        assert!(constant_time_eq(&a, &b));
        b[31] = 8;
        assert!(!constant_time_eq(&a, &b));
    }
}
