//! Where a request may go, and the client that goes there: the URL's host is
//! checked against `network.allow_hosts`, resolved once by the host, and every
//! address it resolves to is checked; the client then connects to those
//! checked addresses only (no second lookup that DNS rebinding could answer
//! differently, no proxy, no redirects of its own).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::capability::network::HostRules;
use crate::tls::tls_config;

/// The `user-agent` sent when the guest sets none.
const USER_AGENT: &str = concat!("toolhost/", env!("CARGO_PKG_VERSION"));

/// Why a URL's host cannot be reached.
#[derive(Debug)]
pub(crate) enum Unreachable {
    /// The profile refuses the host or one of its addresses.
    Refused(String),
    /// The name does not resolve.
    Unresolved(String),
}

/// A host that passed the checks, with the addresses that passed them.
#[derive(Debug, Clone)]
pub(crate) struct Destination {
    /// The host as the URL spells it (what the client asks the resolver for).
    host: String,
    addrs: Arc<[SocketAddr]>,
}

impl Destination {
    /// Checks the host of `url` and every address it resolves to.
    ///
    /// An IP-literal host is checked as it is. A name is looked up here, once,
    /// and refused if any of its addresses is refused: a name that resolves to
    /// a loopback or private address opens it only if `network.allow_hosts`
    /// lists that address.
    pub(crate) async fn check(rules: &HostRules, url: &Url) -> Result<Self, Unreachable> {
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(80);
        Self::check_host(rules, host, port).await
    }

    /// Checks `host` (a name or an IP literal, IPv6 in brackets) at `port`
    /// and every address it resolves to, as [`Destination::check`] does.
    pub(crate) async fn check_host(
        rules: &HostRules,
        host: &str,
        port: u16,
    ) -> Result<Self, Unreachable> {
        rules
            .check_host(host, port)
            .map_err(|refusal| Unreachable::Refused(refusal.to_string()))?;
        let ips = match literal_ip(host) {
            Some(ip) => vec![ip],
            None => lookup(host, port).await?,
        };
        let own = own_addresses();
        for &ip in &ips {
            rules
                .check_address_in(host, port, ip, &own)
                .map_err(|refusal| Unreachable::Refused(refusal.to_string()))?;
        }
        Ok(Self {
            host: host.to_owned(),
            addrs: ips
                .into_iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect(),
        })
    }

    /// The checked addresses.
    pub(crate) fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// A client that reaches this destination only, at its checked addresses.
    /// It follows no redirects, uses no proxy and keeps no idle connections.
    pub(crate) fn client(&self, https: bool) -> Result<reqwest::Client, String> {
        reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config(https)?)
            .no_proxy()
            .no_hickory_dns()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Pinned {
                host: self.host.clone(),
                addrs: self.addrs.clone(),
            })
            .pool_max_idle_per_host(0)
            .user_agent(USER_AGENT)
            .build()
            .map_err(|e| format!("cannot set up the http client: {}", describe(e)))
    }
}

/// The address of an IP-literal host (`127.0.0.1`, `[::1]`): exactly the
/// hosts the client connects to without asking the resolver.
fn literal_ip(host: &str) -> Option<IpAddr> {
    let bare = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok()
}

/// The addresses of this host's interfaces now (`getifaddrs`), read at
/// each check since they change; empty if they cannot be read (the special
/// ranges are still refused then).
fn own_addresses() -> Vec<IpAddr> {
    let mut found = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a list freed by freeifaddrs
    // below; each entry's address, when not null, points at a sockaddr of
    // the family it names.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return found;
        }
        let mut entry = list;
        while let Some(current) = entry.as_ref() {
            let addr = current.ifa_addr;
            if !addr.is_null() {
                match i32::from((*addr).sa_family) {
                    libc::AF_INET => {
                        let v4 = &*(addr as *const libc::sockaddr_in);
                        found.push(IpAddr::from(u32::from_be(v4.sin_addr.s_addr).to_be_bytes()));
                    }
                    libc::AF_INET6 => {
                        let v6 = &*(addr as *const libc::sockaddr_in6);
                        found.push(IpAddr::from(v6.sin6_addr.s6_addr));
                    }
                    _ => {}
                }
            }
            entry = current.ifa_next;
        }
        libc::freeifaddrs(list);
    }
    found
}

/// Resolves `host` with the system resolver; distinct addresses, in order.
async fn lookup(host: &str, port: u16) -> Result<Vec<IpAddr>, Unreachable> {
    let found = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| Unreachable::Unresolved(format!("cannot resolve host {host:?}: {e}")))?;
    let mut ips: Vec<IpAddr> = Vec::new();
    for addr in found {
        if !ips.contains(&addr.ip()) {
            ips.push(addr.ip());
        }
    }
    if ips.is_empty() {
        return Err(Unreachable::Unresolved(format!(
            "host {host:?} resolves to no addresses"
        )));
    }
    Ok(ips)
}

