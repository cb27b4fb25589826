//! Attack tests: params (see mod.rs). Parameter rules judge what the tool
//! will use: a URL rule takes canonical URLs only (so `/allowed/../private`
//! and its encodings never reach the server), and a path rule on a file
//! tool holds for the path the file capability resolves (`..`, symlinks).

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use serde_json::json;
use toolhost::policy::layers::CallContext;
use toolhost::policy::{ArgumentRule, Matcher};

use super::server::{Server, error_of};

/// A server on 127.0.0.2 answering every request with 200; the request
/// lines it received.
fn recording_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let lines = seen.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let text = String::from_utf8_lossy(&head);
            lines
                .lock()
                .unwrap()
                .push(text.lines().next().unwrap_or_default().to_string());
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    (port, seen)
}

/// A server whose `http_request` may fetch only
/// `http://127.0.0.2:PORT/allowed/*` (a URL parameter rule).
pub(super) async fn url_rule_server(port: u16) -> Server {
    let config = format!(
        r#"
default_profile = "p"
[profiles.p]
allow = ["network:fetch"]
network.allow_hosts = ["127.0.0.2:{port}"]
[profiles.p.tools.http_request.arguments]
"/url" = ["http://127.0.0.2:{port}/allowed/*"]
"#
    );
    let server = Server::start(&config, |_| {}).await;
    server.wait_for_tool(None, "http_request").await;
    server
}

#[tokio::test]
async fn a_url_rule_lets_no_other_spelling_of_a_path_through() {
    let (port, seen) = recording_server();
    let server = url_rule_server(port).await;
    let base = format!("http://127.0.0.2:{port}");
    let fine = server
        .call(
            None,
            None,
            "http_request",
            json!({ "url": format!("{base}/allowed/x") }),
        )
        .await;
    assert!(error_of(&fine).is_none(), "{fine}");
    for path in [
        "/allowed/../private",
        "/allowed/%2e%2e/private",
        "/allowed/%2E%2e/private",
        "/allowed/.%2e/private",
        "/allowed/./../private",
        "/allowed\\..\\private",
        "/%61llowed/x",
    ] {
        let url = format!("{base}{path}");
        let result = server
            .call(None, None, "http_request", json!({ "url": url }))
            .await;
        let error = error_of(&result).unwrap_or_else(|| panic!("{url}: {result}"));
        assert!(error.contains("canonical form"), "{url}: {error}");
    }
    let lines = seen.lock().unwrap().clone();
    assert_eq!(lines, ["GET /allowed/x HTTP/1.1"], "{lines:?}");
}

/// Arguments given as text reach the guest as that text, and are checked as
/// the value the host's JSON reader makes of it. serde_json's raw-value
/// token as a key made the two differ (the rule judged the string in the
/// token's text, the guest got an object): such arguments are refused
/// before any rule or tool sees them.
#[tokio::test]
async fn a_rule_judges_the_arguments_the_guest_gets() {
    let (port, seen) = recording_server();
    let server = url_rule_server(port).await;
    let url = format!("\"http://127.0.0.2:{port}/allowed/x\"");
    for arguments in [
        json!({ "url": { "$serde_json::private::RawValue": url } }),
        json!({ "url": "http://x/", "pad": { "\u{24}serde_json::private::Number": "1" } }),
    ] {
        let result = server.call(None, None, "http_request", arguments).await;
        let error = error_of(&result).unwrap_or_else(|| panic!("{result}"));
        assert!(
            error.starts_with("invalid_json:") && error.contains("rename the key"),
            "{error}"
        );
    }
    assert!(seen.lock().unwrap().is_empty());
    // The same text as a value is any text.
    let fine = server
        .call(
            None,
            None,
            "http_request",
            json!({ "url": format!("http://127.0.0.2:{port}/allowed/$serde_json::private::RawValue") }),
        )
        .await;
    assert!(error_of(&fine).is_none(), "{fine}");
}

