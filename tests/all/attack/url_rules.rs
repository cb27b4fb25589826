//! Attack tests: a URL parameter rule bounds every request the tool makes,
//! each redirect hop included, and its `*` in the host stays within one
//! label of the parsed URL's host (never across `.`, `:`, `/` or `@`).

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use serde_json::json;
use toolhost::policy::layers::CallContext;
use toolhost::policy::{ArgumentRule, Matcher};

use super::server::{Server, error_of};

/// A server on 127.0.0.2: `/allowed/go?to=X` redirects to `X`, anything
/// else answers `served <path>`; the paths it served.
fn redirecting_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let served = seen.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let text = String::from_utf8_lossy(&head).to_string();
            let path = text.split(' ').nth(1).unwrap_or_default().to_string();
            let answer = match path.strip_prefix("/allowed/go?to=") {
                Some(to) => format!(
                    "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\n\
                     connection: close\r\n\r\n"
                ),
                None => {
                    served.lock().unwrap().push(path.clone());
                    let body = format!("served {path}");
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                }
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (port, seen)
}

#[tokio::test]
async fn a_redirect_does_not_lead_out_of_a_url_rule() {
    let (port, served) = redirecting_server();
    let server = super::params::url_rule_server(port).await;
    let base = format!("http://127.0.0.2:{port}");
    // A redirect that stays under the rule is followed.
    let inside = server
        .call(
            None,
            None,
            "http_request",
            json!({ "url": format!("{base}/allowed/go?to=/allowed/ok") }),
        )
        .await;
    assert!(
        inside.to_string().contains("served /allowed/ok"),
        "{inside}"
    );
    // One that leaves it is refused at the hop, naming the rule.
    for to in ["/private/db", "/allowed/../private/db", "/%61llowed/x"] {
        let url = format!("{base}/allowed/go?to={to}");
        let result = server
            .call(None, None, "http_request", json!({ "url": url }))
            .await;
        let error = error_of(&result).unwrap_or_else(|| panic!("{to}: {result}"));
        assert!(
            error.contains("tools.http_request.arguments"),
            "{to}: {error}"
        );
    }
    let paths = served.lock().unwrap().clone();
    assert_eq!(paths, ["/allowed/ok"], "{paths:?}");
}

#[tokio::test]
async fn a_star_in_a_url_rules_host_stays_in_one_label() {
    let (port, served) = redirecting_server();
    let config = format!(
        r#"
default_profile = "p"
[profiles.p]
allow = ["network:fetch"]
network.allow_hosts = ["*", "127.0.0.2:{port}"]
[profiles.p.tools.http_request.arguments]
"/url" = ["http://*.example.com/*"]
"#
    );
    let server = Server::start(&config, |_| {}).await;
    server.wait_for_tool(None, "http_request").await;
    let base = format!("http://127.0.0.2:{port}");
    for url in [
        format!("{base}/private.txt?.example.com/"),
        format!("{base}/x.example.com/"),
        format!("{base}/#.example.com/"),
    ] {
        let result = server
            .call(None, None, "http_request", json!({ "url": url }))
            .await;
        let error = error_of(&result).unwrap_or_else(|| panic!("{url}: {result}"));
        assert!(error.contains("matches none of"), "{url}: {error}");
    }
    assert!(served.lock().unwrap().is_empty());
}

/// Random URLs against `http://*.example.com/*`: accepted only when the
/// parsed host is one label under `example.com`, on the default port.
#[test]
fn url_rule_stars_never_cross_the_authority() {
    let rule = ArgumentRule {
        key: "k".into(),
        pointer: "/url".into(),
        matcher: Matcher::Globs(vec!["http://*.example.com/*".into()]),
    };
    let context = CallContext {
        workspace: std::path::Path::new("/w"),
        files: false,
    };
    let piece = prop_oneof![
        Just("example.com"),
        Just(".example.com"),
        Just("a"),
        Just("evil.org"),
        Just("."),
        Just(":80"),
        Just(":8080"),
        Just("@"),
        Just("/"),
        Just("?"),
        Just("#"),
        Just("127.0.0.2"),
    ];
    let case = prop::collection::vec(piece, 1..8);
    let mut runner = TestRunner::new(Config {
        cases: 4000,
        rng_seed: RngSeed::Fixed(7),
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&case, |pieces| {
        let url = format!("http://{}", pieces.concat());
        if rule.refuses(&json!({ "url": url }), &context).is_none() {
            let parsed = reqwest::Url::parse(&url).expect("an accepted URL parses");
            let host = parsed.host_str().unwrap_or_default();
            let label = host.strip_suffix(".example.com");
            prop_assert!(
                label.is_some_and(|l| !l.is_empty() && !l.contains('.')),
                "{} (host {})",
                url,
                host
            );
            prop_assert_eq!(parsed.port(), None, "{}", url);
        }
        Ok(())
    });
    if let Err(error) = result {
        panic!("{error}");
    }
    for fine in ["http://api.example.com/", "http://a.example.com/x?y=1"] {
        assert!(
            rule.refuses(&json!({ "url": fine }), &context).is_none(),
            "{fine}"
        );
    }
}
