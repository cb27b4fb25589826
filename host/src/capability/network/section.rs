//! The network capability's table: its name and permission,
//! `[profiles.P.network]` as written, and how it resolves into the
//! profile's [`NetworkRules`], each problem at its key. No wasmtime here;
//! its imports (the WIT interface `http`) are in `imports`.

use std::time::Duration;

use serde::Deserialize;

use super::rules::HostRules;
use crate::capability::section::{NoGlobal, Resolve, Section};
use crate::contract::Permission;
use crate::policy::{ByteSize, Span};

/// The permission the `http` import needs.
pub(crate) const NETWORK_FETCH: Permission = Permission::new("network:fetch");

/// Outbound HTTP requests to the profile's allowed hosts (the WIT interface
/// `http`, `"http"` in audit records).
pub struct Network;

/// `network.*` of a profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    /// Hosts tools may reach: names, `*.suffix`, `*`, addresses, CIDRs, with
    /// optional `:port`. Private and loopback addresses need an explicit
    /// address entry.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// Longest request (default 30s).
    #[serde(default)]
    pub timeout: Option<Span>,
    /// Largest response body (default 10MiB).
    #[serde(default)]
    pub max_response: Option<ByteSize>,
    /// Most redirects followed (default 5).
    #[serde(default)]
    pub max_redirects: Option<usize>,
}

/// The network rules of a profile: which hosts, and the limits of outbound
/// HTTP (time, response size, redirects, and the URL rules of the tool's
/// parameter layer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkRules {
    /// Which hosts tools may reach.
    pub hosts: HostRules,
    /// Longest a request may take (the guest may ask for less).
    pub timeout: Duration,
    /// Largest response body, in bytes.
    pub max_response: u64,
    /// Most redirects followed.
    pub max_redirects: usize,
    /// The URL rules of the tool's parameter layer: every request it makes,
    /// each redirect hop included, must pass each of them.
    pub url_rules: Vec<crate::policy::canonical::UrlRule>,
}

impl Default for NetworkRules {
    /// No host; 30 s, 10 MiB, 5 redirects.
    fn default() -> Self {
        Self {
            hosts: HostRules::default(),
            timeout: Duration::from_secs(30),
            max_response: 10 << 20,
            max_redirects: 5,
            url_rules: Vec::new(),
        }
    }
}

impl Section for Network {
    const KEY: &'static str = "network";
    type Written = NetworkConfig;
    type Global = NoGlobal;
    type Rules = NetworkRules;

    fn deny_all() -> NetworkRules {
        NetworkRules::default()
    }

    fn resolve(written: &NetworkConfig, _: &NoGlobal, cx: &mut Resolve<'_>) -> NetworkRules {
        let defaults = NetworkRules::default();
        let hosts = match HostRules::parse(&written.allow_hosts) {
            Ok(hosts) => hosts,
            Err(e) => {
                cx.problem(cx.key("network.allow_hosts"), e.to_string());
                defaults.hosts.clone()
            }
        };
        NetworkRules {
            hosts,
            url_rules: Vec::new(),
            timeout: written.timeout.map(|s| s.0).unwrap_or(defaults.timeout),
            max_response: written
                .max_response
                .map(|s| s.0)
                .unwrap_or(defaults.max_response),
            max_redirects: written.max_redirects.unwrap_or(defaults.max_redirects),
        }
    }
}