#[tokio::test]
async fn a_path_rule_holds_for_the_resolved_path() {
    let config = r#"
default_profile = "p"
audit = "audit.jsonl"
[profiles.p]
allow = ["file:read"]
file.read = ["."]
[profiles.p.tools.read_file.arguments]
"/path" = ["docs/**"]
"#;
    let server = Server::start(config, |root| {
        std::fs::create_dir(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/ok.md"), "the docs").unwrap();
        std::fs::write(root.join("secret.txt"), "the secret").unwrap();
        std::os::unix::fs::symlink("../secret.txt", root.join("docs/link")).unwrap();
    })
    .await;
    server.wait_for_tool(None, "read_file").await;
    let ok = server
        .call(None, None, "read_file", json!({ "path": "docs/ok.md" }))
        .await;
    assert!(ok.to_string().contains("the docs"), "{ok}");
    for path in ["docs/../secret.txt", "docs/link", "docs/./../secret.txt"] {
        let result = server
            .call(None, None, "read_file", json!({ "path": path }))
            .await;
        assert!(error_of(&result).is_some(), "{path}: {result}");
        assert!(
            !result.to_string().contains("the secret"),
            "{path}: {result}"
        );
    }
    let audit = std::fs::read_to_string(server.root.join("audit.jsonl")).unwrap_or_default();
    assert!(
        audit.contains("is outside what profiles.p.tools.read_file.arguments./path"),
        "{audit}"
    );
}

/// A path segment that may stand for `.` or `..`, in one of its spellings.
fn dots() -> impl Strategy<Value = String> {
    let dot = prop_oneof![Just("."), Just("%2e"), Just("%2E")];
    prop_oneof![
        dot.clone().prop_map(String::from),
        (dot.clone(), dot).prop_map(|(a, b)| format!("{a}{b}")),
        Just("..;".to_string()),
        Just("x%2F..".to_string()),
        Just("x%5C..".to_string()),
        "[a-z]{1,3}".prop_map(String::from),
    ]
}

/// What a URL rule's refusal or acceptance must be, for random encodings
/// of dot segments under an allowed prefix: refused, or canonical with no
/// segment that a server reads as `.` or `..` (so it stays under it).
#[test]
fn url_rules_accept_only_canonical_urls_without_dot_segments() {
    let rule = ArgumentRule {
        key: "k".into(),
        pointer: "/url".into(),
        matcher: Matcher::Globs(vec!["http://h/allowed/*".into()]),
    };
    let context = CallContext {
        workspace: std::path::Path::new("/w"),
        files: false,
    };
    let case = (
        prop_oneof![Just("http"), Just("HTTP"), Just("hTtp")],
        prop_oneof![Just("h"), Just("H"), Just("h.")],
        prop::collection::vec(dots(), 0..4),
        prop_oneof![Just("/"), Just("\\")],
    );
    let mut runner = TestRunner::new(Config {
        cases: 2000,
        rng_seed: RngSeed::Fixed(28),
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&case, |(scheme, host, segments, separator)| {
        let url = format!(
            "{scheme}://{host}/allowed{separator}{}{separator}private",
            segments.join(separator)
        );
        let refused = rule.refuses(&json!({ "url": url }), &context);
        if refused.is_none() {
            let parsed = reqwest::Url::parse(&url).expect("an accepted URL parses");
            prop_assert_eq!(parsed.as_str(), url.as_str(), "accepted but not canonical");
            prop_assert!(parsed.path().starts_with("/allowed/"), "{}", url);
            for segment in parsed.path_segments().into_iter().flatten() {
                let decoded = segment
                    .to_ascii_lowercase()
                    .replace("%2e", ".")
                    .replace("%2f", "/")
                    .replace("%5c", "/");
                for part in decoded.split('/') {
                    let name = part.split(';').next().unwrap_or_default();
                    prop_assert!(name != "." && name != "..", "{}", url);
                }
            }
        }
        Ok(())
    });
    if let Err(error) = result {
        panic!("{error}");
    }
}
