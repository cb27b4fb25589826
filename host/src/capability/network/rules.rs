//! Outbound network rules: `network.allow_hosts` patterns, the check of a URL's
//! host and of every address it resolves to, and the special-address ranges
//! (private, loopback, link-local, metadata, ...) that need explicit consent.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// One `network.allow_hosts` entry.
///
/// Forms, each optionally followed by `:port` (IPv6 as `[::1]:8080`):
/// - `api.github.com`: exactly that host (case-insensitive, trailing dot ignored);
/// - `*.wikipedia.org`: any subdomain at any depth, but not `wikipedia.org` itself;
/// - `*`: any host;
/// - `127.0.0.1`, `::1`, `[::1]`: an IP address;
/// - `10.0.0.0/8`, `fc00::/7`: a CIDR range.
///
/// Only the last two forms can open private, loopback, link-local or metadata
/// addresses (see [`HostRules::check_address`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    text: String,
    target: Target,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Any,
    Name(String),
    /// The suffix after `*.`.
    Subdomains(String),
    Ip(IpAddr),
    Cidr(Cidr),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    fn contains(self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(network), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(ip) & mask == u32::from(network)
            }
            (IpAddr::V6(network), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(ip) & mask == u128::from(network)
            }
            _ => false,
        }
    }
}

/// A host as the checks see it: a lower-case name or an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HostRef<'a> {
    Name(&'a str),
    Ip(IpAddr),
}

/// Lower-cases `host`, drops brackets around an IPv6 literal and one trailing dot.
fn normalize_host(host: &str) -> String {
    let host = host.trim();
    let host = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    let host = host.strip_suffix('.').unwrap_or(host);
    host.to_ascii_lowercase()
}

fn host_ref(normalized: &str) -> HostRef<'_> {
    match normalized.parse::<IpAddr>() {
        Ok(ip) => HostRef::Ip(ip),
        Err(_) => HostRef::Name(normalized),
    }
}

impl HostPattern {
    /// Parses one `network.allow_hosts` entry.
    pub fn parse(text: &str) -> Result<Self, HostPatternError> {
        let error = |problem: &str| HostPatternError {
            entry: text.to_owned(),
            problem: problem.to_owned(),
        };
        let lowered = text.trim().to_ascii_lowercase();
        if lowered.is_empty() {
            return Err(error("is empty"));
        }
        if lowered.contains("://") {
            return Err(error(
                "includes a scheme; write only the host, e.g. \"api.github.com\"",
            ));
        }
        let (host, port) = split_port(&lowered).map_err(|problem| error(&problem))?;
        let target = parse_target(host).map_err(|problem| error(&problem))?;
        Ok(Self {
            text: text.trim().to_owned(),
            target,
            port,
        })
    }

    /// The entry as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The port this entry is limited to, if any.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// True for an IP address or CIDR entry: the only kind that can open a
    /// special address.
    pub fn is_address(&self) -> bool {
        matches!(self.target, Target::Ip(_) | Target::Cidr(_))
    }

    fn port_matches(&self, port: u16) -> bool {
        self.port.is_none_or(|allowed| allowed == port)
    }

    fn matches_host(&self, host: HostRef<'_>) -> bool {
        match (&self.target, host) {
            (Target::Any, _) => true,
            (Target::Name(name), HostRef::Name(host)) => name == host,
            (Target::Subdomains(suffix), HostRef::Name(host)) => {
                host.strip_suffix(suffix.as_str()).is_some_and(|subdomain| {
                    !subdomain.is_empty()
                        && !subdomain.starts_with('.')
                        && !subdomain.ends_with('.')
                })
            }
            (Target::Ip(_) | Target::Cidr(_), HostRef::Ip(ip)) => self.matches_ip(ip),
            _ => false,
        }
    }

    /// Matches an address against an IP or CIDR entry; IPv4-mapped IPv6
    /// addresses match their IPv4 form too.
    fn matches_ip(&self, ip: IpAddr) -> bool {
        let canonical = ip.to_canonical();
        match self.target {
            Target::Ip(allowed) => allowed == ip || allowed == canonical,
            Target::Cidr(cidr) => cidr.contains(ip) || cidr.contains(canonical),
            _ => false,
        }
    }
}

