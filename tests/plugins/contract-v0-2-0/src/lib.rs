//! Test guest: a plugin built against the released contract 0.2.0
//! (`wit/0.2.0`) with wit-bindgen directly: a tool with a title and an
//! output schema that reports progress (what 0.2.0 added).

#[allow(missing_docs, unreachable_pub, unused_qualifications)]
mod bindings {
    wit_bindgen::generate!({ path: "../../../wit/0.2.0", world: "plugin" });
}

use bindings::exports::toolhost::plugin::tool::Guest;
use bindings::toolhost::plugin::progress;
use bindings::toolhost::plugin::types::{Manifest, ToolError, ToolSpec};

struct Plugin;

impl Guest for Plugin {
    fn describe() -> Manifest {
        Manifest {
            tools: vec![ToolSpec {
                name: "v020_steps".into(),
                description: "Takes three steps, reporting each.".into(),
                parameters: r#"{"type":"object"}"#.into(),
                toolset: "v020".into(),
                permissions: vec![],
                requires_env: vec![],
                emoji: None,
                read_only: true,
                destructive: false,
                title: Some("Three steps".into()),
                output_schema: Some(
                    r#"{"type":"object","properties":{"steps":{"type":"integer"}},"required":["steps"]}"#
                        .into(),
                ),
            }],
            stateful: false,
        }
    }

    fn call(_name: String, _arguments: String) -> Result<String, ToolError> {
        for step in 1..=3 {
            progress::report(f64::from(step), Some(3.0), Some(&format!("step {step}")));
        }
        Ok(r#"{"steps":3}"#.into())
    }
}

bindings::export!(Plugin with_types_in bindings);
