//! Test guest: tools with nested, optional and enum parameters, hints, and a
//! required environment variable.

use toolhost_sdk::prelude::*;

/// How to sort.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Order {
    /// Smallest first.
    Asc,
    /// Largest first.
    Desc,
}

/// A point on the plane.
#[derive(Deserialize, JsonSchema)]
struct Point {
    /// Horizontal.
    x: i64,
    /// Vertical.
    y: i64,
}

/// Arguments of `sort_points`.
#[derive(Deserialize, JsonSchema)]
struct SortArgs {
    /// The points to sort.
    points: Vec<Point>,
    /// Sort order (default asc).
    #[serde(default)]
    order: Option<Order>,
    /// Sort by this coordinate.
    by: Axis,
}

/// A coordinate.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Axis {
    /// Horizontal.
    X,
    /// Vertical.
    Y,
}

/// Sort points by one coordinate.
#[tool(toolset = "shapes", read_only)]
fn sort_points(args: SortArgs) -> Result<Value, ToolError> {
    let mut points = args.points;
    points.sort_by_key(|p| match args.by {
        Axis::X => p.x,
        Axis::Y => p.y,
    });
    if matches!(args.order, Some(Order::Desc)) {
        points.reverse();
    }
    Ok(json!(points.iter().map(|p| [p.x, p.y]).collect::<Vec<_>>()))
}

/// Forget every shape (does nothing, but says it is destructive).
#[tool(toolset = "shapes", destructive)]
fn forget_shapes() -> Result<Value, ToolError> {
    Ok(json!("forgotten"))
}

/// Report which of the environment variables it can see.
#[tool(toolset = "shapes", permissions = ["env:read"], requires_env = ["SHAPES_TOKEN"])]
fn env_probe() -> Result<Value, ToolError> {
    let visible: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
    Ok(json!({ "token": std::env::var("SHAPES_TOKEN").ok(), "visible": visible }))
}

/// Takes an object whose keys are runs of `a`: its schema has a nested
/// quantifier (`^(a+)+$`), which a backtracking engine takes exponential time
/// to refuse on keys such as `aaaa...b`.
#[allow(non_camel_case_types)]
struct a_keys {}

impl toolhost_sdk::Tool for a_keys {
    const NAME: &'static str = "a_keys";

    fn spec() -> toolhost_sdk::ToolSpec {
        toolhost_sdk::ToolSpec {
            name: Self::NAME.into(),
            description: "Count keys made of a's.".into(),
            parameters: r#"{"type":"object","propertyNames":{"pattern":"^(a+)+$"}}"#.into(),
            toolset: "patterns".into(),
            permissions: vec![],
            requires_env: vec![],
            emoji: None,
            read_only: true,
            destructive: false,
        }
    }

    fn call(arguments: &str) -> Result<String, ToolError> {
        let keys = serde_json::from_str::<serde_json::Map<String, Value>>(arguments)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        Ok(keys.len().to_string())
    }
}

export_plugin!(sort_points, forget_shapes, env_probe, a_keys);
