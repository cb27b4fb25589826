//! Text tools: count words, match a regular expression, reformat JSON.

use toolhost_sdk::prelude::*;

/// Arguments of `word_count`.
#[derive(Deserialize, JsonSchema)]
struct WordCountArgs {
    /// The text to count.
    text: String,
}

/// Count the lines, words and characters of a text.
#[tool(toolset = "text", emoji = "🔢", read_only)]
fn word_count(args: WordCountArgs) -> Result<Value, ToolError> {
    Ok(json!({
        "lines": args.text.lines().count(),
        "words": args.text.split_whitespace().count(),
        "characters": args.text.chars().count(),
        "bytes": args.text.len(),
    }))
}

/// Arguments of `regex_match`.
#[derive(Deserialize, JsonSchema)]
struct RegexArgs {
    /// Regular expression (Rust `regex` syntax).
    pattern: String,
    /// The text to search.
    text: String,
    /// Most matches to return (default 100).
    #[serde(default)]
    limit: Option<usize>,
}

/// Find every match of a regular expression in a text, with capture groups
/// and byte offsets.
#[tool(toolset = "text", emoji = "🔎", read_only)]
fn regex_match(args: RegexArgs) -> Result<Value, ToolError> {
    let re = regex::RegexBuilder::new(&args.pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| ToolError::invalid_arguments(format!("bad pattern: {e}")))?;
    let limit = args.limit.unwrap_or(100);
    let matches: Vec<Value> = re
        .captures_iter(&args.text)
        .take(limit)
        .map(|caps| {
            let whole = caps.get(0).expect("group 0 always matches");
            let groups: Vec<Option<&str>> =
                caps.iter().skip(1).map(|g| g.map(|m| m.as_str())).collect();
            json!({ "match": whole.as_str(), "start": whole.start(), "end": whole.end(), "groups": groups })
        })
        .collect();
    Ok(json!({ "count": matches.len(), "matches": matches }))
}

/// Arguments of `json_format`.
#[derive(Deserialize, JsonSchema)]
struct JsonFormatArgs {
    /// JSON text to reformat.
    json: String,
    /// Indent with this many spaces; 0 gives compact output (default 2).
    #[serde(default)]
    indent: Option<u8>,
    /// Sort object keys.
    #[serde(default)]
    sort_keys: bool,
}

/// Validate and pretty-print (or compact) a JSON document.
#[tool(toolset = "text", emoji = "🧾", read_only)]
fn json_format(args: JsonFormatArgs) -> Result<Value, ToolError> {
    let mut value: Value = serde_json::from_str(&args.json)
        .map_err(|e| ToolError::invalid_arguments(format!("not valid JSON: {e}")))?;
    if args.sort_keys {
        value.sort_all_objects();
    }
    let indent = usize::from(args.indent.unwrap_or(2));
    let text = if indent == 0 {
        serde_json::to_string(&value)?
    } else {
        let mut out = Vec::new();
        let spaces = " ".repeat(indent);
        let formatter = serde_json::ser::PrettyFormatter::with_indent(spaces.as_bytes());
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
        value.serialize(&mut serializer)?;
        String::from_utf8(out).map_err(ToolError::failed)?
    };
    Ok(json!({ "formatted": text }))
}

export_plugin!(word_count, regex_match, json_format);
