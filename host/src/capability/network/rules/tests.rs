//! Unit tests of `capability/network/rules`.

use super::*;

fn rules(entries: &[&str]) -> HostRules {
    HostRules::parse(entries).expect("valid test entries")
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("valid test address")
}

#[test]
fn exact_names_match_case_insensitively_with_trailing_dot() {
    let rules = rules(&["api.github.com"]);
    assert_eq!(rules.check_host("api.github.com", 443), Ok(()));
    assert_eq!(rules.check_host("API.GitHub.com", 443), Ok(()));
    assert_eq!(rules.check_host("api.github.com.", 80), Ok(()));
    assert!(rules.check_host("github.com", 443).is_err());
    assert!(rules.check_host("x.api.github.com", 443).is_err());
    assert!(rules.check_host("api.github.com.evil.com", 443).is_err());
    let upper = self::rules(&["API.GITHUB.COM."]);
    assert_eq!(upper.check_host("api.github.com", 443), Ok(()));
}

#[test]
fn wildcard_matches_subdomains_at_any_depth_but_not_the_apex() {
    let rules = rules(&["*.wikipedia.org"]);
    assert_eq!(rules.check_host("en.wikipedia.org", 443), Ok(()));
    assert_eq!(rules.check_host("a.b.c.wikipedia.org", 443), Ok(()));
    assert!(rules.check_host("wikipedia.org", 443).is_err());
    assert!(rules.check_host("evilwikipedia.org", 443).is_err());
    assert!(rules.check_host("wikipedia.org.evil.com", 443).is_err());
    assert!(rules.check_host(".wikipedia.org", 443).is_err());
}

#[test]
fn star_matches_every_host() {
    let rules = rules(&["*"]);
    assert_eq!(rules.check_host("example.com", 443), Ok(()));
    assert_eq!(rules.check_host("10.0.0.1", 80), Ok(()));
    assert_eq!(rules.check_host("[::1]", 80), Ok(()));
}

#[test]
fn refusal_names_the_host_and_the_setting() {
    let refusal = rules(&["api.github.com"])
        .check_host("Evil.com", 443)
        .unwrap_err();
    assert_eq!(
        refusal,
        NetworkRefusal::HostNotAllowed {
            host: "evil.com".into()
        }
    );
    assert!(
        refusal
            .to_string()
            .starts_with("host \"evil.com\" is not in the profile's network.allow_hosts")
    );
    assert!(HostRules::default().check_host("example.com", 443).is_err());
}

#[test]
fn ports_restrict_an_entry() {
    let rules = rules(&["api.example.com:8443", "*.internal.dev:80", "*:9999"]);
    assert_eq!(rules.check_host("api.example.com", 8443), Ok(()));
    let refusal = rules.check_host("api.example.com", 443).unwrap_err();
    assert_eq!(
        refusal,
        NetworkRefusal::PortNotAllowed {
            host: "api.example.com".into(),
            port: 443
        }
    );
    assert!(refusal.to_string().contains("port 443"));
    assert_eq!(rules.check_host("x.internal.dev", 80), Ok(()));
    assert!(rules.check_host("x.internal.dev", 81).is_err());
    assert_eq!(rules.check_host("anything.org", 9999), Ok(()));
}

#[test]
fn ip_and_cidr_entries_match_ip_hosts_only() {
    let rules = rules(&["127.0.0.1", "10.0.0.0/8", "[::1]:8080", "fd00::/8"]);
    assert_eq!(rules.check_host("127.0.0.1", 80), Ok(()));
    assert_eq!(rules.check_host("10.200.3.4", 443), Ok(()));
    assert!(rules.check_host("11.0.0.1", 443).is_err());
    assert_eq!(rules.check_host("[::1]", 8080), Ok(()));
    assert_eq!(rules.check_host("::1", 8080), Ok(()));
    assert!(rules.check_host("[::1]", 80).is_err());
    assert_eq!(rules.check_host("[fd12::1]", 443), Ok(()));
    assert!(rules.check_host("localhost", 80).is_err());
}

#[test]
fn pattern_forms_parse() {
    for entry in [
        "api.github.com",
        "*.wikipedia.org",
        "*",
        "*:443",
        "127.0.0.1",
        "127.0.0.1:8080",
        "::1",
        "[::1]",
        "[::1]:8080",
        "10.0.0.0/8",
        "10.0.0.0/8:443",
        "fc00::/7",
        "[fc00::/7]:443",
        "my_host.local",
        "xn--bcher-kva.example",
    ] {
        assert!(HostPattern::parse(entry).is_ok(), "{entry}");
    }
    assert!(HostPattern::parse("[::1]:8080").unwrap().is_address());
    assert_eq!(HostPattern::parse("[::1]:8080").unwrap().port(), Some(8080));
    assert!(!HostPattern::parse("*").unwrap().is_address());
}