/// A resolver that knows one name and answers with its checked addresses; any
/// other name is an error (the client never needs one).
struct Pinned {
    host: String,
    addrs: Arc<[SocketAddr]>,
}

impl Resolve for Pinned {
    fn resolve(&self, name: Name) -> Resolving {
        let known = same_host(name.as_str(), &self.host);
        let addrs = self.addrs.to_vec();
        let asked = name.as_str().to_owned();
        Box::pin(async move {
            if !known {
                return Err(
                    format!("host {asked:?} was not checked; refusing to resolve it").into(),
                );
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

fn same_host(a: &str, b: &str) -> bool {
    let trim = |s: &str| s.trim_end_matches('.').to_ascii_lowercase();
    trim(a) == trim(b)
}

/// A reqwest error and its causes, without the URL (which may carry secrets
/// in its query string).
pub(crate) fn describe(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(entries: &[&str]) -> HostRules {
        HostRules::parse(entries).unwrap()
    }

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    async fn refusal(rules: &HostRules, target: &str) -> String {
        match Destination::check(rules, &url(target)).await {
            Err(Unreachable::Refused(message)) => message,
            other => panic!("{target}: expected a refusal, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn literal_addresses_are_checked_without_lookup() {
        let open = rules(&["127.0.0.1:8080", "[::1]"]);
        let d = Destination::check(&open, &url("http://127.0.0.1:8080/x"))
            .await
            .unwrap();
        assert_eq!(d.addrs(), &["127.0.0.1:8080".parse().unwrap()]);
        let d = Destination::check(&open, &url("http://[::1]/"))
            .await
            .unwrap();
        assert_eq!(d.addrs(), &["[::1]:80".parse().unwrap()]);

        let wildcard = rules(&["*"]);
        for target in [
            "http://127.0.0.1/",
            "http://[::1]/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.1/",
            "http://[::ffff:127.0.0.1]/",
            "http://0.0.0.0/",
        ] {
            let message = refusal(&wildcard, target).await;
            assert!(
                message.contains("network.allow_hosts"),
                "{target}: {message}"
            );
        }
        let message = refusal(&rules(&["example.com"]), "http://127.0.0.1/").await;
        assert!(message.contains("is not in the profile's network.allow_hosts"));
    }

    #[tokio::test]
    async fn names_are_checked_on_the_addresses_they_resolve_to() {
        // `localhost` resolves to loopback addresses only.
        let message = refusal(&rules(&["localhost"]), "http://localhost:9/").await;
        assert!(message.contains("is loopback"), "{message}");
        // An explicit address entry (with the name allowed) opens it.
        let d = Destination::check(
            &rules(&["localhost", "127.0.0.1", "::1"]),
            &url("http://localhost:9/"),
        )
        .await
        .unwrap();
        assert!(
            d.addrs()
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 9)
        );
    }

    #[tokio::test]
    async fn every_address_of_the_hosts_interfaces_is_refused_under_a_wildcard() {
        let own = own_addresses();
        assert!(own.iter().any(IpAddr::is_loopback), "{own:?}");
        for ip in own {
            let target = match ip {
                IpAddr::V4(v4) => format!("http://{v4}:9/"),
                IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => continue,
                IpAddr::V6(v6) => format!("http://[{v6}]:9/"),
            };
            let message = refusal(&rules(&["*"]), &target).await;
            assert!(
                message.contains("network.allow_hosts"),
                "{target}: {message}"
            );
        }
    }

    #[tokio::test]
    async fn unresolvable_names_are_reported() {
        let result = Destination::check(&rules(&["*"]), &url("http://no-such-host.invalid/")).await;
        match result {
            Err(Unreachable::Unresolved(message)) => {
                assert!(message.contains("no-such-host.invalid"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn the_pinned_resolver_answers_only_for_its_host() {
        let pinned = Pinned {
            host: "api.example.com".into(),
            addrs: Arc::from(vec!["93.184.216.34:443".parse::<SocketAddr>().unwrap()]),
        };
        let addrs: Vec<SocketAddr> = pinned
            .resolve("API.example.com.".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert_eq!(addrs, vec!["93.184.216.34:443".parse().unwrap()]);
        assert!(
            pinned
                .resolve("evil.example".parse().unwrap())
                .await
                .is_err()
        );
    }

    #[test]
    fn literal_ips_match_what_the_connector_parses() {
        assert_eq!(literal_ip("127.0.0.1"), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(literal_ip("[::1]"), Some("::1".parse().unwrap()));
        assert_eq!(literal_ip("example.com"), None);
    }
}