/// Splits `host[:port]`, `[v6][:port]` or a bare IPv6 address or range.
fn split_port(entry: &str) -> Result<(&str, Option<u16>), String> {
    if let Some(rest) = entry.strip_prefix('[') {
        let (inner, after) = rest
            .split_once(']')
            .ok_or_else(|| "has '[' without a closing ']'".to_owned())?;
        return match after {
            "" => Ok((inner, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((inner, Some(parse_port(port)?))),
                None => Err(format!("has {after:?} after ']'; write \"[address]:port\"")),
            },
        };
    }
    match entry.matches(':').count() {
        0 => Ok((entry, None)),
        1 => {
            let (host, port) = entry.split_once(':').unwrap_or((entry, ""));
            Ok((host, Some(parse_port(port)?)))
        }
        // Bare IPv6: no port (write `[::1]:8080` for one).
        _ => Ok((entry, None)),
    }
}

fn parse_port(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(port) if port != 0 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(port),
        _ => Err(format!("has port {text:?}; use a number from 1 to 65535")),
    }
}

fn parse_target(host: &str) -> Result<Target, String> {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host == "*" {
        return Ok(Target::Any);
    }
    if host.contains('/') {
        return parse_cidr(host).map(Target::Cidr);
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(Target::Ip(ip.to_canonical()));
    }
    if host.contains(':') {
        return Err("is not a valid IPv6 address".to_owned());
    }
    if let Some(suffix) = host.strip_prefix("*.") {
        validate_name(suffix)?;
        return Ok(Target::Subdomains(format!(".{suffix}")));
    }
    if host.contains('*') {
        return Err(
            "has '*' inside a name; use \"*\" alone or a leading \"*.\" as in \"*.example.com\""
                .to_owned(),
        );
    }
    validate_name(host)?;
    Ok(Target::Name(host.to_owned()))
}

fn parse_cidr(text: &str) -> Result<Cidr, String> {
    let bad =
        || format!("is neither a host name nor a CIDR range like \"10.0.0.0/8\" (found {text:?})");
    let (address, prefix) = text.split_once('/').ok_or_else(bad)?;
    let address: IpAddr = address.parse().map_err(|_| bad())?;
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|_| prefix.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(bad)?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return Err(format!("has prefix length /{prefix}, longer than {max}"));
    }
    let network = match address {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
    };
    Ok(Cidr { network, prefix })
}

fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 253 {
        return Err("is not a valid host name (1 to 253 characters)".to_owned());
    }
    if !name.is_ascii() {
        return Err("is not ASCII; write internationalized names in punycode (xn--...)".to_owned());
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err("has an empty or over-long label between dots".to_owned());
        }
        if let Some(bad) = label
            .chars()
            .find(|&c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        {
            return Err(format!(
                "contains {bad:?}, which is not allowed in a host name"
            ));
        }
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return Err("looks like an IP address but is not a valid one".to_owned());
    }
    Ok(())
}

impl FromStr for HostPattern {
    type Err = HostPatternError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A `network.allow_hosts` entry that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("network.allow_hosts entry {entry:?} {problem}")]
pub struct HostPatternError {
    /// The entry as written.
    pub entry: String,
    /// What is wrong with it.
    pub problem: String,
}

/// A profile's outbound network rules. Defaults deny: with no entries no host
/// is reachable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostRules {
    /// The `network.allow_hosts` entries.
    pub allow_hosts: Vec<HostPattern>,
}