#[test]
fn bad_entries_are_rejected_with_the_entry_named() {
    let cases = [
        ("", "empty"),
        ("https://api.github.com", "scheme"),
        ("api.*.com", "'*' inside"),
        ("*github.com", "'*' inside"),
        ("api.github.com:0", "port"),
        ("api.github.com:http", "port"),
        ("api.github.com:70000", "port"),
        ("10.0.0.0/33", "prefix length"),
        ("api.github.com/repos", "cidr"),
        ("[::1", "closing"),
        ("[::1]8080", "after ']'"),
        ("a..b", "label"),
        ("bad host", "not allowed"),
        ("bücher.de", "punycode"),
        ("127.1", "ip address"),
        ("1:2:3", "ipv6"),
    ];
    for (entry, expected) in cases {
        let error = HostPattern::parse(entry).unwrap_err();
        assert!(
            error
                .to_string()
                .to_lowercase()
                .contains(&expected.to_lowercase()),
            "{entry}: {error}"
        );
        assert_eq!(error.entry, entry);
    }
}

#[test]
fn classify_ipv4_ranges() {
    let cases = [
        ("0.0.0.0", Some(SpecialRange::Unspecified)),
        ("0.1.2.3", Some(SpecialRange::Unspecified)),
        ("10.1.2.3", Some(SpecialRange::Private)),
        ("172.16.0.1", Some(SpecialRange::Private)),
        ("172.31.255.255", Some(SpecialRange::Private)),
        ("172.32.0.1", None),
        ("192.168.1.1", Some(SpecialRange::Private)),
        ("127.0.0.1", Some(SpecialRange::Loopback)),
        ("127.255.0.9", Some(SpecialRange::Loopback)),
        ("169.254.0.5", Some(SpecialRange::LinkLocal)),
        ("169.254.169.254", Some(SpecialRange::CloudMetadata)),
        ("169.254.170.2", Some(SpecialRange::CloudMetadata)),
        ("100.100.100.200", Some(SpecialRange::CloudMetadata)),
        ("100.64.0.1", Some(SpecialRange::SharedAddressSpace)),
        ("100.127.255.255", Some(SpecialRange::SharedAddressSpace)),
        ("100.128.0.1", None),
        ("192.0.0.8", Some(SpecialRange::ProtocolAssignments)),
        ("198.18.0.1", Some(SpecialRange::Benchmarking)),
        ("198.19.255.1", Some(SpecialRange::Benchmarking)),
        ("198.20.0.1", None),
        ("224.0.0.1", Some(SpecialRange::Multicast)),
        ("239.255.255.250", Some(SpecialRange::Multicast)),
        ("240.0.0.1", Some(SpecialRange::Reserved)),
        ("255.255.255.255", Some(SpecialRange::Broadcast)),
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        ("192.0.2.1", Some(SpecialRange::Documentation)),
    ];
    for (address, expected) in cases {
        assert_eq!(classify(ip(address)), expected, "{address}");
    }
}

#[test]
fn classify_ipv6_ranges() {
    let cases = [
        ("::", Some(SpecialRange::Unspecified)),
        ("::1", Some(SpecialRange::Loopback)),
        ("fc00::1", Some(SpecialRange::UniqueLocal)),
        ("fdff::1", Some(SpecialRange::UniqueLocal)),
        ("fd00:ec2::254", Some(SpecialRange::CloudMetadata)),
        ("fe80::1", Some(SpecialRange::LinkLocal)),
        ("febf::1", Some(SpecialRange::LinkLocal)),
        ("fec0::1", Some(SpecialRange::SiteLocal)),
        ("ff02::1", Some(SpecialRange::Multicast)),
        ("100::1", Some(SpecialRange::DiscardOnly)),
        ("64:ff9b:1::1", Some(SpecialRange::Private)),
        ("2606:4700:4700::1111", None),
        ("2001:db8::1", Some(SpecialRange::Documentation)),
    ];
    for (address, expected) in cases {
        assert_eq!(classify(ip(address)), expected, "{address}");
    }
}

#[test]
fn classify_embedded_ipv4_by_what_it_carries() {
    let cases = [
        ("::ffff:127.0.0.1", Some(SpecialRange::Loopback)),
        ("::ffff:169.254.169.254", Some(SpecialRange::CloudMetadata)),
        ("::ffff:10.0.0.1", Some(SpecialRange::Private)),
        ("::ffff:8.8.8.8", None),
        ("::127.0.0.1", Some(SpecialRange::Loopback)),
        ("::ffff:0:192.168.0.1", Some(SpecialRange::Private)),
        ("64:ff9b::7f00:1", Some(SpecialRange::Loopback)),
        ("64:ff9b::a9fe:a9fe", Some(SpecialRange::CloudMetadata)),
        ("64:ff9b::808:808", None),
        ("2002:7f00:1::", Some(SpecialRange::Loopback)),
        ("2002:c0a8:101::1", Some(SpecialRange::Private)),
        ("2002:808:808::1", None),
        // Teredo client 127.0.0.1, inverted: 80ff:fffe.
        (
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            Some(SpecialRange::Loopback),
        ),
    ];
    for (address, expected) in cases {
        assert_eq!(classify(ip(address)), expected, "{address}");
    }
}

