//! Unit tests of `declarative`.

use super::*;

fn problems(text: &str) -> Vec<String> {
    parse("weather", text, Syntax::Toml).expect_err("should not validate")
}

const GOOD: &str = r#"
toolset = "weather"
base_url = "https://api.weather.example/v1/"
auth = { type = "bearer", env = "WEATHER_TOKEN" }

[[tools]]
name = "current_weather"
description = "The current weather in a city."
url = "/current/{city}"
response = { pointer = "/current" }
parameters.city = { type = "string", description = "City name", required = true }
parameters.units = { type = "string", enum = ["metric", "imperial"], default = "metric" }

[[tools]]
name = "report"
description = "File a report."
method = "post"
url = "https://reports.example/new"
auth = { type = "header", name = "X-Api-Key", env = "REPORT_KEY" }
parameters.text = { required = true }
parameters.tags = { type = "array", items = "string" }
"#;

#[test]
fn a_file_becomes_specs_with_schemas_and_wrapper_definitions() {
    let declared = parse("weather", GOOD, Syntax::Toml).unwrap();
    let [current, report] = declared.specs.as_slice() else {
        panic!("two tools expected");
    };
    assert_eq!(current.toolset, "weather");
    assert_eq!(current.permissions, ["network:fetch", "env:read"]);
    assert_eq!(current.requires_env, ["WEATHER_TOKEN"]);
    assert!(current.read_only && !report.read_only);
    let schema: Value = serde_json::from_str(&current.parameters).unwrap();
    assert_eq!(schema["required"], json!(["city"]));
    assert_eq!(
        schema["properties"]["units"]["enum"],
        json!(["metric", "imperial"])
    );
    assert_eq!(schema["additionalProperties"], json!(false));
    assert_eq!(report.requires_env, ["REPORT_KEY"]);

    let call = declared
        .definitions
        .arguments("current_weather", r#"{"city":"Oslo"}"#);
    let call: Value = serde_json::from_str(&call).unwrap();
    let definition = &call["definition"];
    assert_eq!(
        definition["url"],
        "https://api.weather.example/v1/current/{city}"
    );
    assert_eq!(definition["method"], "GET");
    assert_eq!(definition["parameters"]["city"]["in"], "path");
    assert_eq!(definition["parameters"]["units"]["in"], "query");
    assert_eq!(definition["parameters"]["units"]["default"], "metric");
    assert_eq!(
        definition["auth"],
        json!({"type": "bearer", "env": "WEATHER_TOKEN"})
    );
    assert_eq!(call["arguments"], json!({"city": "Oslo"}));
    let report: Value =
        serde_json::from_str(&declared.definitions.arguments("report", "{}")).unwrap();
    assert_eq!(report["definition"]["method"], "POST");
    assert_eq!(report["definition"]["parameters"]["text"]["in"], "body");
}

#[test]
fn every_problem_names_its_key() {
    let found = problems(
        r#"
base_url = "ftp://files.example"
auth = { type = "token", env = "X" }
[[tools]]
name = "bad name"
description = "x"
method = "FETCH"
url = "/items/{id}/{missing}"
timeout = "soon"
response = { format = "xml" }
parameters.id = { type = "strin" }
parameters.page = { type = "integer", default = "one" }
parameters.kind = { enum = ["a", "b"], default = "c" }
parameters.q = { in = "body" }
parameters.x = { in = "path", required = true }
"#,
    );
    let expected = [
        "base_url: \"ftp://files.example\" must be an http:// or https:// URL",
        "auth.type: \"token\" is not an authentication type",
        "tools[0].name: \"bad name\" is not a valid tool name",
        "tools[0].method: must be one of GET",
        "tools[0].timeout: ",
        "tools[0].response.format: must be one of json, text, raw",
        "tools[0].parameters.id.type: \"strin\" is not a type",
        "tools[0].parameters.page.default: \"one\" is not of type integer",
        "tools[0].parameters.kind.default: \"c\" is not one of the enum values",
        "tools[0].parameters.x.in: is \"path\" but the url has no {x} placeholder",
        "tools[0].url: placeholder {missing} has no parameter",
    ];
    for needle in expected {
        assert!(
            found.iter().any(|p| p.starts_with(needle)),
            "no problem starting with {needle:?} in {found:#?}"
        );
    }
    // FETCH is not a method, so `q` falls back to the body; no complaint
    // about a GET body then.
    assert!(
        !found.iter().any(|p| p.contains("parameters.q")),
        "{found:#?}"
    );
}

#[test]
fn syntax_errors_and_unknown_keys_name_the_key_and_line() {
    let found = problems(
        "[[tools]]\nname = \"a\"\ndescription = \"b\"\nurl = \"https://x.example\"\nmethd = \"GET\"\n",
    );
    assert_eq!(found.len(), 1);
    assert!(
        found[0].starts_with("tools[0].methd: unknown field `methd`")
            && found[0].contains("line 5"),
        "{found:?}"
    );
    let found = problems("[[tools]\n");
    assert!(found[0].contains("line 1"), "{found:?}");
    assert!(problems("")[0].starts_with("tools: no tools are defined"));
}

#[test]
fn get_parameters_cannot_go_in_a_body_and_path_parameters_need_a_value() {
    let found = problems(
        r#"
[[tools]]
name = "t"
description = "d"
url = "https://api.example/{id}"
parameters.id = { type = "integer" }
parameters.q = { in = "body" }
"#,
    );
    assert!(
        found.iter().any(|p| {
            p.starts_with(
            "tools[0].parameters.id.required: a path parameter must be required or have a default"
        )
        }),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("tools[0].parameters.q.in: a GET request has no body")),
        "{found:#?}"
    );
}

