//! Tools that declare a title and a result type (`output-schema`): MCP
//! `tools/list` shows `title` and `outputSchema`, a call's result comes as
//! `structuredContent` besides the text, and a result that does not match
//! the declared schema is a tool error, through the `toolhost` binary on
//! stdio and over Streamable HTTP. Other protocols keep the plain result.

use serde_json::{Value, json};
use toolhost::{ErrorKind, Host};

use crate::protocol::{Stdio, call};
use crate::serve::CONFIG;

/// `toolhost serve` on stdio with the `shapes` guest, initialized.
fn shapes_on_stdio() -> (tempfile::TempDir, Stdio) {
    let (dir, root) = crate::serve::workspace(CONFIG, &[toolhost_tests::SHAPES]);
    let (server, _) = Stdio::initialized(&root, &[]);
    (dir, server)
}

/// The answer to `request`, skipping notifications.
fn answer_to(server: &mut Stdio, request: &Value) -> Value {
    server.send(request);
    loop {
        let message = server.answer();
        if message["id"] == request["id"] {
            return message;
        }
    }
}

async fn shapes_host() -> Host {
    Host::builder()
        .plugin_file(toolhost_tests::SHAPES)
        .build()
        .await
        .unwrap()
}

const POINTS: &str = r#"{"points": [{"x": 1, "y": 5}, {"x": -2, "y": 3}]}"#;

fn bounding_box() -> Value {
    json!({"min_x": -2, "min_y": 3, "max_x": 1, "max_y": 5, "points": 2})
}

#[test]
fn tools_list_shows_the_title_and_output_schema_of_tools_that_declare_them() {
    let (_dir, mut server) = shapes_on_stdio();
    let listed = answer_to(
        &mut server,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    let tools = listed["result"]["tools"].as_array().unwrap();
    let tool = |name: &str| tools.iter().find(|t| t["name"] == name).unwrap().clone();

    let typed = tool("bounding_box");
    assert_eq!(typed["title"], "Bounding box", "{typed}");
    assert_eq!(typed["annotations"]["title"], "Bounding box");
    let schema = &typed["outputSchema"];
    assert_eq!(schema["type"], "object", "{typed}");
    assert_eq!(schema["properties"]["min_x"]["type"], "integer");
    assert_eq!(
        schema["properties"]["points"]["description"],
        "How many points it holds."
    );
    let mut required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    required.sort_unstable();
    assert_eq!(required, ["max_x", "max_y", "min_x", "min_y", "points"]);

    // A tool returning a `Value`, or a type without a JSON Schema, declares
    // neither.
    let untyped = tool("sort_points");
    assert!(untyped.get("title").is_none(), "{untyped}");
    assert!(untyped.get("outputSchema").is_none(), "{untyped}");
    assert_eq!(untyped["annotations"]["title"], "sort_points");
    assert!(tool("count_shapes").get("outputSchema").is_none());
    // Declared by hand, without the SDK's derive.
    assert_eq!(
        tool("claims_area")["outputSchema"]["required"],
        json!(["area"])
    );
}

#[test]
fn a_typed_result_comes_as_structured_content_and_as_text() {
    let (_dir, mut server) = shapes_on_stdio();
    let points: Value = serde_json::from_str(POINTS).unwrap();
    let answer = answer_to(&mut server, &call(1, "bounding_box", points.clone()));
    let result = &answer["result"];
    assert_eq!(result["isError"], false, "{answer}");
    assert_eq!(result["structuredContent"], bounding_box(), "{answer}");
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, bounding_box());

    let claimed = answer_to(
        &mut server,
        &call(2, "claims_area", json!({"result": {"area": 12}})),
    );
    assert_eq!(claimed["result"]["structuredContent"], json!({"area": 12}));

    // Without an output schema, the text alone.
    let sorted = answer_to(
        &mut server,
        &call(
            3,
            "sort_points",
            json!({"points": points["points"], "by": "x"}),
        ),
    );
    assert_eq!(sorted["result"]["content"][0]["text"], "[[-2,3],[1,5]]");
    assert!(
        sorted["result"].get("structuredContent").is_none(),
        "{sorted}"
    );
}

#[test]
fn a_result_that_does_not_match_the_output_schema_is_a_tool_error() {
    let (_dir, mut server) = shapes_on_stdio();
    for (id, result, problem) in [
        (
            1,
            json!({"area": "big"}),
            "/area: \"big\" is not of type \"integer\"",
        ),
        (2, json!([1, 2]), "(root): [1,2] is not of type \"object\""),
        (3, json!({}), "(root): \"area\" is a required property"),
    ] {
        let answer = answer_to(
            &mut server,
            &call(id, "claims_area", json!({"result": result})),
        );
        let result = &answer["result"];
        assert_eq!(result["isError"], true, "{answer}");
        assert!(result.get("structuredContent").is_none(), "{answer}");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with(
                "invalid_output: tool \"claims_area\" (plugin \"shapes\") returned a result that \
                 does not match its output schema (1 problem): "
            ),
            "{text}"
        );
        assert!(text.contains(problem), "{text}");
    }
}

#[tokio::test]
async fn over_streamable_http_a_client_sees_the_title_schema_and_structured_content() {
    let host = shapes_host().await;
    let url = crate::mcp::serve_http(host).await;
    let client = crate::mcp::http_client(&url).await;
    let tools = client.list_all_tools().await.unwrap();
    let typed = tools.iter().find(|t| t.name == "bounding_box").unwrap();
    assert_eq!(typed.title.as_deref(), Some("Bounding box"));
    let schema = typed.output_schema.as_ref().expect("an output schema");
    assert_eq!(schema["type"], "object");
    let untyped = tools.iter().find(|t| t.name == "sort_points").unwrap();
    assert_eq!((&untyped.title, &untyped.output_schema), (&None, &None));

    let points: Value = serde_json::from_str(POINTS).unwrap();
    let result = client
        .call_tool(crate::mcp::call("bounding_box", points))
        .await
        .unwrap();
    assert_eq!(result.structured_content, Some(bounding_box()));
    let mismatch = client
        .call_tool(crate::mcp::call(
            "claims_area",
            json!({"result": {"area": 1.5}}),
        ))
        .await
        .unwrap();
    assert_eq!(mismatch.is_error, Some(true));
    assert!(
        crate::mcp::text(&mismatch).starts_with("invalid_output: "),
        "{}",
        crate::mcp::text(&mismatch)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn other_callers_get_the_plain_result_and_the_same_check() {
    let host = shapes_host().await;
    // As the CLI and /v1 see it: the result JSON, nothing added.
    let result = host.call("bounding_box", POINTS).await.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(result.get()).unwrap(),
        bounding_box()
    );
    let error = host
        .call("claims_area", r#"{"result": {"area": null}}"#)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidOutput);
    assert!(
        error.message().contains("/area: null"),
        "{}",
        error.message()
    );
    // The spec carries both, for `toolhost list --json`.
    let spec = host
        .tools()
        .into_iter()
        .find(|t| t.name == "bounding_box")
        .unwrap();
    assert_eq!(spec.title.as_deref(), Some("Bounding box"));
    assert!(spec.output_schema.is_some());
    let openai = toolhost::serve::openai::tools(&host, &toolhost::Selection::all(), false).unwrap();
    let function = openai
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "bounding_box")
        .unwrap();
    assert!(
        function["function"].get("outputSchema").is_none(),
        "{function}"
    );
}
