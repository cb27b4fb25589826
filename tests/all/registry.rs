//! The registry: tool-name collisions, toolsets and selection, and the
//! definitions models see.

use serde_json::json;
use toolhost::{CompositeToolset, Host, Selection};

use crate::call_ok;

fn composite(includes: &[&str], tools: &[&str]) -> CompositeToolset {
    CompositeToolset {
        includes: includes.iter().map(|s| s.to_string()).collect(),
        tools: tools.iter().map(|s| s.to_string()).collect(),
        description: None,
    }
}

async fn shapes_host() -> Host {
    Host::builder()
        .bundled(true)
        .plugin_file(toolhost_tests::SHAPES)
        .toolset("research", composite(&["text", "geometry"], &["echo"]))
        .toolset("geometry", composite(&["shapes"], &[]))
        .build()
        .await
        .unwrap()
}

fn names(tools: &[std::sync::Arc<toolhost::ToolSpec>]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

#[tokio::test]
async fn a_colliding_tool_name_is_a_load_error_naming_both_plugins() {
    let host = Host::builder()
        .bundled(true)
        .plugin_file(toolhost_tests::CLASH)
        .build()
        .await
        .unwrap();
    let errors = host.load_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let error = errors[0].to_string();
    assert!(error.starts_with("plugin \"clash\" ("), "{error}");
    assert!(
        error.contains("tool \"echo\" is already provided by plugin \"echo\" (bundled)"),
        "{error}"
    );
    // The earlier tool keeps working; the later plugin's other tools load.
    assert_eq!(
        call_ok(&host, "echo", r#"{"text":"x"}"#).await,
        json!({"text": "x"})
    );
    assert_eq!(
        call_ok(&host, "clash_only", "{}").await,
        json!("clash_only works")
    );
}

#[tokio::test]
async fn composite_toolsets_include_other_toolsets_and_single_tools() {
    let host = shapes_host().await;
    let research = host.select(&Selection::only(["research"])).unwrap();
    assert_eq!(
        names(&research),
        [
            "bounding_box",
            "count_shapes",
            "echo",
            "forget_shapes",
            "json_format",
            "regex_match",
            "sort_points",
            "word_count"
        ]
    );
    // `all` is every tool the caller may use: the default profile grants no
    // permission, so those that need none (env_probe needs `env:read`, the
    // file, web, terminal and data tools theirs).
    let all = host.select(&Selection::only(["all"])).unwrap();
    let usable = host
        .tools()
        .iter()
        .filter(|t| t.permissions.is_empty())
        .count();
    assert_eq!(all.len(), usable);
    assert!(usable < host.tools().len());
    assert_eq!(host.select(&Selection::all()).unwrap().len(), all.len());
}

#[tokio::test]
async fn disabled_toolsets_are_subtracted_last() {
    let host = shapes_host().await;
    let selected = host
        .select(&Selection::only(["research", "demo"]).without(["geometry", "text"]))
        .unwrap();
    assert_eq!(names(&selected), ["echo", "now"]);
    let selected = host.select(&Selection::all().without(["*"])).unwrap();
    assert!(selected.is_empty());
}

#[tokio::test]
async fn an_unknown_toolset_is_an_error_listing_the_known_ones() {
    let host = shapes_host().await;
    let error = host.select(&Selection::only(["nope"])).unwrap_err();
    assert_eq!(
        error,
        "unknown toolset \"nope\"; known toolsets: data, demo, file, geometry, patterns, research, shapes, \
         tasks, terminal, text, web"
    );
}

#[tokio::test]
async fn a_toolset_cycle_is_a_config_error_naming_it() {
    let error = Host::builder()
        .toolset("a", composite(&["b"], &[]))
        .toolset("b", composite(&["a"], &[]))
        .build()
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("toolsets.a: includes form a cycle: a → b → a"),
        "{error}"
    );
}

#[tokio::test]
async fn openai_definitions_carry_nested_optional_and_enum_parameters() {
    let host = shapes_host().await;
    let tools = toolhost::serve::openai::tools(&host, &Selection::only(["shapes"]), false).unwrap();
    let sort = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "sort_points")
        .unwrap();
    assert_eq!(sort["type"], "function");
    assert_eq!(
        sort["function"]["description"],
        "Sort points by one coordinate."
    );
    let parameters = &sort["function"]["parameters"];
    assert_eq!(parameters["type"], "object");
    assert_eq!(parameters["required"], json!(["points", "by"]));
    let point = &parameters["properties"]["points"]["items"];
    assert_eq!(point["properties"]["x"]["type"], "integer");
    assert_eq!(point["required"], json!(["x", "y"]));
    let by = &parameters["properties"]["by"];
    let by_values: Vec<&str> = by["oneOf"]
        .as_array()
        .map(|v| v.iter().filter_map(|c| c["const"].as_str()).collect())
        .or_else(|| {
            by["enum"]
                .as_array()
                .map(|v| v.iter().filter_map(|c| c.as_str()).collect())
        })
        .unwrap();
    assert_eq!(by_values, ["x", "y"]);
    assert!(sort["function"].get("strict").is_none());
}

#[tokio::test]
async fn strict_definitions_close_objects_where_the_schema_allows() {
    let host = shapes_host().await;
    let tools = toolhost::serve::openai::tools(&host, &Selection::only(["demo"]), true).unwrap();
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "echo")
        .unwrap();
    assert_eq!(echo["function"]["strict"], true);
    let parameters = &echo["function"]["parameters"];
    assert_eq!(parameters["additionalProperties"], false);
    assert_eq!(parameters["required"], json!(["repeat", "text", "upper"]));
    assert_eq!(
        parameters["properties"]["upper"]["type"],
        json!(["boolean", "null"])
    );
}

#[tokio::test]
async fn mcp_definitions_carry_input_schema_and_annotations() {
    let host = shapes_host().await;
    let tools = toolhost::serve::mcp::tools_list(&host, &Selection::only(["shapes"])).unwrap();
    let by_name = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()
            .clone()
    };
    let sort = by_name("sort_points");
    assert_eq!(sort["inputSchema"]["type"], "object");
    assert_eq!(sort["annotations"]["readOnlyHint"], true);
    assert_eq!(sort["annotations"]["destructiveHint"], false);
    let forget = by_name("forget_shapes");
    assert_eq!(forget["annotations"]["destructiveHint"], true);
    assert_eq!(forget["annotations"]["readOnlyHint"], false);
}

#[tokio::test]
async fn removing_a_plugin_drops_its_tools_at_once() {
    let host = shapes_host().await;
    assert!(host.snapshot().tool("sort_points").is_some());
    let removed = host.remove_plugin("shapes").await.unwrap();
    assert_eq!(&**removed.name(), "shapes");
    assert!(host.snapshot().tool("sort_points").is_none());
    let (kind, text) = crate::call_err(&host, "sort_points", "{}").await;
    assert_eq!(kind, toolhost::ErrorKind::Unavailable);
    assert!(text.contains("its plugin \"shapes\" was removed"), "{text}");
}