impl HostRules {
    /// Parses the `network.allow_hosts` entries.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, HostPatternError> {
        let allow_hosts = entries
            .iter()
            .map(|entry| HostPattern::parse(entry.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(Self { allow_hosts })
    }

    /// Whether an entry names `host` itself: that name, or an address or
    /// range holding it (`*` and `*.domain` entries do not count).
    pub fn names(&self, host: &str) -> bool {
        let host = normalize_host(host);
        let ip = host.parse::<IpAddr>().ok();
        self.allow_hosts
            .iter()
            .any(|pattern| match (&pattern.target, ip) {
                (Target::Name(name), _) => *name == host,
                (Target::Ip(address), Some(ip)) => *address == ip,
                (Target::Cidr(range), Some(ip)) => range.contains(ip),
                _ => false,
            })
    }

    /// Checks a URL's host (name or IP literal, brackets allowed) and port
    /// against the allow list. Run it for the first request and every redirect.
    pub fn check_host(&self, host: &str, port: u16) -> Result<(), NetworkRefusal> {
        let normalized = normalize_host(host);
        if normalized.is_empty() {
            return Err(NetworkRefusal::HostNotAllowed { host: normalized });
        }
        let target = host_ref(&normalized);
        let mut other_port = false;
        for pattern in &self.allow_hosts {
            if pattern.matches_host(target) {
                if pattern.port_matches(port) {
                    return Ok(());
                }
                other_port = true;
            }
        }
        Err(if other_port {
            NetworkRefusal::PortNotAllowed {
                host: normalized,
                port,
            }
        } else {
            NetworkRefusal::HostNotAllowed { host: normalized }
        })
    }

    /// Checks one address `host` resolved to (or an IP literal host) before
    /// connecting. A special address (see [`classify`]) is refused unless an IP
    /// or CIDR entry covers it (and its port, if the entry names one): a name or
    /// wildcard entry never opens one, so `*` cannot reach `169.254.169.254`.
    ///
    /// Call [`HostRules::check_host`] first; this does not repeat it.
    pub fn check_address(&self, host: &str, port: u16, ip: IpAddr) -> Result<(), NetworkRefusal> {
        self.check_address_in(host, port, ip, &[])
    }

    /// [`HostRules::check_address`], with `own` the addresses of this host's
    /// interfaces (read when checking, since they change): one of them, in
    /// any IPv6 spelling that embeds it, is special as [`SpecialRange::ThisHost`]
    /// even where its range is public, so a command cannot reach the host's
    /// own services by its public name.
    pub fn check_address_in(
        &self,
        host: &str,
        port: u16,
        ip: IpAddr,
        own: &[IpAddr],
    ) -> Result<(), NetworkRefusal> {
        let plain = embedded_v4(ip).map_or(ip, IpAddr::V4);
        let is_own = own
            .iter()
            .any(|&a| a == ip || embedded_v4(a).map_or(a, IpAddr::V4) == plain);
        let Some(range) = classify(ip).or(is_own.then_some(SpecialRange::ThisHost)) else {
            return Ok(());
        };
        let explicit = self
            .allow_hosts
            .iter()
            .any(|p| p.is_address() && p.matches_ip(ip) && p.port_matches(port));
        if explicit {
            Ok(())
        } else {
            Err(NetworkRefusal::SpecialAddress {
                host: normalize_host(host),
                ip,
                range,
            })
        }
    }
}

/// Why an outbound request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkRefusal {
    /// No entry matches the host.
    #[error(
        "host {host:?} is not in the profile's network.allow_hosts; \
         add it (or a pattern such as \"*.example.com\") to allow it"
    )]
    HostNotAllowed {
        /// The normalized host.
        host: String,
    },
    /// Entries match the host, but only on other ports.
    #[error(
        "host {host:?} port {port} is not in the profile's network.allow_hosts \
         (the host is allowed on other ports only); add \"host:{port}\" or drop the port"
    )]
    PortNotAllowed {
        /// The normalized host.
        host: String,
        /// The refused port.
        port: u16,
    },
    /// The address is special and no IP or CIDR entry names it.
    #[error(
        "address {ip} of host {host:?} is {range}; private, loopback, link-local and metadata \
         addresses are refused unless network.allow_hosts lists the address explicitly"
    )]
    SpecialAddress {
        /// The normalized host.
        host: String,
        /// The refused address.
        ip: IpAddr,
        /// Why the address is special.
        range: SpecialRange,
    },
}

mod ranges;

use ranges::embedded_v4;
pub use ranges::{SpecialRange, classify};

#[cfg(test)]
mod tests;
