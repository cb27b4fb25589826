//! Test guest: a plugin whose tool spec is invalid in several ways.

use toolhost_sdk::{ToolError, ToolSpec, export_plugin};

#[allow(non_camel_case_types)]
struct bad {}

impl toolhost_sdk::Tool for bad {
    const NAME: &'static str = "bad name!";

    fn spec() -> ToolSpec {
        ToolSpec {
            name: Self::NAME.into(),
            description: String::new(),
            parameters: r#"{"type":"string"}"#.into(),
            toolset: "test".into(),
            permissions: vec!["Not A Permission".into()],
            requires_env: vec![],
            emoji: None,
            read_only: false,
            destructive: false,
            title: None,
            output_schema: None,
        }
    }

    fn call(_arguments: &str) -> Result<String, ToolError> {
        Ok("null".into())
    }
}

export_plugin!(bad);
