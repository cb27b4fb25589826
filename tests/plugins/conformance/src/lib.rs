//! Test guest: the fixture tools of the official MCP conformance suite
//! (0.1.16) that the contract can express: text, image, audio, embedded
//! resource and mixed results, tool errors, log messages, progress, and a
//! JSON Schema 2020-12 input schema, for `scripts/conformance.sh`. The data
//! and texts are the suite's reference server's.

use toolhost_sdk::prelude::*;
use toolhost_sdk::{Tool, ToolOutput, ToolSpec};

/// The suite's 1×1 red PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xfc, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x05, 0x02, 0x00, 0x5f, 0xc8, 0xf1, 0xd2, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// The suite's WAV clip (a header and one sample).
const WAV: &[u8] = &[
    0x52, 0x49, 0x46, 0x46, 0x26, 0x00, 0x00, 0x00, 0x57, 0x41, 0x56, 0x45, 0x66, 0x6d, 0x74, 0x20,
    0x10, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x40, 0x1f, 0x00, 0x00, 0x00, 0x7d, 0x00, 0x00,
    0x02, 0x00, 0x10, 0x00, 0x64, 0x61, 0x74, 0x61, 0x02, 0x00, 0x00, 0x00,
];

/// Returns an image.
#[tool(toolset = "conformance", read_only)]
fn test_image_content() -> Result<Image, ToolError> {
    Ok(Image::png(PNG))
}

/// Returns an audio clip.
#[tool(toolset = "conformance", read_only)]
fn test_audio_content() -> Result<Audio, ToolError> {
    Ok(Audio::wav(WAV))
}

/// Returns an embedded resource.
#[tool(toolset = "conformance", read_only)]
fn test_embedded_resource() -> Result<EmbeddedResource, ToolError> {
    Ok(EmbeddedResource::text(
        "test://embedded-resource",
        "This is an embedded resource content.",
    ))
}

/// Returns text, an image and an embedded resource at once.
#[tool(toolset = "conformance", read_only)]
fn test_multiple_content_types() -> Result<Content, ToolError> {
    Ok(Content::new()
        .text("Multiple content types test:")
        .image(Image::png(PNG))
        .resource(
            EmbeddedResource::text(
                "test://mixed-content-resource",
                r#"{"test":"data","value":123}"#,
            )
            .mime_type("application/json"),
        ))
}

/// A tool whose input schema is JSON Schema 2020-12 with `$defs` and a
/// `$ref` (the suite's pending `json-schema-2020-12` scenario).
struct JsonSchema202012;

impl Tool for JsonSchema202012 {
    const NAME: &'static str = "json_schema_2020_12_tool";

    fn spec() -> ToolSpec {
        ToolSpec::new(
            Self::NAME,
            "Takes a name and an address (JSON Schema 2020-12).",
        )
        .parameters(
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "type": "object",
                        "properties": {
                            "street": { "type": "string" },
                            "city": { "type": "string" },
                        },
                    },
                },
                "properties": {
                    "name": { "type": "string" },
                    "address": { "$ref": "#/$defs/address" },
                },
                "additionalProperties": false,
            })
            .to_string(),
        )
        .toolset("conformance")
        .read_only(true)
    }

    fn call(arguments: &str) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::json(format!(r#"{{"received":{arguments}}}"#)))
    }
}

/// Returns a simple text response.
#[tool(toolset = "conformance", read_only)]
fn test_simple_text() -> Result<Value, ToolError> {
    Ok(json!("This is a simple text response for testing."))
}

/// Always fails, with a message.
#[tool(toolset = "conformance", read_only)]
fn test_error_handling() -> Result<Value, ToolError> {
    Err(ToolError::Failed(
        "This tool intentionally returns an error for testing".into(),
    ))
}

/// Sends three log messages while it runs.
#[tool(toolset = "conformance", read_only)]
fn test_tool_with_logging() -> Result<Value, ToolError> {
    toolhost_sdk::log::info("Tool execution started");
    toolhost_sdk::log::info("Tool processing data");
    toolhost_sdk::log::info("Tool execution completed");
    Ok(json!("Logged three messages."))
}

/// Reports progress three times (0, 50 and 100 of 100), 50 ms apart.
#[tool(toolset = "conformance", read_only)]
fn test_tool_with_progress() -> Result<Value, ToolError> {
    for (step, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if step > 0 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        toolhost_sdk::progress::report(
            done,
            Some(100.0),
            Some(&format!("Completed step {done} of 100")),
        );
    }
    Ok(json!("Reported progress three times."))
}

export_plugin!(
    test_simple_text,
    test_image_content,
    test_audio_content,
    test_embedded_resource,
    test_multiple_content_types,
    test_error_handling,
    test_tool_with_logging,
    test_tool_with_progress,
    JsonSchema202012
);
