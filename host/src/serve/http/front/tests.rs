//! Unit tests of `serve/http/front`.

use super::*;

fn authority(text: &str) -> axum::http::uri::Authority {
    text.parse().unwrap()
}

#[test]
fn hosts_match_by_name_and_optional_port() {
    let any_port = AllowedHost::parse("localhost").unwrap();
    assert!(any_port.matches(&authority("localhost:8080")));
    assert!(any_port.matches(&authority("LOCALHOST")));
    assert!(!any_port.matches(&authority("evil.example:8080")));
    let v6 = AllowedHost::parse("::1").unwrap();
    assert!(v6.matches(&authority("[::1]:8080")));
    let exact = AllowedHost::parse("api.example.com:443").unwrap();
    assert!(exact.matches(&authority("api.example.com:443")));
    assert!(!exact.matches(&authority("api.example.com:8443")));
    assert!(!exact.matches(&authority("api.example.com")));
}

#[test]
fn origins_match_scheme_host_and_port() {
    let local = AllowedOrigin::parse("http://localhost:*").unwrap();
    assert!(local.matches(&Origin::parse("http://localhost:3000").unwrap()));
    assert!(local.matches(&Origin::parse("http://localhost").unwrap()));
    assert!(!local.matches(&Origin::parse("https://localhost:3000").unwrap()));
    assert!(!local.matches(&Origin::parse("http://localhost.evil.example").unwrap()));
    let app = AllowedOrigin::parse("https://app.example.com:443").unwrap();
    assert!(app.matches(&Origin::parse("https://app.example.com").unwrap()));
    assert!(!app.matches(&Origin::parse("https://app.example.com:8443").unwrap()));
    let v6 = AllowedOrigin::parse("http://[::1]:*").unwrap();
    assert!(v6.matches(&Origin::parse("http://[::1]:5173").unwrap()));
    assert!(Origin::parse("null").is_none());
}
