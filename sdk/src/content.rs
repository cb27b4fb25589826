//! Results beyond JSON: text, images, audio, resource links and embedded
//! resources, several at once, with structured content alongside; and tool
//! icons. A tool returns one of these instead of a `Serialize` value:
//!
//! ```ignore
//! use toolhost_sdk::prelude::*;
//!
//! /// Draw the chart as a PNG.
//! #[tool(read_only)]
//! fn chart(args: ChartArgs) -> Result<Image, ToolError> {
//!     Ok(Image::png(render(&args)?))
//! }
//!
//! /// Describe the chart, with the picture and the numbers.
//! #[tool(read_only)]
//! fn report(args: ChartArgs) -> Result<Content, ToolError> {
//!     Ok(Content::new()
//!         .text("Sales by month:")
//!         .image(Image::png(render(&args)?))
//!         .structured(&totals(&args)))
//! }
//! ```
//!
//! The host passes the blocks to MCP clients as content blocks and to the
//! OpenAI-style API in the shape the caller asks for. Binary data counts
//! toward the output limit as base64, and MIME types must be among those the
//! host allows (`results.mime_types`; PNG, JPEG, GIF, WebP, WAV, MP3, Ogg,
//! plain text, Markdown, CSV, JSON and PDF by default).

use base64::Engine as _;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::ToolError;

/// An image: bytes with their MIME type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub(crate) data: Vec<u8>,
    pub(crate) mime_type: String,
}

impl Image {
    /// An image of any MIME type (`image/avif`, ...).
    pub fn new(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Self {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }

    /// A PNG image.
    pub fn png(data: impl Into<Vec<u8>>) -> Self {
        Self::new(data, "image/png")
    }

    /// A JPEG image.
    pub fn jpeg(data: impl Into<Vec<u8>>) -> Self {
        Self::new(data, "image/jpeg")
    }

    /// A GIF image.
    pub fn gif(data: impl Into<Vec<u8>>) -> Self {
        Self::new(data, "image/gif")
    }

    /// A WebP image.
    pub fn webp(data: impl Into<Vec<u8>>) -> Self {
        Self::new(data, "image/webp")
    }
}

/// An audio clip: bytes with their MIME type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audio {
    pub(crate) data: Vec<u8>,
    pub(crate) mime_type: String,
}

impl Audio {
    /// Audio of any MIME type.
    pub fn new(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Self {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }

    /// WAV audio (`audio/wav`).
    pub fn wav(data: impl Into<Vec<u8>>) -> Self {
        Self::new(data, "audio/wav")
    }

    /// MP3 audio (`audio/mpeg`).
    pub fn mp3(data: impl Into<Vec<u8>>) -> Self {
        Self::new(data, "audio/mpeg")
    }

    /// Ogg audio (`audio/ogg`).
    pub fn ogg(data: impl Into<Vec<u8>>) -> Self {
        Self::new(data, "audio/ogg")
    }
}

/// A link to a resource that the client reads or fetches itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceLink {
    pub(crate) uri: String,
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) mime_type: Option<String>,
    pub(crate) size: Option<u64>,
}

impl ResourceLink {
    /// A link to `uri` (absolute: `https://...`, `file:///...`), named `name`.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
        }
    }

    /// A human-readable title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// What the resource is.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Its MIME type.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Its size in bytes.
    pub fn size(mut self, bytes: u64) -> Self {
        self.size = Some(bytes);
        self
    }
}

/// A resource's contents, embedded in the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedResource {
    pub(crate) uri: String,
    pub(crate) mime_type: Option<String>,
    pub(crate) contents: Result<String, Vec<u8>>,
}

