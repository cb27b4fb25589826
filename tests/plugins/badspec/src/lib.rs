//! Test guest: a plugin whose tool spec is invalid in several ways.

use toolhost_sdk::{ToolError, ToolOutput, ToolSpec, export_plugin};

#[allow(non_camel_case_types)]
struct bad {}

impl toolhost_sdk::Tool for bad {
    const NAME: &'static str = "bad name!";

    fn spec() -> ToolSpec {
        ToolSpec::new(Self::NAME, "")
            .parameters(r#"{"type":"string"}"#)
            .toolset("test")
            .permission("Not A Permission")
    }

    fn call(_arguments: &str) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::json("null"))
    }
}

export_plugin!(bad);
