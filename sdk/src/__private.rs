//! Support code for the SDK's macros. Not part of the public API.

use serde::de::DeserializeOwned;

use crate::{ToolError, ToolSpec};

pub use wit_bindgen;

#[allow(missing_docs, unreachable_pub, unused_qualifications)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "full-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_plugin_world",
        default_bindings_module: "toolhost_sdk::__private::bindings",
        runtime_path: "toolhost_sdk::__private::wit_bindgen::rt",
    });
}

pub use bindings::exports::toolhost::plugin::lifecycle::Guest as GuestLifecycle;
pub use bindings::exports::toolhost::plugin::rich_tool::Guest as GuestRichTool;
pub use bindings::exports::toolhost::plugin::tool::Guest as GuestTool;
use bindings::toolhost::plugin::types as wit;
pub use bindings::toolhost::plugin::types::{
    Manifest, ToolError as WitToolError, ToolIcons as WitToolIcons, ToolOutput as WitToolOutput,
    ToolSpec as WitToolSpec,
};

use crate::content::{Block, IconTheme, IntoToolOutput, Output, ToolOutput};

/// JSON Schema of a tool's argument type, with subschemas inlined where
/// possible so models see one self-contained object.
pub fn schema_of<T: schemars::JsonSchema>() -> String {
    let schema = root_schema::<T>(schemars::generate::Contract::Deserialize);
    serde_json::to_string(&schema).expect("a JSON Schema serializes")
}

/// JSON Schema of a tool's result type as it serializes, when it describes
/// an object (a struct, a map); `None` for anything else (`Value`, strings,
/// lists), which has no output schema.
pub fn output_schema_of<T: schemars::JsonSchema>() -> Option<String> {
    let schema = root_schema::<T>(schemars::generate::Contract::Serialize);
    (schema.get("type") == Some(&serde_json::Value::from("object")))
        .then(|| serde_json::to_string(&schema).expect("a JSON Schema serializes"))
}

fn root_schema<T: schemars::JsonSchema>(
    contract: schemars::generate::Contract,
) -> schemars::Schema {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
            s.contract = contract;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>();
    schema.remove("title");
    schema
}

/// The `Ok` type of a tool function's result.
pub trait ToolResult {
    /// What the tool returns on success.
    type Output;
}

impl<T, E> ToolResult for Result<T, E> {
    type Output = T;
}

/// Finds the output schema of a tool's result type `T`, if `T` implements
/// `JsonSchema`, by method resolution at the `#[tool]` expansion (where `T`
/// is concrete): `(&&Probe::<T>::new()).output_schema()` picks
/// [`ProbeSchema`] when `T: JsonSchema`, else [`ProbeNoSchema`].
pub struct Probe<T>(std::marker::PhantomData<T>);

impl<T> Probe<T> {
    /// A probe for `T`.
    pub fn new() -> Self {
        Self(std::marker::PhantomData)
    }
}

impl<T> Default for Probe<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// [`Probe`] of a type with a schema.
pub trait ProbeSchema {
    /// The output schema.
    fn output_schema(&self) -> Option<String>;
}

impl<T: schemars::JsonSchema> ProbeSchema for &Probe<T> {
    fn output_schema(&self) -> Option<String> {
        output_schema_of::<T>()
    }
}

/// [`Probe`] of a type without one.
pub trait ProbeNoSchema {
    /// No output schema.
    fn output_schema(&self) -> Option<String>;
}

impl<T> ProbeNoSchema for Probe<T> {
    fn output_schema(&self) -> Option<String> {
        None
    }
}

/// Parses a call's arguments; serde's message becomes `invalid-arguments`.
pub fn parse_arguments<T: DeserializeOwned>(arguments: &str) -> Result<T, ToolError> {
    serde_json::from_str(arguments).map_err(ToolError::invalid_arguments)
}