impl EmbeddedResource {
    /// Text at `uri` (`text/plain` unless [`mime_type`](Self::mime_type)
    /// says otherwise).
    pub fn text(uri: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            mime_type: None,
            contents: Ok(text.into()),
        }
    }

    /// Bytes at `uri` (`application/octet-stream` unless
    /// [`mime_type`](Self::mime_type) says otherwise).
    pub fn blob(uri: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        Self {
            uri: uri.into(),
            mime_type: None,
            contents: Err(data.into()),
        }
    }

    /// Its MIME type.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// One block of a result.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Block {
    /// Text.
    Text(String),
    /// An image.
    Image(Image),
    /// An audio clip.
    Audio(Audio),
    /// A link to a resource.
    ResourceLink(ResourceLink),
    /// A resource's contents.
    Resource(EmbeddedResource),
}

macro_rules! block_from {
    ($($ty:ty => $variant:ident),*) => {$(
        impl From<$ty> for Block {
            fn from(value: $ty) -> Self {
                Self::$variant(value)
            }
        }

        impl From<$ty> for Content {
            fn from(value: $ty) -> Self {
                Content::new().push(value)
            }
        }
    )*};
}

block_from!(
    String => Text,
    Image => Image,
    Audio => Audio,
    ResourceLink => ResourceLink,
    EmbeddedResource => Resource
);

/// A result of several blocks, and structured content alongside them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Content {
    pub(crate) blocks: Vec<Block>,
    pub(crate) structured: Option<Result<String, String>>,
}

impl Content {
    /// No blocks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a block.
    pub fn push(mut self, block: impl Into<Block>) -> Self {
        self.blocks.push(block.into());
        self
    }

    /// Adds a text block.
    pub fn text(self, text: impl Into<String>) -> Self {
        self.push(text.into())
    }

    /// Adds an image.
    pub fn image(self, image: Image) -> Self {
        self.push(image)
    }

    /// Adds an audio clip.
    pub fn audio(self, audio: Audio) -> Self {
        self.push(audio)
    }

    /// Adds a link to a resource.
    pub fn link(self, link: ResourceLink) -> Self {
        self.push(link)
    }

    /// Adds a resource's contents.
    pub fn resource(self, resource: EmbeddedResource) -> Self {
        self.push(resource)
    }

    /// Sets the structured content (MCP `structuredContent`): `value` must
    /// serialize to a JSON object. A tool with an output schema must set one
    /// that matches it.
    pub fn structured(mut self, value: &impl Serialize) -> Self {
        self.structured = Some(serde_json::to_string(value).map_err(|e| e.to_string()));
        self
    }

    /// The blocks, in order.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }
}

/// An icon of a tool: an `https:` URL or a `data:` URI of a raster image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icon {
    pub(crate) src: String,
    pub(crate) mime_type: Option<String>,
    pub(crate) sizes: Vec<String>,
    pub(crate) theme: Option<IconTheme>,
}

/// The background an icon is drawn for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IconTheme {
    /// A light background.
    Light,
    /// A dark background.
    Dark,
}

impl Icon {
    /// An icon at `src` (`https://...`, or `data:image/png;base64,...`).
    /// Its MIME type is taken from a `data:` URI or from the file name's
    /// extension (`.png`, `.jpg`, `.gif`, `.webp`) when it has one.
    pub fn new(src: impl Into<String>) -> Self {
        let src = src.into();
        let mime_type = match src.strip_prefix("data:") {
            Some(data) => data.split([';', ',']).next().map(str::to_string),
            None => {
                let path = src.split(['?', '#']).next().unwrap_or("");
                let extension = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
                match extension.as_deref() {
                    Some("png") => Some("image/png".to_string()),
                    Some("jpg" | "jpeg") => Some("image/jpeg".to_string()),
                    Some("gif") => Some("image/gif".to_string()),
                    Some("webp") => Some("image/webp".to_string()),
                    _ => None,
                }
            }
        };
        Self {
            src,
            mime_type,
            sizes: Vec::new(),
            theme: None,
        }
    }

    /// A PNG icon of `data`, as a `data:` URI.
    pub fn png(data: &[u8]) -> Self {
        let encoded = base64::engine::general_purpose::STANDARD.encode(data);
        Self::new(format!("data:image/png;base64,{encoded}"))
    }

