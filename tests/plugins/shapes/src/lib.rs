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

/// The smallest rectangle around some points.
#[derive(Serialize, JsonSchema)]
struct BoundingBox {
    /// Smallest x.
    min_x: i64,
    /// Smallest y.
    min_y: i64,
    /// Largest x.
    max_x: i64,
    /// Largest y.
    max_y: i64,
    /// How many points it holds.
    points: usize,
}

/// Arguments of `bounding_box`.
#[derive(Deserialize, JsonSchema)]
struct BoxArgs {
    /// The points (at least one).
    points: Vec<Point>,
}

/// The smallest axis-aligned rectangle that holds every point.
#[tool(toolset = "shapes", title = "Bounding box", read_only)]
fn bounding_box(args: BoxArgs) -> Result<BoundingBox, ToolError> {
    let xs = args.points.iter().map(|p| p.x);
    let ys = args.points.iter().map(|p| p.y);
    let none = || ToolError::invalid_arguments("give at least one point");
    Ok(BoundingBox {
        min_x: xs.clone().min().ok_or_else(none)?,
        max_x: xs.max().ok_or_else(none)?,
        min_y: ys.clone().min().ok_or_else(none)?,
        max_y: ys.max().ok_or_else(none)?,
        points: args.points.len(),
    })
}

/// How many shapes there are: serializable, but without a schema.
#[derive(Serialize)]
struct ShapeCount {
    shapes: usize,
}

/// Count the shapes (there are none).
#[tool(toolset = "shapes", read_only)]
fn count_shapes() -> Result<ShapeCount, ToolError> {
    Ok(ShapeCount { shapes: 0 })
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
        toolhost_sdk::ToolSpec::new(Self::NAME, "Count keys made of a's.")
            .parameters(r#"{"type":"object","propertyNames":{"pattern":"^(a+)+$"}}"#)
            .toolset("patterns")
            .read_only(true)
    }

    fn call(arguments: &str) -> Result<toolhost_sdk::ToolOutput, ToolError> {
        let keys = serde_json::from_str::<serde_json::Map<String, Value>>(arguments)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        Ok(toolhost_sdk::ToolOutput::json(keys.len().to_string()))
    }
}

/// Declares an output schema (an object with an integer `area`) and returns
/// whatever `result` it is given.
#[allow(non_camel_case_types)]
struct claims_area {}

impl toolhost_sdk::Tool for claims_area {
    const NAME: &'static str = "claims_area";

    fn spec() -> toolhost_sdk::ToolSpec {
        toolhost_sdk::ToolSpec::new(
            Self::NAME,
            "Returns the result it is given, claiming an area.",
        )
        .parameters(r#"{"type":"object","properties":{"result":{}},"required":["result"]}"#)
        .toolset("patterns")
        .read_only(true)
        .output_schema(
            r#"{"type":"object","properties":{"area":{"type":"integer"}},"required":["area"]}"#,
        )
    }

    fn call(arguments: &str) -> Result<toolhost_sdk::ToolOutput, ToolError> {
        let arguments = serde_json::from_str::<Value>(arguments)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        Ok(toolhost_sdk::ToolOutput::json(
            arguments["result"].to_string(),
        ))
    }
}

export_plugin!(
    sort_points,
    bounding_box,
    count_shapes,
    forget_shapes,
    env_probe,
    a_keys,
    claims_area
);
