//! A tool as the host knows it: the plugin's `tool-spec`, validated, with its
//! parameter schema parsed.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::bindings::toolhost::plugin::types::ToolSpec as WitToolSpec;
pub(crate) use super::shown::shown;

/// One tool of a loaded plugin.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    /// Unique name, `[a-zA-Z0-9_-]{1,64}`.
    pub name: String,
    /// What the tool does, for models.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    /// The toolset the tool belongs to.
    pub toolset: String,
    /// Permissions the tool declares.
    pub permissions: Vec<String>,
    /// Environment variables the tool needs.
    pub requires_env: Vec<String>,
    /// Emoji for listings.
    pub emoji: Option<String>,
    /// Hint: does not modify anything.
    pub read_only: bool,
    /// Hint: may delete or overwrite.
    pub destructive: bool,
    /// A human-readable name for people, shown instead of `name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// JSON Schema of the result object, when the tool declares one: every
    /// result is checked against it, and MCP clients get the result as
    /// `structuredContent` too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Icons for clients that show them (contract 0.2.2).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<super::icons::Icon>,
    /// The plugin that provides the tool.
    pub plugin: Arc<str>,
    /// `parameters`, compiled once per tool version.
    #[serde(skip)]
    validator: Arc<jsonschema::Validator>,
    /// `output_schema`, compiled once per tool version.
    #[serde(skip)]
    output_validator: Option<Arc<jsonschema::Validator>>,
}

impl ToolSpec {
    /// Checks `arguments` against the parameter schema, listing every
    /// violation with its JSON pointer.
    pub fn validate_arguments(&self, arguments: &Value) -> Result<(), Vec<String>> {
        violations(&self.validator, arguments)
    }

    /// Checks a result against the output schema, if the tool declares one,
    /// listing every violation with its JSON pointer.
    pub fn validate_output(&self, output: &Value) -> Result<(), Vec<String>> {
        match &self.output_validator {
            Some(validator) => violations(validator, output),
            None => Ok(()),
        }
    }
}

/// Every way `value` breaks the schema, each with its JSON pointer.
fn violations(validator: &jsonschema::Validator, value: &Value) -> Result<(), Vec<String>> {
    if validator.is_valid(value) {
        return Ok(());
    }
    Err(validator
        .iter_errors(value)
        .map(|e| {
            let pointer = e.instance_path().to_string();
            let at = if pointer.is_empty() {
                "(root)".to_string()
            } else {
                pointer
            };
            format!("{at}: {e}")
        })
        .collect())
}

/// True for a valid tool name: `[a-zA-Z0-9_-]{1,64}`.
pub(crate) fn is_valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// True for a permission string: `segment(:segment)*` where a segment is
/// `[a-z0-9_.-]+` (lower case), or `*` in a pattern.
pub(crate) fn is_valid_permission(permission: &str) -> bool {
    !permission.is_empty()
        && permission.split(':').all(|segment| {
            !segment.is_empty()
                && segment.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'-')
                })
        })
}

pub(crate) fn is_valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.as_bytes()[0].is_ascii_digit()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Largest `parameters` schema of one tool, in bytes: every `tools/list`
/// carries it to the model.
pub(crate) const MAX_SCHEMA_BYTES: usize = 64 << 10;

/// Largest description of one tool, in bytes.
pub(crate) const MAX_DESCRIPTION_BYTES: usize = 8 << 10;

/// Longest name of a tool, in bytes (ASCII: as many characters).
pub(crate) const MAX_TOOL_NAME: usize = 64;

/// Largest title of one tool, in bytes.
pub(crate) const MAX_TITLE_BYTES: usize = 128;

