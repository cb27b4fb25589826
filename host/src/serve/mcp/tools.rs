//! Tools as MCP `tools/list` entries.

use serde_json::{Value, json};

use crate::caller::Caller;
use crate::contract::spec::ToolSpec;
use crate::host::Host;
use crate::toolsets::Selection;

/// The MCP `tools/list` entries for a selection.
pub fn tools_list(host: &Host, selection: &Selection) -> Result<Value, String> {
    tools_list_for(host, &host.caller(), selection)
}

/// [`tools_list`] for `caller`.
pub fn tools_list_for(
    host: &Host,
    caller: &Caller,
    selection: &Selection,
) -> Result<Value, String> {
    let tools = host.select_for(caller, selection)?;
    Ok(Value::Array(tools.iter().map(|t| mcp_tool(t)).collect()))
}

/// One tool in the MCP `tools/list` shape: its `title`, `outputSchema` and
/// `icons` when it declares them, and annotations from the hints (whose `title`,
/// for clients older than `title`, has the emoji in front).
pub fn mcp_tool(spec: &ToolSpec) -> Value {
    let shown = spec.title.as_deref().unwrap_or(&spec.name);
    let annotated = match &spec.emoji {
        Some(emoji) => format!("{emoji} {shown}"),
        None => shown.to_string(),
    };
    let mut tool = json!({
        "name": spec.name,
        "description": spec.description,
        "inputSchema": spec.parameters,
        "annotations": {
            "title": annotated,
            "readOnlyHint": spec.read_only,
            "destructiveHint": spec.destructive,
            "openWorldHint": spec.permissions.iter().any(|p| p.starts_with("network:")),
        },
    });
    if let Some(title) = &spec.title {
        tool["title"] = json!(title);
    }
    if let Some(schema) = &spec.output_schema {
        tool["outputSchema"] = schema.clone();
    }
    if !spec.icons.is_empty() {
        tool["icons"] = json!(spec.icons);
    }
    tool
}
