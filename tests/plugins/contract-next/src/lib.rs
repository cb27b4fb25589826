//! Test guest: a plugin built against contract version 0.2.3, written with
//! wit-bindgen directly (no SDK).

#[allow(missing_docs, unreachable_pub, unused_qualifications)]
mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "plugin" });
}

use bindings::exports::toolhost::plugin::tool::Guest;
use bindings::toolhost::plugin::types::{Manifest, ToolError, ToolSpec};

struct Plugin;

impl Guest for Plugin {
    fn describe() -> Manifest {
        Manifest {
            tools: vec![ToolSpec {
                name: "contract_version".into(),
                description: "Says which contract version the plugin was built against.".into(),
                parameters: r#"{"type":"object","properties":{}}"#.into(),
                toolset: "contract".into(),
                permissions: vec![],
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

    fn about() -> String {
        "a plugin built against 0.2.3".into()
    }

    fn call(_name: String, _arguments: String) -> Result<String, ToolError> {
        Ok("\"0.2.3\"".into())
    }
}

bindings::export!(Plugin with_types_in bindings);