/// Validates a spec from a plugin's `describe`, returning every problem found.
pub(crate) fn validate(plugin: &Arc<str>, raw: WitToolSpec) -> Result<ToolSpec, Vec<String>> {
    let mut problems = Vec::new();
    let shown_name = shown(&raw.name);
    if !is_valid_tool_name(&raw.name) {
        problems.push(format!(
            "tool name {shown_name:?} is invalid: use 1 to 64 characters of a-z, A-Z, 0-9, '_' or '-'"
        ));
    }
    if raw.description.trim().is_empty() {
        problems.push(format!(
            "tool {shown_name:?} has an empty description; models need it to choose the tool"
        ));
    }
    if raw.description.len() > MAX_DESCRIPTION_BYTES {
        problems.push(format!(
            "tool {shown_name:?} has a description of {} bytes, more than the {} a tool's \
             description may have",
            raw.description.len(),
            MAX_DESCRIPTION_BYTES
        ));
    }
    let (parameters, validator) =
        match object_schema(&shown_name, "parameters", &raw.parameters, &mut problems) {
            Some((schema, validator)) => (schema, Some(validator)),
            None => (Value::Null, None),
        };
    let mut output_schema = None;
    let mut output_validator = None;
    if let Some(text) = &raw.output_schema
        && let Some((schema, validator)) =
            object_schema(&shown_name, "output-schema", text, &mut problems)
    {
        output_schema = Some(schema);
        output_validator = Some(validator);
    }
    if let Some(title) = &raw.title
        && let Err(problem) = check_title(title)
    {
        problems.push(format!("tool {shown_name:?}: title {problem}"));
    }
    if raw.toolset.is_empty() || !is_valid_tool_name(&raw.toolset) {
        problems.push(format!(
            "tool {shown_name:?}: toolset {:?} is invalid: use 1 to 64 characters of a-z, A-Z, 0-9, '_' or '-'",
            raw.toolset
        ));
    }
    for permission in &raw.permissions {
        if !is_valid_permission(permission) {
            problems.push(format!(
                "tool {shown_name:?}: permission {permission:?} is invalid: use lower-case segments \
                 separated by ':', like \"file:read\""
            ));
        }
    }
    for name in &raw.requires_env {
        if !is_valid_env_name(name) {
            problems.push(format!(
                "tool {shown_name:?}: required env var {name:?} is not a valid variable name"
            ));
        }
    }
    if raw.read_only && raw.destructive {
        problems.push(format!(
            "tool {shown_name:?} is marked both read-only and destructive"
        ));
    }
    let Some(validator) = validator.filter(|_| problems.is_empty()) else {
        return Err(problems);
    };
    Ok(ToolSpec {
        name: raw.name,
        description: raw.description,
        parameters,
        toolset: raw.toolset,
        permissions: raw.permissions,
        requires_env: raw.requires_env,
        emoji: raw.emoji,
        read_only: raw.read_only,
        destructive: raw.destructive,
        title: raw.title,
        output_schema,
        icons: Vec::new(),
        plugin: plugin.clone(),
        validator,
        output_validator,
    })
}

/// Parses and compiles a schema of the spec (`what`: `parameters` or
/// `output-schema`), which must describe an object; `None` with the problem
/// recorded when it cannot be used.
fn object_schema(
    tool: &str,
    what: &str,
    text: &str,
    problems: &mut Vec<String>,
) -> Option<(Value, Arc<jsonschema::Validator>)> {
    if text.len() > MAX_SCHEMA_BYTES {
        problems.push(format!(
            "tool {tool:?}: {what} is a schema of {} bytes, more than the {} a tool's \
             schema may have (every tools/list sends it to the model)",
            text.len(),
            MAX_SCHEMA_BYTES
        ));
        return None;
    }
    let schema = match serde_json::from_str::<Value>(text) {
        Ok(schema) => schema,
        Err(e) => {
            problems.push(format!("tool {tool:?}: {what} is not valid JSON ({e})"));
            return None;
        }
    };
    if let Err(problem) = check_object_schema(&schema) {
        problems.push(format!("tool {tool:?}: {what} {problem}"));
        return None;
    }
    // Patterns run on the regex crate, whose matching time is linear: a
    // backtracking pattern cannot stall validation, which runs outside the
    // call's deadline.
    match jsonschema::options()
        .should_validate_formats(false)
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(&schema)
    {
        Ok(compiled) => Some((schema, Arc::new(compiled))),
        Err(e) => {
            problems.push(format!(
                "tool {tool:?}: {what} is not a valid JSON Schema: {e}"
            ));
            None
        }
    }
}