const JIRA: &str = "tools:
  - name: jira_create_ticket
    type: http_wrapper
    description: Create a Jira ticket.
    endpoint: https://jira.example/rest/api/2/issue
    method: POST
    auth: { type: basic, username_env: JIRA_USER, password_env: JIRA_TOKEN }
    parameters:
      - { name: summary, type: string, required: true, description: One line. }
      - { name: labels, type: array, items: string }
    tags: [jira, tickets]
    timeout_seconds: 30
";

#[test]
fn a_yaml_file_reads_like_the_same_toml_file() {
    let toml = r#"
[[tools]]
name = "jira_create_ticket"
description = "Create a Jira ticket."
url = "https://jira.example/rest/api/2/issue"
method = "POST"
auth = { type = "basic", username_env = "JIRA_USER", password_env = "JIRA_TOKEN" }
timeout = "30s"
parameters.summary = { type = "string", required = true, description = "One line." }
parameters.labels = { type = "array", items = "string" }
"#;
    let from_yaml = parse("jira", JIRA, Syntax::Yaml).unwrap();
    let from_toml = parse("jira", toml, Syntax::Toml).unwrap();
    assert_eq!(
        format!("{:?}", from_yaml.specs),
        format!("{:?}", from_toml.specs)
    );
    let call = |declared: &Declared| declared.definitions.arguments("jira_create_ticket", "{}");
    assert_eq!(call(&from_yaml), call(&from_toml));
    assert_eq!(from_yaml.specs[0].requires_env, ["JIRA_USER", "JIRA_TOKEN"]);
}

#[test]
fn yaml_problems_name_the_yaml_keys_and_lines() {
    let problems = |text: &str| parse("jira", text, Syntax::Yaml).unwrap_err().join("\n");
    let unknown = problems(&JIRA.replace("tags:", "flavour:"));
    assert!(unknown.contains("flavour"), "{unknown}");
    let syntax = problems("tools:\n  - name: x\n    endpoint: [\n");
    assert!(
        syntax.contains("line 3") || syntax.contains(":3:"),
        "{syntax}"
    );
    let kind = problems(&JIRA.replace("http_wrapper", "python_function"));
    assert!(kind.contains("tools[0].type"), "{kind}");
    let url = problems(&JIRA.replace("https://", "ftp://"));
    assert!(url.contains("tools[0].endpoint"), "{url}");
    let timeout = problems(&JIRA.replace("timeout_seconds: 30", "timeout_seconds: -1"));
    assert!(timeout.contains("tools[0].timeout_seconds"), "{timeout}");
    let twice = problems(&JIRA.replace("name: labels", "name: summary"));
    assert!(twice.contains("listed twice"), "{twice}");
}

#[test]
fn the_syntax_comes_from_the_extension() {
    use std::path::Path;
    assert_eq!(Syntax::of(Path::new("a/jira.yaml")), Syntax::Yaml);
    assert_eq!(Syntax::of(Path::new("jira.yml")), Syntax::Yaml);
    assert_eq!(Syntax::of(Path::new("jira.toml")), Syntax::Toml);
}
