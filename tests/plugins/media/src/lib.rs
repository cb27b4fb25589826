//! Test guest: tools that return content blocks through the SDK (contract
//! 0.2.2): an image, every kind of block at once with structured content,
//! types the host refuses by default (SVG, HTML), an image of any size, a
//! link to any URI, a binary resource at any URI, text of any characters,
//! structured content checked against an output schema, and icons.

use toolhost_sdk::prelude::*;
use toolhost_sdk::{Icon, Tool, ToolOutput, ToolSpec};

/// A 1×1 red PNG.
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xfc, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x05, 0x02, 0x00, 0x5f, 0xc8, 0xf1, 0xd2, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Draws a 1×1 red PNG.
#[tool(
    toolset = "media",
    read_only,
    icon = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==",
    icon = "https://example.com/media.png"
)]
fn media_png() -> Result<Image, ToolError> {
    Ok(Image::png(PNG))
}

/// Returns one block of every kind, and structured content.
#[tool(toolset = "media", read_only)]
fn media_kinds() -> Result<Content, ToolError> {
    Ok(Content::new()
        .text("every kind:")
        .image(Image::png(PNG))
        .audio(Audio::wav(b"RIFF\0\0\0\0WAVE".to_vec()))
        .link(
            ResourceLink::new("https://example.com/report.csv", "report.csv")
                .mime_type("text/csv")
                .size(1234)
                .description("the full report"),
        )
        .resource(EmbeddedResource::text("file:///notes.md", "# notes").mime_type("text/markdown"))
        .resource(
            EmbeddedResource::blob("file:///report.pdf", b"%PDF-1.4".to_vec())
                .mime_type("application/pdf"),
        )
        .structured(&json!({ "blocks": 6 })))
}

/// Returns an SVG image, which hosts refuse unless they allow it by name.
#[tool(toolset = "media", read_only)]
fn media_svg() -> Result<Image, ToolError> {
    Ok(Image::new(
        b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>".to_vec(),
        "image/svg+xml",
    ))
}

/// Returns an HTML page as an embedded resource.
#[tool(toolset = "media", read_only)]
fn media_html() -> Result<EmbeddedResource, ToolError> {
    Ok(
        EmbeddedResource::text("https://example.com/page.html", "<script>alert(1)</script>")
            .mime_type("text/html"),
    )
}

/// Arguments of `media_sized`.
#[derive(Deserialize, JsonSchema)]
struct SizedArgs {
    /// How many bytes the image has.
    bytes: usize,
}

/// Returns a "PNG" of the given number of bytes.
#[tool(toolset = "media", read_only)]
fn media_sized(args: SizedArgs) -> Result<Image, ToolError> {
    Ok(Image::png(vec![0u8; args.bytes]))
}

/// Arguments of `media_link`.
#[derive(Deserialize, JsonSchema)]
struct LinkArgs {
    /// The URI to link to.
    uri: String,
}

/// Returns a link to the given URI.
#[tool(toolset = "media", read_only)]
fn media_link(args: LinkArgs) -> Result<ResourceLink, ToolError> {
    Ok(ResourceLink::new(args.uri, "the link"))
}

/// Arguments of `media_blob`.
#[derive(Deserialize, JsonSchema)]
struct BlobArgs {
    /// The resource's URI.
    uri: String,
    /// Its MIME type.
    mime_type: String,
    /// Its bytes, as text.
    data: String,
}

/// Returns a binary resource at the given URI.
#[tool(toolset = "media", read_only)]
fn media_blob(args: BlobArgs) -> Result<EmbeddedResource, ToolError> {
    Ok(EmbeddedResource::blob(args.uri, args.data.into_bytes()).mime_type(args.mime_type))
}

/// Arguments of `media_text`.
#[derive(Deserialize, JsonSchema)]
struct TextArgs {
    /// The text to repeat.
    fill: String,
    /// How many times.
    count: usize,
}

/// Returns one text block: `fill` repeated `count` times.
#[tool(toolset = "media", read_only)]
fn media_text(args: TextArgs) -> Result<Content, ToolError> {
    Ok(Content::new().text(args.fill.repeat(args.count)))
}

/// A hand-written tool whose content result carries structured content
/// checked against its output schema: `{"mode": "good"}` matches it, `"bad"`
/// does not, `"none"` gives none.
struct MediaCounted;

impl Tool for MediaCounted {
    const NAME: &'static str = "media_counted";

    fn spec() -> ToolSpec {
        ToolSpec::new(Self::NAME, "Returns text and a count.")
            .parameters(r#"{"type":"object","properties":{"mode":{"type":"string"}},"required":["mode"]}"#)
            .toolset("media")
            .read_only(true)
            .output_schema(r#"{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"]}"#)
            .icon(Icon::new("https://example.com/counted.webp").size("48x48"))
    }

    fn call(arguments: &str) -> Result<ToolOutput, ToolError> {
        let args: Value = serde_json::from_str(arguments)?;
        let content = Content::new().text("counted");
        let content = match args["mode"].as_str() {
            Some("good") => content.structured(&json!({ "count": 1 })),
            Some("bad") => content.structured(&json!({ "count": "one" })),
            _ => content,
        };
        Ok(content.into())
    }
}

export_plugin!(
    media_png,
    media_kinds,
    media_svg,
    media_html,
    media_sized,
    media_link,
    media_blob,
    media_text,
    MediaCounted
);