/// A title is one line of at most [`MAX_TITLE_BYTES`], not blank.
fn check_title(title: &str) -> Result<(), String> {
    if title.trim().is_empty() {
        return Err("is empty; leave it out to show the name".into());
    }
    if title.len() > MAX_TITLE_BYTES {
        return Err(format!(
            "has {} bytes, more than the {MAX_TITLE_BYTES} a title may have",
            title.len()
        ));
    }
    if title.chars().any(char::is_control) {
        return Err("must be one line without control characters".into());
    }
    Ok(())
}

/// A tool's parameters (and output schema) must be a JSON Schema for an
/// object.
fn check_object_schema(schema: &Value) -> Result<(), String> {
    let Some(object) = schema.as_object() else {
        return Err("must be a JSON Schema object, like {\"type\": \"object\", ...}".into());
    };
    match object.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err(format!(
                "must describe an object (\"type\": \"object\"), found \"type\": {other}"
            ));
        }
        None => return Err("must have \"type\": \"object\"".into()),
    }
    if let Some(properties) = object.get("properties")
        && !properties.is_object()
    {
        return Err("\"properties\" must be an object".into());
    }
    if let Some(required) = object.get("required")
        && !required
            .as_array()
            .is_some_and(|r| r.iter().all(Value::is_string))
    {
        return Err("\"required\" must be a list of property names".into());
    }
    Ok(())
}

