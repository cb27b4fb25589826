//! The bundled plugins, called through `Host::call`.

use serde_json::json;
use toolhost::ErrorKind;

use crate::{call_err, call_ok, host};

#[tokio::test]
async fn word_count_counts() {
    let host = host().await;
    let result = call_ok(&host, "word_count", r#"{"text":"one two\nthree é"}"#).await;
    assert_eq!(
        result,
        json!({"lines": 2, "words": 4, "characters": 15, "bytes": 16})
    );
}

#[tokio::test]
async fn regex_match_returns_matches_with_groups() {
    let host = host().await;
    let result = call_ok(
        &host,
        "regex_match",
        r#"{"pattern":"(\\w+)@(\\w+)","text":"a@b, c@d","limit":1}"#,
    )
    .await;
    assert_eq!(
        result,
        json!({"count": 1, "matches": [{"match": "a@b", "start": 0, "end": 3, "groups": ["a", "b"]}]})
    );
    let (kind, text) = call_err(&host, "regex_match", r#"{"pattern":"(","text":""}"#).await;
    assert_eq!(kind, ErrorKind::InvalidArguments);
    assert!(text.contains("bad pattern"), "{text}");
}

#[tokio::test]
async fn json_format_reformats_and_rejects_bad_json() {
    let host = host().await;
    let result = call_ok(
        &host,
        "json_format",
        r#"{"json":"{\"b\":1,\"a\":[1,2]}","indent":0,"sort_keys":true}"#,
    )
    .await;
    assert_eq!(result, json!({"formatted": r#"{"a":[1,2],"b":1}"#}));
    let result = call_ok(&host, "json_format", r#"{"json":"{\"b\":1,\"a\":2}"}"#).await;
    assert_eq!(
        result,
        json!({"formatted": "{\n  \"b\": 1,\n  \"a\": 2\n}"})
    );
    let (kind, _) = call_err(&host, "json_format", r#"{"json":"{"}"#).await;
    assert_eq!(kind, ErrorKind::InvalidArguments);
}