#[test]
fn public_addresses_pass_the_address_check() {
    let rules = rules(&["*"]);
    assert_eq!(
        rules.check_address("example.com", 443, ip("93.184.216.34")),
        Ok(())
    );
    assert_eq!(
        rules.check_address("example.com", 443, ip("2606:2800::1")),
        Ok(())
    );
}

#[test]
fn wildcards_and_names_never_open_special_addresses() {
    let rules = rules(&["*", "localhost", "*.internal.corp"]);
    let refusal = rules
        .check_address("localhost", 80, ip("127.0.0.1"))
        .unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "address 127.0.0.1 of host \"localhost\" is loopback; private, loopback, link-local \
             and metadata addresses are refused unless network.allow_hosts lists the address explicitly"
    );
    assert!(
        rules
            .check_address("db.internal.corp", 5432, ip("10.0.0.5"))
            .is_err()
    );
    let metadata = rules
        .check_address("169.254.169.254", 80, ip("169.254.169.254"))
        .unwrap_err();
    assert!(metadata.to_string().contains("is a cloud metadata address"));
    assert!(
        rules
            .check_address("x", 80, ip("::ffff:127.0.0.1"))
            .is_err()
    );
    assert!(rules.check_address("[::1]", 80, ip("::1")).is_err());
}

#[test]
fn explicit_addresses_open_special_addresses() {
    let rules = rules(&["127.0.0.1:8080", "10.0.0.0/8", "[::1]", "169.254.169.254"]);
    assert_eq!(
        rules.check_address("localhost", 8080, ip("127.0.0.1")),
        Ok(())
    );
    assert!(
        rules
            .check_address("localhost", 8081, ip("127.0.0.1"))
            .is_err()
    );
    assert!(
        rules
            .check_address("localhost", 8080, ip("127.0.0.2"))
            .is_err()
    );
    assert_eq!(rules.check_address("db", 5432, ip("10.9.8.7")), Ok(()));
    assert!(rules.check_address("db", 5432, ip("192.168.0.1")).is_err());
    assert_eq!(rules.check_address("localhost", 80, ip("::1")), Ok(()));
    assert_eq!(rules.check_address("m", 80, ip("169.254.169.254")), Ok(()));
}

#[test]
fn mapped_addresses_match_their_ipv4_entry() {
    let rules = rules(&["127.0.0.1", "10.0.0.0/8"]);
    assert_eq!(rules.check_address("x", 80, ip("::ffff:127.0.0.1")), Ok(()));
    assert_eq!(rules.check_address("x", 80, ip("::ffff:10.1.1.1")), Ok(()));
    assert_eq!(rules.check_host("::ffff:127.0.0.1", 80), Ok(()));
    // An entry written in mapped form covers the plain IPv4 address too.
    let mapped = self::rules(&["::ffff:127.0.0.1"]);
    assert_eq!(mapped.check_address("x", 80, ip("127.0.0.1")), Ok(()));
}

#[test]
fn cidr_entries_mask_host_bits() {
    let rules = rules(&["10.1.2.3/16", "0.0.0.0/0:443"]);
    assert_eq!(rules.check_address("x", 80, ip("10.1.200.1")), Ok(()));
    assert_eq!(rules.check_address("x", 443, ip("192.168.1.1")), Ok(()));
    assert!(rules.check_address("x", 80, ip("192.168.1.1")).is_err());
    let v6 = self::rules(&["fe80::/10"]);
    assert_eq!(v6.check_address("x", 80, ip("fe80::abcd")), Ok(()));
    assert!(v6.check_address("x", 80, ip("fc00::1")).is_err());
}

#[test]
fn range_names_are_stable() {
    assert_eq!(SpecialRange::CloudMetadata.as_str(), "cloud_metadata");
    assert_eq!(SpecialRange::LinkLocal.to_string(), "link-local");
}

#[test]
fn the_hosts_own_addresses_are_special_in_every_spelling() {
    let own = [ip("8.8.4.4"), ip("2606:4700::6810:84e5")];
    let wildcard = HostRules::parse(&["*"]).unwrap();
    for asked in [
        "8.8.4.4",
        "::ffff:8.8.4.4",
        "::8.8.4.4",
        "2606:4700::6810:84e5",
    ] {
        let refused = wildcard.check_address_in("h", 80, ip(asked), &own);
        assert!(
            matches!(
                refused,
                Err(NetworkRefusal::SpecialAddress {
                    range: SpecialRange::ThisHost,
                    ..
                })
            ),
            "{asked}: {refused:?}"
        );
    }
    assert!(
        wildcard
            .check_address_in("h", 80, ip("8.8.8.8"), &own)
            .is_ok()
    );
    let named = HostRules::parse(&["*", "8.8.4.4:80"]).unwrap();
    assert!(named.check_address_in("h", 80, ip("8.8.4.4"), &own).is_ok());
    assert!(
        named
            .check_address_in("h", 81, ip("8.8.4.4"), &own)
            .is_err()
    );
}
