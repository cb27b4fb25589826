//! Plugin code written against `toolhost-sdk` the way authors write it:
//! hand-written specs, a hand-written `Tool`, and `#[tool]` functions of
//! every result kind. It only has to compile; when a change to the SDK
//! breaks it, that change breaks authors (bump the SDK's major version, say
//! so in the README, and update this crate).

use toolhost_sdk::content::IconTheme;
use toolhost_sdk::prelude::*;
use toolhost_sdk::{Icon, Tool, ToolOutput, ToolSpec, http, log, progress, terminal};

/// A spec written by hand with every optional part.
pub fn full_spec() -> ToolSpec {
    ToolSpec::new("forecast", "The weather forecast for a city.")
        .parameters(
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        )
        .toolset("weather")
        .permission("network:fetch")
        .requires_env("WEATHER_KEY")
        .emoji("🌦")
        .title("Forecast")
        .read_only(true)
        .destructive(false)
        .output_schema(r#"{"type":"object","properties":{"summary":{"type":"string"}}}"#)
        .icon(
            Icon::new("https://example.com/weather.png")
                .size("48x48")
                .theme(IconTheme::Light),
        )
        .icon(Icon::png(&[0x89, 0x50, 0x4e, 0x47]))
}

/// A spec written by hand with only what is required.
pub fn least_spec() -> ToolSpec {
    ToolSpec::new("ping", "Answers pong.")
}

/// Arguments derived from a type.
#[derive(Deserialize, JsonSchema)]
pub struct CityArgs {
    /// The city.
    pub city: String,
}

/// A spec whose parameters come from a type, read back by name.
pub fn typed_spec() -> (String, String) {
    let spec = ToolSpec::new("city", "Looks a city up.").parameters_of::<CityArgs>();
    (spec.name().to_string(), spec.description().to_string())
}

/// A tool written by hand.
pub struct Ping;

impl Tool for Ping {
    const NAME: &'static str = "ping";

    fn spec() -> ToolSpec {
        least_spec().read_only(true)
    }

    fn call(arguments: &str) -> Result<ToolOutput, ToolError> {
        if arguments.len() > 1024 {
            return Err(ToolError::invalid_arguments("too long"));
        }
        Ok(ToolOutput::json("\"pong\""))
    }
}

/// A result type with a schema.
#[derive(Serialize, JsonSchema)]
pub struct Summary {
    /// The summary.
    pub summary: String,
}

/// Returns JSON.
#[tool(toolset = "compile", read_only)]
fn as_value(args: CityArgs) -> Result<Value, ToolError> {
    log::info(format!("looking up {}", args.city));
    progress::report(1.0, Some(1.0), None);
    Ok(json!({ "city": args.city }))
}

/// Returns a typed result (and so declares an output schema).
#[tool(title = "Summarize", permissions = ["network:fetch"], read_only)]
fn as_struct(args: CityArgs) -> Result<Summary, ToolError> {
    let response = http::get(format!("https://example.com/{}", args.city))?;
    Ok(Summary {
        summary: response.text(),
    })
}

/// Returns an image.
#[tool(icon = "https://example.com/chart.png", read_only)]
fn as_image() -> Result<Image, ToolError> {
    Ok(Image::png(vec![0x89, 0x50, 0x4e, 0x47]))
}

/// Returns every kind of block and structured content.
#[tool(permissions = ["terminal:execute"], destructive)]
fn as_content() -> Result<Content, ToolError> {
    let output = terminal::run("date")?;
    Ok(Content::new()
        .text(output.stdout)
        .image(Image::jpeg(vec![0xff, 0xd8]))
        .audio(Audio::mp3(vec![0x49, 0x44, 0x33]))
        .link(ResourceLink::new("https://example.com/a.csv", "a.csv").mime_type("text/csv"))
        .resource(EmbeddedResource::text("file:///n.md", "# n").mime_type("text/markdown"))
        .resource(EmbeddedResource::blob("file:///b.pdf", vec![0x25]).mime_type("application/pdf"))
        .structured(&json!({ "ok": true })))
}

/// Returns a single block of each other kind.
#[tool(read_only)]
fn as_audio() -> Result<Audio, ToolError> {
    Ok(Audio::wav(vec![0x52, 0x49, 0x46, 0x46]))
}

/// Returns a link.
#[tool(read_only)]
fn as_link() -> Result<ResourceLink, ToolError> {
    Ok(ResourceLink::new("https://example.com", "home")
        .title("Home")
        .size(1))
}

/// Returns an embedded resource.
#[tool(read_only)]
fn as_resource() -> Result<EmbeddedResource, ToolError> {
    Ok(EmbeddedResource::text("file:///x.txt", "x"))
}

/// Matches on errors the way authors do.
pub fn describe(error: &ToolError) -> String {
    match error {
        ToolError::InvalidArguments(m) => format!("bad input: {m}"),
        ToolError::Denied(m) => format!("refused: {m}"),
        other => other.to_string(),
    }
}

fn setup(_session: &str) -> Result<(), String> {
    Ok(())
}

export_plugin!(
    stateful(setup = setup);
    as_value,
    as_struct,
    as_image,
    as_content,
    as_audio,
    as_link,
    as_resource,
    Ping
);