    /// Its MIME type (`image/png`), when [`Icon::new`] cannot tell it.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Adds a size it is drawn for: `"48x48"`, or `"any"`.
    pub fn size(mut self, size: impl Into<String>) -> Self {
        self.sizes.push(size.into());
        self
    }

    /// The background it is drawn for.
    pub fn theme(mut self, theme: IconTheme) -> Self {
        self.theme = Some(theme);
        self
    }
}

/// What a tool returns to the host: JSON text, or content blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput(pub(crate) Output);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Output {
    Json(String),
    Content(Content),
}

impl ToolOutput {
    /// JSON text (text that is not JSON reaches the model as a JSON string).
    pub fn json(text: impl Into<String>) -> Self {
        Self(Output::Json(text.into()))
    }

    /// The result as JSON text, for hosts older than contract 0.2.2, which
    /// take only that: content in MCP's shape, binary data as base64.
    pub(crate) fn into_text(self) -> String {
        match self.0 {
            Output::Json(text) => text,
            Output::Content(content) => content_json(&content).to_string(),
        }
    }
}

impl From<Content> for ToolOutput {
    fn from(content: Content) -> Self {
        Self(Output::Content(content))
    }
}

/// A tool function's result type: anything that serializes (returned as
/// JSON), or content ([`Content`], [`Image`], [`Audio`], [`ResourceLink`],
/// [`EmbeddedResource`]).
pub trait IntoToolOutput {
    /// The output, or why it cannot be made.
    fn into_tool_output(self) -> Result<ToolOutput, ToolError>;
}

impl<T: Serialize> IntoToolOutput for T {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        serde_json::to_string(&self)
            .map(ToolOutput::json)
            .map_err(|e| ToolError::failed(format!("result is not serializable as JSON: {e}")))
    }
}

macro_rules! content_output {
    ($($ty:ty),*) => {$(
        impl IntoToolOutput for $ty {
            fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
                Content::from(self).into_tool_output()
            }
        }
    )*};
}

content_output!(Image, Audio, ResourceLink, EmbeddedResource);

impl IntoToolOutput for Content {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        if let Some(Err(e)) = &self.structured {
            return Err(ToolError::failed(format!(
                "structured content is not serializable as JSON: {e}"
            )));
        }
        Ok(self.into())
    }
}

impl IntoToolOutput for ToolOutput {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok(self)
    }
}

/// Content in MCP's `CallToolResult` shape.
fn content_json(content: &Content) -> Value {
    let b64 = |data: &[u8]| base64::engine::general_purpose::STANDARD.encode(data);
    let blocks = content.blocks.iter().map(|block| match block {
        Block::Text(text) => json!({ "type": "text", "text": text }),
        Block::Image(image) => {
            json!({ "type": "image", "data": b64(&image.data), "mimeType": image.mime_type })
        }
        Block::Audio(audio) => {
            json!({ "type": "audio", "data": b64(&audio.data), "mimeType": audio.mime_type })
        }
        Block::ResourceLink(link) => {
            json!({ "type": "resource_link", "uri": link.uri, "name": link.name, "mimeType": link.mime_type })
        }
        Block::Resource(resource) => {
            let mut inner = json!({ "uri": resource.uri, "mimeType": resource.mime_type });
            match &resource.contents {
                Ok(text) => inner["text"] = json!(text),
                Err(blob) => inner["blob"] = json!(b64(blob)),
            }
            json!({ "type": "resource", "resource": inner })
        }
    });
    let mut result = Map::new();
    result.insert("content".into(), Value::Array(blocks.collect()));
    if let Some(Ok(structured)) = &content.structured
        && let Ok(value) = serde_json::from_str::<Value>(structured)
    {
        result.insert("structuredContent".into(), value);
    }
    Value::Object(result)
}