/// A raw spec of a read-only tool `name` with no arguments or permissions,
/// for tests.
#[cfg(test)]
pub(crate) fn test_spec(name: &str) -> WitToolSpec {
    WitToolSpec {
        name: name.into(),
        description: "does things".into(),
        parameters: r#"{"type":"object"}"#.into(),
        toolset: "demo".into(),
        permissions: vec![],
        requires_env: vec![],
        emoji: None,
        read_only: true,
        destructive: false,
        title: None,
        output_schema: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(name: &str, parameters: &str) -> WitToolSpec {
        WitToolSpec {
            parameters: parameters.into(),
            permissions: vec!["file:read".into()],
            ..test_spec(name)
        }
    }

    #[test]
    fn accepts_a_good_spec() {
        let plugin: Arc<str> = "p".into();
        let spec = validate(&plugin, raw("echo_2-x", r#"{"type":"object"}"#)).unwrap();
        assert_eq!(spec.name, "echo_2-x");
        assert_eq!(&*spec.plugin, "p");
    }

    #[test]
    fn reports_every_problem() {
        let plugin: Arc<str> = "p".into();
        let mut bad = raw("bad name", r#"{"type":"string"}"#);
        bad.permissions.push("File Read".into());
        bad.destructive = true;
        let problems = validate(&plugin, bad).unwrap_err();
        assert_eq!(problems.len(), 4, "{problems:#?}");
        assert!(problems[0].contains("tool name \"bad name\" is invalid"));
        assert!(problems[1].contains("must describe an object"));
        assert!(problems[2].contains("permission \"File Read\""));
        assert!(problems[3].contains("both read-only and destructive"));
    }

    #[test]
    fn schema_patterns_run_in_linear_time_or_the_tool_is_refused() {
        let plugin: Arc<str> = "p".into();
        // Look-around needs a backtracking engine: refused at load.
        let hostile = r#"{"type":"object","propertyNames":{"pattern":"^(?:(?=a)a+)+$"}}"#;
        let problems = validate(&plugin, raw("slow", hostile)).unwrap_err();
        assert!(
            problems[0].contains("not a valid JSON Schema"),
            "{problems:?}"
        );
        // A nested quantifier is linear on the regex crate.
        let nested = r#"{"type":"object","propertyNames":{"pattern":"^(a+)+$"}}"#;
        let spec = validate(&plugin, raw("nested", nested)).unwrap();
        let mut arguments = serde_json::Map::new();
        for i in 0..200 {
            arguments.insert(format!("{}b{i}", "a".repeat(30)), Value::Null);
        }
        assert!(spec.validate_arguments(&Value::Object(arguments)).is_err());
    }

    #[test]
    fn schemas_and_descriptions_have_a_size_limit() {
        let plugin: Arc<str> = "p".into();
        let padding = "x".repeat(MAX_SCHEMA_BYTES);
        let huge = format!(r#"{{"type":"object","description":"{padding}"}}"#);
        let problems = validate(&plugin, raw("huge", &huge)).unwrap_err();
        assert!(problems[0].contains("more than the 65536"), "{problems:?}");
        let mut wordy = raw("wordy", r#"{"type":"object"}"#);
        wordy.description = "y".repeat(MAX_DESCRIPTION_BYTES + 1);
        let problems = validate(&plugin, wordy).unwrap_err();
        assert!(
            problems[0].contains("description of 8193 bytes"),
            "{problems:?}"
        );
        // At the limits, a tool loads.
        let mut full = raw("full", r#"{"type":"object"}"#);
        full.description = "y".repeat(MAX_DESCRIPTION_BYTES);
        assert!(validate(&plugin, full).is_ok());
    }

    #[test]
    fn names_and_permissions() {
        assert!(is_valid_tool_name("a"));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name(&"a".repeat(65)));
        assert!(!is_valid_tool_name("a.b"));
        assert!(is_valid_permission("network:fetch"));
        assert!(is_valid_permission("database:write"));
        assert!(!is_valid_permission("network:"));
        assert!(!is_valid_permission("Network:Fetch"));
    }

    #[test]
    fn arguments_are_checked_against_the_schema_with_pointers() {
        let plugin: Arc<str> = "p".into();
        let schema = r#"{"type":"object","properties":{"n":{"type":"integer"},
            "tags":{"type":"array","items":{"type":"string"}}},"required":["n"]}"#;
        let spec = validate(&plugin, raw("t", schema)).unwrap();
        assert!(
            spec.validate_arguments(&serde_json::json!({"n": 1}))
                .is_ok()
        );
        let errors = spec
            .validate_arguments(&serde_json::json!({"tags": ["a", 2]}))
            .unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("(root): ") && e.contains("\"n\""))
        );
        assert!(errors.iter().any(|e| e.starts_with("/tags/1: ")));
    }

    #[test]
    fn an_invalid_schema_is_a_load_problem() {
        let plugin: Arc<str> = "p".into();
        let problems = validate(
            &plugin,
            raw("t", r#"{"type":"object","properties":{"a":{"type":7}}}"#),
        )
        .unwrap_err();
        assert!(
            problems[0].contains("not a valid JSON Schema"),
            "{problems:?}"
        );
    }

    #[test]
    fn parameters_must_be_json() {
        let plugin: Arc<str> = "p".into();
        let problems = validate(&plugin, raw("t", "{not json")).unwrap_err();
        assert!(problems[0].contains("parameters is not valid JSON"));
    }

    #[test]
    fn an_output_schema_describes_an_object_and_checks_results() {
        let plugin: Arc<str> = "p".into();
        let mut typed = raw("typed", r#"{"type":"object"}"#);
        typed.title = Some("Typed tool".into());
        typed.output_schema = Some(
            r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#.into(),
        );
        let spec = validate(&plugin, typed).unwrap();
        assert_eq!(spec.title.as_deref(), Some("Typed tool"));
        assert!(spec.validate_output(&serde_json::json!({"n": 1})).is_ok());
        let errors = spec
            .validate_output(&serde_json::json!({"n": "one"}))
            .unwrap_err();
        assert!(errors[0].starts_with("/n: "), "{errors:?}");
        // Without an output schema, anything goes.
        let untyped = validate(&plugin, raw("untyped", r#"{"type":"object"}"#)).unwrap();
        assert!(untyped.validate_output(&serde_json::json!([1])).is_ok());
    }

    #[test]
    fn a_bad_output_schema_or_title_is_a_load_problem() {
        let plugin: Arc<str> = "p".into();
        let mut bad = raw("t", r#"{"type":"object"}"#);
        bad.output_schema = Some(r#"{"type":"array"}"#.into());
        bad.title = Some("two\nlines".into());
        let problems = validate(&plugin, bad).unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("output-schema must describe an object"),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("title must be one line"),
            "{problems:?}"
        );
        let mut blank = raw("t", r#"{"type":"object"}"#);
        blank.title = Some(" ".into());
        blank.output_schema = Some("{nope".into());
        let problems = validate(&plugin, blank).unwrap_err();
        assert!(
            problems[0].contains("output-schema is not valid JSON"),
            "{problems:?}"
        );
        assert!(problems[1].contains("title is empty"), "{problems:?}");
    }
}
