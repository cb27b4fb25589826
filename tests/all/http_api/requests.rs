//! Batches of calls, and requests that are malformed or too large.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use toolhost::serve::http::ServeOptions;

use super::{ALPHA, Server, batch, content, error_text, parse, tenants_config};

#[tokio::test]
async fn a_batch_returns_one_result_per_call_in_order() {
    let server = Server::with_tenants().await;
    let request = batch(&[
        ("sleep", json!({"ms": 200})),
        ("echo", json!({"text": "second"})),
        ("fail", json!({})),
        ("nope", json!({})),
        ("echo", json!({"text": "last"})),
    ]);
    let (status, body) = server.post("/v1/tool_calls", ALPHA, &request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let results = body["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["tool_call_id"], format!("call_{i}"));
        assert_eq!(result["role"], "tool");
    }
    assert_eq!(results[1]["name"], "echo");
    assert_eq!(content(&body, 0), json!({"slept_ms": 200}));
    assert_eq!(content(&body, 1), json!({"text": "second"}));
    assert!(
        content(&body, 2)["error"]
            .as_str()
            .unwrap()
            .starts_with("tool_error: "),
        "{body}"
    );
    assert!(
        content(&body, 3)["error"]
            .as_str()
            .unwrap()
            .starts_with("unknown_tool: "),
        "{body}"
    );
    assert_eq!(content(&body, 4), json!({"text": "last"}));

    // The audit log names the tenant of each call.
    let audit = std::fs::read_to_string(server.root.join("audit.jsonl")).unwrap();
    let echo = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["tool"] == "echo")
        .unwrap();
    assert_eq!(echo["tenant"], "alpha", "{echo}");
    assert_eq!(echo["profile"], "reader", "{echo}");
}

#[tokio::test]
async fn bad_requests_get_json_errors_with_fitting_statuses() {
    let server = Server::start(
        &tenants_config(),
        ServeOptions {
            max_body: 2048,
            max_calls: 3,
            ..ServeOptions::default()
        },
    )
    .await;
    let post = |body: String, content_type: &'static str| {
        server
            .client
            .post(server.url("/v1/tool_calls"))
            .bearer_auth("alpha-token")
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let cases: Vec<(String, &str, StatusCode, &str)> = vec![
        (
            "{not json".into(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "invalid_json: ",
        ),
        (
            "{}".into(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "invalid_request: ",
        ),
        (
            r#"{"tool_calls": [], "session": 7}"#.into(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "invalid_request: ",
        ),
        (
            batch(&vec![("echo", json!({})); 4]).to_string(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "invalid_request: 4 tool calls",
        ),
        (
            batch(&[("echo", json!({}))]).to_string(),
            "text/plain",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type: ",
        ),
        (
            batch(&[("echo", json!({"text": "x".repeat(3000)}))]).to_string(),
            "application/json",
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large: ",
        ),
    ];
    for (body, content_type, expected, prefix) in cases {
        let (status, reply) = parse(post(body.clone(), content_type).await.unwrap()).await;
        assert_eq!(status, expected, "{body:.80}: {reply}");
        assert!(error_text(&reply).starts_with(prefix), "{reply}");
    }
    // A well-formed batch with a malformed entry is fine: the entry fails.
    let (status, body) = server
        .post(
            "/v1/tool_calls",
            ALPHA,
            &json!({"tool_calls": [{"id": "x"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        content(&body, 0)["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid_request: "),
        "{body}"
    );

    let (status, body) = server.get("/v1/nope", ALPHA).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(error_text(&body).starts_with("not_found: "), "{body}");
    let response = server
        .client
        .get(server.url("/v1/tool_calls"))
        .bearer_auth("alpha-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers().get("allow").unwrap(), "POST");
    let (status, body) = parse(response).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        error_text(&body).starts_with("method_not_allowed: "),
        "{body}"
    );
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_even_without_a_length() {
    let server = Server::start(
        &tenants_config(),
        ServeOptions {
            max_body: 1024,
            ..ServeOptions::default()
        },
    )
    .await;
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = "POST /v1/tool_calls HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer alpha-token\r\n\
                content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = format!("{:x}\r\n{}\r\n", 600, " ".repeat(600));
    for _ in 0..3 {
        // The server may answer (and close) before every chunk is sent.
        let _ = stream.write_all(chunk.as_bytes()).await;
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut reply)).await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    assert!(reply.contains("payload_too_large: "), "{reply}");
}

#[tokio::test]
async fn a_batch_takes_its_session_from_the_field_or_the_header() {
    let server = Server::with_tenants().await;
    let mut request = batch(&[("echo", json!({"text": "s"}))]);
    request["session"] = json!("s1");
    let response = server
        .client
        .post(server.url("/v1/tool_calls"))
        .bearer_auth("alpha-token")
        .header("content-type", "application/json")
        .header("toolhost-session", "s2")
        .body(request.to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = parse(response).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(error_text(&body).contains("differ"), "{body}");
    let (status, body) = server.post("/v1/tool_calls", ALPHA, &request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// A batch's entries read as a JSON value reads them: a key given twice
/// counts once, its last value; an id is echoed as sent at any length
/// (and refused for its length, counted as sent); an id that does not read
/// as a string (a lone surrogate) is refused, not dropped.
#[tokio::test]
async fn entries_read_as_a_json_value_reads_them() {
    let server = Server::with_tenants().await;
    let post = |body: String| {
        server
            .client
            .post(server.url("/v1/tool_calls"))
            .bearer_auth("alpha-token")
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let long = "x".repeat(5000);
    let body = format!(
        r#"{{"tool_calls": [], "tool_calls": [
            {{"id": "a", "id": "b", "type": "function",
              "function": {{"name": "nope", "name": "echo", "arguments": "{{\"text\":\"2\"}}"}}}},
            {{"id": "{long}", "type": "function", "function": {{"name": "echo", "arguments": "{{}}"}}}},
            {{"id": "\ud800", "type": "function", "function": {{"name": "echo", "arguments": "{{}}"}}}},
            {{"id": "d", "type": "function", "function": null}}
        ]}}"#
    );
    let response = post(body).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let results = body["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 4, "{body}");
    assert_eq!(results[0]["tool_call_id"], "b", "{body}");
    assert_eq!(results[0]["name"], "echo", "{body}");
    assert_eq!(content(&body, 0), json!({"text": "2"}));
    assert_eq!(results[1]["tool_call_id"], long.as_str());
    assert!(
        error_text(&content(&body, 1)).contains("the call id is 5000 bytes"),
        "{}",
        content(&body, 1)
    );
    assert_eq!(results[2]["tool_call_id"], Value::Null);
    assert!(
        error_text(&content(&body, 2)).contains("has an id that is not a string"),
        "{}",
        content(&body, 2)
    );
    assert_eq!(results[3]["tool_call_id"], "d");
    assert!(
        error_text(&content(&body, 3)).contains("has a \"function\" that is not an object"),
        "{}",
        content(&body, 3)
    );
}
