//! Data tools: select parts of a JSON document, and query the rows of a CSV
//! table. Input is given inline or read from a file the caller's profile
//! grants (relative paths start in the workspace).

mod path;
mod table;

use toolhost_sdk::prelude::*;

use crate::path::Query;
use crate::table::csv_query;

/// Largest input file read.
const MAX_INPUT_BYTES: u64 = 16 << 20;
/// Most bytes of result returned.
pub(crate) const MAX_OUTPUT_BYTES: usize = 512 * 1024;

/// A document given inline or as a file path.
pub(crate) enum Input {
    Inline(String),
    File(String),
}

impl Input {
    /// The input from the `inline` argument (named `field`) or `path`: one
    /// of them, not both.
    pub(crate) fn new(
        inline: Option<String>,
        path: Option<String>,
        field: &str,
    ) -> Result<Self, ToolError> {
        match (inline, path) {
            (Some(text), None) => Ok(Self::Inline(text)),
            (None, Some(path)) => Ok(Self::File(path)),
            (Some(_), Some(_)) => Err(ToolError::invalid_arguments(format!(
                "give {field} (the document itself) or path (a file), not both"
            ))),
            (None, None) => Err(ToolError::invalid_arguments(format!(
                "give {field} (the document itself) or path (a file to read)"
            ))),
        }
    }

    /// How messages name the input.
    pub(crate) fn name(&self) -> String {
        match self {
            Self::Inline(_) => "the input".to_string(),
            Self::File(path) => path.clone(),
        }
    }

    /// The document's text.
    pub(crate) fn read(&self) -> Result<std::borrow::Cow<'_, str>, ToolError> {
        let path = match self {
            Self::Inline(text) => return Ok(text.into()),
            Self::File(path) => path,
        };
        let file = std::fs::File::open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ToolError::invalid_arguments(format!(
                "{path}: no such file (relative paths start in the workspace; only granted \
                 directories exist)"
            )),
            std::io::ErrorKind::PermissionDenied => ToolError::denied(format!(
                "reading {path} is not allowed by the caller's profile"
            )),
            _ => ToolError::failed(format!("reading {path}: {e}")),
        })?;
        let size = file.metadata()?.len();
        if size > MAX_INPUT_BYTES {
            return Err(ToolError::invalid_arguments(format!(
                "{path} is {size} bytes; this tool reads files up to {MAX_INPUT_BYTES} bytes"
            )));
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_INPUT_BYTES), &mut text)
            .map_err(|e| ToolError::invalid_arguments(format!("reading {path}: {e}")))?;
        Ok(text.into())
    }
}

/// Arguments of `json_query`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct JsonQueryArgs {
    /// What to select: a path like `items[0].name`, `$.items[*].id`,
    /// `meta["content-type"]` or `items[-1]` (the last element), or a JSON
    /// Pointer like `/items/0/name`. `""` or `$` selects the whole document.
    query: String,
    /// The JSON document: JSON text in a string, or the value itself. Give
    /// `json` or `path`.
    #[serde(default)]
    json: Option<Value>,
    /// A JSON file to read instead: relative to the workspace, or absolute
    /// inside a granted directory.
    #[serde(default)]
    path: Option<String>,
}

/// Select part of a JSON document with a path or a JSON Pointer. A path is
/// keys and indexes (`.key`, `["key"]`, `[0]`, `[-1]` from the end) and
/// wildcards (`[*]` or `.*`: every element or value). Without a wildcard,
/// returns the one selected `value`, or an error saying where the document
/// did not match (with the keys that exist there). With a wildcard, returns
/// `value` as the list of every match (items lacking a later key are
/// skipped) and its `count`.
#[tool(toolset = "data", permissions = ["file:read"], read_only, emoji = "🧭")]
fn json_query(args: JsonQueryArgs) -> Result<Value, ToolError> {
    let query = Query::parse(args.query.trim()).map_err(ToolError::invalid_arguments)?;
    let inline = args.json.map(|json| match json {
        Value::String(text) => text,
        value => value.to_string(),
    });
    let input = Input::new(inline, args.path, "json")?;
    let document: Value = serde_json::from_str(&input.read()?).map_err(|e| {
        ToolError::invalid_arguments(format!("{} is not valid JSON: {e}", input.name()))
    })?;
    let selected = query
        .select(&document)
        .map_err(|e| ToolError::invalid_arguments(format!("query {:?}: {e}", args.query)))?;
    let result = if query.has_wildcard() {
        json!({ "value": selected, "count": selected.len() })
    } else {
        json!({ "value": selected.first().copied().unwrap_or(&Value::Null) })
    };
    let size = serde_json::to_string(&result["value"])?.len();
    if size > MAX_OUTPUT_BYTES {
        return Err(ToolError::invalid_arguments(format!(
            "the selection is {size} bytes, more than the {MAX_OUTPUT_BYTES} this tool \
             returns; select a smaller part (an index, a key)"
        )));
    }
    Ok(result)
}

export_plugin!(json_query, csv_query);
