//! The `data` toolset: JSON and CSV queries, from text or from files.

use serde_json::{Value, json};
use toolhost::ErrorKind;

use super::{assert_contains, bundled, fails, ok};
use crate::Workspace;

/// Data tools need `file:read` (they may read their input from a file).
const DATA: &str = r#"
allow = ["file:read"]
file.read = ["."]
file.deny = ["secrets/**"]
"#;

#[tokio::test]
async fn json_query_selects_by_path_wildcard_and_pointer() {
    let ws = Workspace::new(bundled);
    let host = ws.host(DATA).await;
    let doc = r#"{"items": [{"id": 1, "tags": ["a"]}, {"id": 2}], "meta": {"content-type": "x"}}"#;
    for (query, expected) in [
        ("items[1].id", json!({"value": 2})),
        ("$.items[-1]", json!({"value": {"id": 2}})),
        ("/items/0/tags/0", json!({"value": "a"})),
        ("meta[\"content-type\"]", json!({"value": "x"})),
        ("items[*].id", json!({"value": [1, 2], "count": 2})),
        ("items[*].tags[0]", json!({"value": ["a"], "count": 1})),
        (
            "",
            serde_json::from_str::<Value>(&format!("{{\"value\": {doc}}}")).unwrap(),
        ),
    ] {
        let result = ok(&host, "json_query", json!({"json": doc, "query": query})).await;
        assert_eq!(result, expected, "{query}");
    }
    // The document may be given as a value rather than as text.
    let result = ok(
        &host,
        "json_query",
        json!({"json": {"a": [true, null]}, "query": "a[0]"}),
    )
    .await;
    assert_eq!(result, json!({"value": true}));
}

#[tokio::test]
async fn json_query_explains_bad_queries_documents_and_missing_keys() {
    let ws = Workspace::new(bundled);
    let host = ws.host(DATA).await;
    let doc = r#"{"items": [{"id": 1}], "n": 3}"#;
    for (query, json, expected) in [
        (
            "items[0].name",
            doc,
            "$.items[0] has no key \"name\"; its keys are: id",
        ),
        (
            "items[4]",
            doc,
            "$.items has 1 element; index 4 is out of range",
        ),
        ("n.x", doc, "$.n is a number, not an object"),
        ("items[x]", doc, "brackets hold an integer index"),
        ("items", "{\"items\": [1,", "the input is not valid JSON"),
    ] {
        let message = fails(
            &host,
            "json_query",
            json!({ "json": json, "query": query }),
            ErrorKind::InvalidArguments,
        )
        .await;
        assert_contains(&message, expected);
    }
    let message = fails(
        &host,
        "json_query",
        json!({"query": "a"}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(&message, "give json (the document itself) or path");
}

const PEOPLE: &str =
    "name,age,city\nAda,36,London\nAlan,41,Wilmslow\n\"Grace, RA\",85,Arlington\nLinus,28,\n";

#[tokio::test]
async fn csv_query_filters_selects_and_limits_rows() {
    let ws = Workspace::new(bundled);
    let host = ws.host(DATA).await;
    let older = ok(
        &host,
        "csv_query",
        json!({
            "csv": PEOPLE,
            "columns": ["name", "age"],
            "where": [{"column": "age", "op": ">", "value": 30}],
        }),
    )
    .await;
    assert_eq!(
        older,
        json!({
            "columns": ["name", "age"],
            "rows": [
                {"name": "Ada", "age": "36"},
                {"name": "Alan", "age": "41"},
                {"name": "Grace, RA", "age": "85"},
            ],
            "matched": 3,
            "total": 4,
        })
    );

    let page = ok(
        &host,
        "csv_query",
        json!({
            "csv": PEOPLE,
            "columns": ["name"],
            "where": [{"column": "name", "op": "starts_with", "value": "A"}, {"column": "city", "op": "not_empty"}],
            "limit": 1,
        }),
    )
    .await;
    assert_eq!(page["rows"], json!([{"name": "Ada"}]));
    assert_eq!(page["matched"], 2);
    assert_eq!(page["truncated"], true);
    assert_contains(page["note"].as_str().unwrap(), "pass offset 1");

    let no_header = ok(
        &host,
        "csv_query",
        json!({"csv": "a;1\nb;2\n", "delimiter": ";", "has_header": false, "where": [{"column": "2", "op": "==", "value": "2"}]}),
    )
    .await;
    assert_eq!(no_header["rows"], json!([{"1": "b", "2": "2"}]));
}

#[tokio::test]
async fn csv_query_explains_unknown_columns_and_malformed_csv() {
    let ws = Workspace::new(bundled);
    let host = ws.host(DATA).await;
    for (arguments, expected) in [
        (
            json!({"csv": PEOPLE, "columns": ["email"]}),
            "has no column \"email\"; its columns are: name, age, city",
        ),
        (
            json!({"csv": PEOPLE, "where": [{"column": "age", "op": ">"}]}),
            "needs a value",
        ),
        (
            json!({"csv": "a,b\n1,2\n3\n"}),
            "not valid CSV: CSV error: record 2 (line: 3, byte: 8): found record with 1 field",
        ),
        (
            json!({"csv": PEOPLE, "delimiter": "::"}),
            "one ASCII character",
        ),
    ] {
        let message = fails(&host, "csv_query", arguments, ErrorKind::InvalidArguments).await;
        assert_contains(&message, expected);
    }
    // The schema refuses an unknown operator before the tool runs.
    fails(
        &host,
        "csv_query",
        json!({"csv": PEOPLE, "where": [{"column": "age", "op": "~", "value": 1}]}),
        ErrorKind::InvalidArguments,
    )
    .await;
}

#[tokio::test]
async fn data_tools_read_input_files_only_where_the_profile_allows() {
    let ws = Workspace::new(bundled);
    ws.write(
        "data/people.tsv",
        PEOPLE.replace(',', "\t").replace("\"Grace\tRA\"", "Grace"),
    );
    ws.write("data/doc.json", r#"{"a": {"b": [10, 20]}}"#);
    ws.write("secrets/doc.json", r#"{"a": 1}"#);
    let host = ws.host(DATA).await;
    let rows = ok(
        &host,
        "csv_query",
        json!({"path": "data/people.tsv", "where": [{"column": "age", "op": "<", "value": 30}]}),
    )
    .await;
    assert_eq!(
        rows["rows"],
        json!([{"name": "Linus", "age": "28", "city": ""}])
    );
    assert_eq!(
        ok(
            &host,
            "json_query",
            json!({"path": "data/doc.json", "query": "a.b[1]"})
        )
        .await,
        json!({"value": 20})
    );
    let message = fails(
        &host,
        "json_query",
        json!({"path": "secrets/doc.json", "query": "a"}),
        ErrorKind::Denied,
    )
    .await;
    assert_contains(&message, "not allowed");
    let outside = ws.path.join("../elsewhere.json");
    std::fs::write(&outside, "{}").unwrap();
    let message = fails(
        &host,
        "json_query",
        json!({"path": outside, "query": ""}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(&message, "no such file");
    std::fs::remove_file(outside).unwrap();
}
