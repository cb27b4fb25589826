//! Test guest: a plugin built against the released contract 0.2.1
//! (`wit/0.2.1`) with wit-bindgen directly: starts a background process and
//! waits for it (what 0.2.1 added to `terminal`).

#[allow(missing_docs, unreachable_pub, unused_qualifications)]
mod bindings {
    wit_bindgen::generate!({ path: "../../../wit/0.2.1", world: "plugin" });
}

use bindings::exports::toolhost::plugin::tool::Guest;
use bindings::toolhost::plugin::terminal;
use bindings::toolhost::plugin::types::{Manifest, ToolError, ToolSpec};

struct Plugin;

impl Guest for Plugin {
    fn describe() -> Manifest {
        Manifest {
            tools: vec![ToolSpec {
                name: "v021_background".into(),
                description: "Runs `echo background` in the background and waits for it.".into(),
                parameters: r#"{"type":"object"}"#.into(),
                toolset: "v021".into(),
                permissions: vec!["terminal:execute".into()],
                requires_env: vec![],
                emoji: None,
                read_only: true,
                destructive: false,
                title: None,
                output_schema: None,
            }],
            stateful: false,
        }
    }

    fn call(_name: String, _arguments: String) -> Result<String, ToolError> {
        let started = terminal::spawn(&terminal::BackgroundCommand {
            command_line: "echo background".into(),
            cwd: None,
            pty: None,
        });
        let id = started.map_err(|e| ToolError::Failed(format!("{e:?}")))?;
        let output = terminal::wait(id, 10_000).map_err(|e| ToolError::Failed(format!("{e:?}")))?;
        let exited = matches!(output.end, Some(terminal::ProcessEnd::Exited(0)));
        Ok(format!(
            r#"{{"stdout":"{}","exited":{exited}}}"#,
            output.stdout.trim()
        ))
    }
}

bindings::export!(Plugin with_types_in bindings);
