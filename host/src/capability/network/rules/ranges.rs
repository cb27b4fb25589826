//! The special address ranges `network.allow_hosts` opens only by an
//! explicit address or range entry, and how an address is classified (IPv6
//! forms that embed an IPv4 address by the address they carry).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A range of addresses that is not the public internet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpecialRange {
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `10/8`, `172.16/12`, `192.168/16`, local-use NAT64 `64:ff9b:1::/48`.
    Private,
    /// `127/8`, `::1`.
    Loopback,
    /// `169.254/16`, `fe80::/10`.
    LinkLocal,
    /// Cloud instance metadata: `169.254.169.254`, `169.254.170.2`,
    /// `100.100.100.200`, `fd00:ec2::254`.
    CloudMetadata,
    /// Carrier-grade NAT, `100.64/10`.
    SharedAddressSpace,
    /// `192.0.0/24`.
    ProtocolAssignments,
    /// `198.18/15`.
    Benchmarking,
    /// `224/4`, `ff00::/8`.
    Multicast,
    /// `240/4` (except broadcast).
    Reserved,
    /// `255.255.255.255`.
    Broadcast,
    /// `fc00::/7`.
    UniqueLocal,
    /// `fec0::/10` (deprecated).
    SiteLocal,
    /// `100::/64`.
    DiscardOnly,
    /// `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`: not
    /// globally reachable, so a host that answers there is a local one.
    Documentation,
    /// An address of one of this host's own interfaces (see
    /// [`HostRules::check_address_in`]).
    ThisHost,
}

impl SpecialRange {
    /// A stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::Private => "private",
            Self::Loopback => "loopback",
            Self::LinkLocal => "link_local",
            Self::CloudMetadata => "cloud_metadata",
            Self::SharedAddressSpace => "shared_address_space",
            Self::ProtocolAssignments => "protocol_assignments",
            Self::Benchmarking => "benchmarking",
            Self::Multicast => "multicast",
            Self::Reserved => "reserved",
            Self::Broadcast => "broadcast",
            Self::UniqueLocal => "unique_local",
            Self::SiteLocal => "site_local",
            Self::DiscardOnly => "discard_only",
            Self::Documentation => "documentation",
            Self::ThisHost => "this_host",
        }
    }

    /// A phrase that reads after "is": "loopback", "a cloud metadata address".
    pub fn describe(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::Private => "private",
            Self::Loopback => "loopback",
            Self::LinkLocal => "link-local",
            Self::CloudMetadata => "a cloud metadata address",
            Self::SharedAddressSpace => "in the shared (carrier-grade nat) range",
            Self::ProtocolAssignments => "reserved for ietf protocol assignments",
            Self::Benchmarking => "reserved for benchmarking",
            Self::Multicast => "multicast",
            Self::Reserved => "reserved",
            Self::Broadcast => "broadcast",
            Self::UniqueLocal => "unique-local (private)",
            Self::SiteLocal => "site-local (private)",
            Self::DiscardOnly => "discard-only",
            Self::Documentation => "reserved for documentation (not globally reachable)",
            Self::ThisHost => "an address of this host's own interfaces",
        }
    }
}

impl fmt::Display for SpecialRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

const METADATA_V4: [Ipv4Addr; 3] = [
    Ipv4Addr::new(169, 254, 169, 254), // AWS, GCP, Azure, OpenStack, ...
    Ipv4Addr::new(169, 254, 170, 2),   // AWS ECS task metadata
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba Cloud
];

const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

/// The special range `ip` belongs to, or `None` for an ordinary public
/// address. IPv6 forms that embed an IPv4 address (mapped `::ffff:a.b.c.d`,
/// compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`, Teredo
/// `2001::/32`) are classified by the IPv4 address they carry. Documentation
/// ranges are special too: not globally reachable, so whatever answers
/// there is local.
pub fn classify(ip: IpAddr) -> Option<SpecialRange> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// The IPv4 address an IPv4-mapped or -compatible IPv6 address carries.
pub(super) fn embedded_v4(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => match v6.segments() {
            [0, 0, 0, 0, 0, 0xffff | 0, _, _] if !v6.is_loopback() && !v6.is_unspecified() => Some(
                Ipv4Addr::from(u32::from(v6.segments()[6]) << 16 | u32::from(v6.segments()[7])),
            ),
            _ => None,
        },
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<SpecialRange> {
    use SpecialRange::*;
    if METADATA_V4.contains(&ip) {
        return Some(CloudMetadata);
    }
    let [a, b, c, _] = ip.octets();
    let range = match (a, b, c) {
        (0, _, _) => Unspecified,
        (10, _, _) => Private,
        (100, 64..=127, _) => SharedAddressSpace,
        (127, _, _) => Loopback,
        (169, 254, _) => LinkLocal,
        (172, 16..=31, _) => Private,
        (192, 0, 0) => ProtocolAssignments,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Documentation,
        (192, 168, _) => Private,
        (198, 18..=19, _) => Benchmarking,
        (224..=239, _, _) => Multicast,
        _ if ip == Ipv4Addr::BROADCAST => Broadcast,
        (240..=255, _, _) => Reserved,
        _ => return None,
    };
    Some(range)
}

fn classify_v6(ip: Ipv6Addr) -> Option<SpecialRange> {
    use SpecialRange::*;
    if ip.is_unspecified() {
        return Some(Unspecified);
    }
    if ip.is_loopback() {
        return Some(Loopback);
    }
    if ip == METADATA_V6 {
        return Some(CloudMetadata);
    }
    let s = ip.segments();
    let low32 = Ipv4Addr::from(u32::from(s[6]) << 16 | u32::from(s[7]));
    match s {
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated).
        [0, 0, 0, 0, 0, 0xffff | 0, _, _] => classify_v4(low32),
        // ::ffff:0:a.b.c.d (SIIT translated).
        [0, 0, 0, 0, 0xffff, 0, _, _] => classify_v4(low32),
        // NAT64 well-known prefix.
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => classify_v4(low32),
        // Local-use NAT64 (RFC 8215): translates to anything, including private.
        [0x64, 0xff9b, 1, ..] => Some(Private),
        // 6to4 embeds the IPv4 address in bits 16..48.
        [0x2002, high, low, ..] => {
            classify_v4(Ipv4Addr::from(u32::from(high) << 16 | u32::from(low)))
        }
        // Teredo embeds the client address, bit-inverted, in the low 32 bits.
        [0x2001, 0, ..] => classify_v4(Ipv4Addr::from(!u32::from(low32))),
        [0x100, 0, 0, 0, ..] => Some(DiscardOnly),
        [0x2001, 0xdb8, ..] => Some(Documentation),
        [first, ..] if first & 0xfe00 == 0xfc00 => Some(UniqueLocal),
        [first, ..] if first & 0xffc0 == 0xfe80 => Some(LinkLocal),
        [first, ..] if first & 0xffc0 == 0xfec0 => Some(SiteLocal),
        [first, ..] if first & 0xff00 == 0xff00 => Some(Multicast),
        _ => None,
    }
}
