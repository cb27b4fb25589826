//! Test guest: a plugin built against the released contract 0.1.0
//! (`wit/0.1.0`) with wit-bindgen directly, as a plugin shipped then was:
//! stateful with lifecycle hooks, using 0.1.0's `terminal`, `http` and `log`
//! imports. The current host must load it and answer its calls.

#[allow(missing_docs, unreachable_pub, unused_qualifications)]
mod bindings {
    wit_bindgen::generate!({ path: "../../../wit/0.1.0", world: "stateful-plugin" });
}

use std::cell::RefCell;

use bindings::exports::toolhost::plugin::lifecycle::Guest as Lifecycle;
use bindings::exports::toolhost::plugin::tool::Guest;
use bindings::toolhost::plugin::types::{Manifest, ToolError, ToolSpec};
use bindings::toolhost::plugin::{http, log, terminal};

thread_local! {
    /// The session this instance serves, and how many calls it has had.
    static SESSION: RefCell<(String, u32)> = const { RefCell::new((String::new(), 0)) };
}

fn spec(name: &str, description: &str, parameters: &str, permissions: &[&str]) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters: parameters.into(),
        toolset: "v010".into(),
        permissions: permissions.iter().map(|p| p.to_string()).collect(),
        requires_env: vec![],
        emoji: None,
        read_only: true,
        destructive: false,
    }
}

/// The string field `key` of a JSON object written as text (enough for the
/// tests' plain arguments: no escapes).
fn field(arguments: &str, key: &str) -> String {
    let at = arguments
        .find(&format!("\"{key}\""))
        .map(|at| at + key.len() + 2);
    let rest = at.map(|at| &arguments[at..]).unwrap_or("");
    let rest = rest.trim_start().trim_start_matches(':').trim_start();
    rest.strip_prefix('"')
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("")
        .to_string()
}

/// `text` as a JSON string.
fn quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

struct Plugin;

impl Guest for Plugin {
    fn describe() -> Manifest {
        let line =
            r#"{"type":"object","properties":{"line":{"type":"string"}},"required":["line"]}"#;
        let url = r#"{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}"#;
        Manifest {
            tools: vec![
                spec(
                    "v010_count",
                    "Counts the calls of its session.",
                    r#"{"type":"object"}"#,
                    &[],
                ),
                spec(
                    "v010_run",
                    "Runs a command line.",
                    line,
                    &["terminal:execute"],
                ),
                spec(
                    "v010_fetch",
                    "Fetches a URL with GET.",
                    url,
                    &["network:fetch"],
                ),
            ],
            stateful: true,
        }
    }

    fn call(name: String, arguments: String) -> Result<String, ToolError> {
        log::log(log::Level::Info, &format!("0.1.0 guest runs {name}"));
        match name.as_str() {
            "v010_count" => SESSION.with_borrow_mut(|(session, calls)| {
                *calls += 1;
                Ok(format!(
                    r#"{{"session":{},"calls":{calls}}}"#,
                    quoted(session)
                ))
            }),
            "v010_run" => {
                let command = terminal::Command {
                    command_line: field(&arguments, "line"),
                    cwd: None,
                    stdin: None,
                    timeout_ms: Some(10_000),
                };
                match terminal::run(&command) {
                    Ok(output) => Ok(format!(
                        r#"{{"exit_code":{},"stdout":{}}}"#,
                        output.exit_code.map_or("null".into(), |c| c.to_string()),
                        quoted(&output.stdout)
                    )),
                    Err(terminal::TerminalError::Denied(m)) => Err(ToolError::Denied(m)),
                    Err(terminal::TerminalError::Timeout) => {
                        Err(ToolError::Failed("timeout".into()))
                    }
                    Err(terminal::TerminalError::Failed(m)) => Err(ToolError::Failed(m)),
                }
            }
            "v010_fetch" => {
                let request = http::Request {
                    method: "GET".into(),
                    url: field(&arguments, "url"),
                    headers: vec![],
                    body: None,
                    timeout_ms: Some(10_000),
                };
                match http::fetch(&request) {
                    Ok(response) => Ok(format!(
                        r#"{{"status":{},"body":{}}}"#,
                        response.status,
                        quoted(&String::from_utf8_lossy(&response.body))
                    )),
                    Err(http::HttpError::Denied(m)) => Err(ToolError::Denied(m)),
                    Err(other) => Err(ToolError::Failed(format!("{other:?}"))),
                }
            }
            other => Err(ToolError::InvalidArguments(format!("no tool {other:?}"))),
        }
    }
}

impl Lifecycle for Plugin {
    fn setup(session: String) -> Result<(), String> {
        SESSION.with_borrow_mut(|state| *state = (session, 0));
        Ok(())
    }

    fn teardown() {}
}

bindings::export!(Plugin with_types_in bindings);