/// A tool function's result as the host receives it.
pub fn into_output<T: IntoToolOutput, E: Into<ToolError>>(
    result: Result<T, E>,
) -> Result<ToolOutput, ToolError> {
    result.map_err(Into::into)?.into_tool_output()
}

/// The plugin manifest for `describe`.
pub fn manifest(stateful: bool, tools: Vec<ToolSpec>) -> Manifest {
    Manifest {
        stateful,
        tools: tools
            .into_iter()
            .map(|t| WitToolSpec {
                toolset: t.toolset.unwrap_or_else(|| t.name.clone()),
                name: t.name,
                description: t.description,
                parameters: t.parameters,
                permissions: t.permissions,
                requires_env: t.requires_env,
                emoji: t.emoji,
                read_only: t.read_only,
                destructive: t.destructive,
                title: t.title,
                output_schema: t.output_schema,
            })
            .collect(),
    }
}

/// The icons of the tools that have some, for `rich-tool.icons`.
pub fn icons(tools: Vec<ToolSpec>) -> Vec<WitToolIcons> {
    tools
        .into_iter()
        .filter(|t| !t.icons.is_empty())
        .map(|t| WitToolIcons {
            tool: t.name,
            icons: t
                .icons
                .into_iter()
                .map(|icon| wit::Icon {
                    src: icon.src,
                    mime_type: icon.mime_type,
                    sizes: icon.sizes,
                    theme: icon.theme.map(|theme| match theme {
                        IconTheme::Light => wit::IconTheme::Light,
                        IconTheme::Dark => wit::IconTheme::Dark,
                    }),
                })
                .collect(),
        })
        .collect()
}

/// A tool's output for `tool.call` (JSON text).
pub fn output_text(output: ToolOutput) -> String {
    output.into_text()
}

/// A tool's output for `rich-tool.call`.
pub fn output(output: ToolOutput) -> WitToolOutput {
    match output.0 {
        Output::Json(text) => WitToolOutput::Json(text),
        Output::Content(content) => WitToolOutput::Content(wit::ToolResult {
            content: content.blocks.into_iter().map(block).collect(),
            structured: content.structured.and_then(Result::ok),
        }),
    }
}

fn block(block: Block) -> wit::ContentBlock {
    match block {
        Block::Text(text) => wit::ContentBlock::Text(text),
        Block::Image(image) => wit::ContentBlock::Image(wit::Media {
            data: image.data,
            mime_type: image.mime_type,
        }),
        Block::Audio(audio) => wit::ContentBlock::Audio(wit::Media {
            data: audio.data,
            mime_type: audio.mime_type,
        }),
        Block::ResourceLink(link) => wit::ContentBlock::ResourceLink(wit::ResourceLink {
            uri: link.uri,
            name: link.name,
            title: link.title,
            description: link.description,
            mime_type: link.mime_type,
            size: link.size,
        }),
        Block::Resource(resource) => wit::ContentBlock::Resource(wit::EmbeddedResource {
            uri: resource.uri,
            mime_type: resource.mime_type,
            contents: match resource.contents {
                Ok(text) => wit::ResourceContents::Text(text),
                Err(blob) => wit::ResourceContents::Blob(blob),
            },
        }),
    }
}

/// The error for a call to a name this plugin does not export.
pub fn unknown_tool(name: &str) -> WitToolError {
    WitToolError::InvalidArguments(format!("this plugin has no tool named {name:?}"))
}

/// Default `setup` hook: accepts every session.
pub fn no_setup(_session: &str) -> Result<(), String> {
    Ok(())
}

/// Default `teardown` hook: does nothing.
pub fn no_teardown() {}

impl From<ToolError> for WitToolError {
    fn from(error: ToolError) -> Self {
        match error {
            ToolError::InvalidArguments(m) => Self::InvalidArguments(m),
            ToolError::Denied(m) => Self::Denied(m),
            ToolError::Failed(m) => Self::Failed(m),
        }
    }
}
