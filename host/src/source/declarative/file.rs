//! The format of a declarative tool file: its tables and keys as read, and
//! the values some keys take.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    pub(super) toolset: Option<String>,
    pub(super) base_url: Option<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    pub(super) auth: Option<Auth>,
    pub(super) timeout: Option<String>,
    #[serde(default)]
    pub(super) tools: Vec<Tool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Tool {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) toolset: Option<String>,
    pub(super) method: Option<String>,
    pub(super) url: String,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    pub(super) auth: Option<Auth>,
    pub(super) timeout: Option<String>,
    pub(super) emoji: Option<String>,
    pub(super) title: Option<String>,
    pub(super) read_only: Option<bool>,
    pub(super) destructive: Option<bool>,
    #[serde(default)]
    pub(super) parameters: toml::map::Map<String, toml::Value>,
    #[serde(default)]
    pub(super) response: Response,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Parameter {
    #[serde(rename = "type", default = "string")]
    pub(super) ty: String,
    pub(super) description: Option<String>,
    #[serde(default)]
    pub(super) required: bool,
    #[serde(rename = "in")]
    pub(super) location: Option<String>,
    #[serde(rename = "enum")]
    pub(super) values: Option<Vec<toml::Value>>,
    pub(super) default: Option<toml::Value>,
    /// Element type of an array.
    pub(super) items: Option<String>,
}

fn string() -> String {
    "string".into()
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct Auth {
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) env: Option<String>,
    pub(super) name: Option<String>,
    pub(super) username_env: Option<String>,
    pub(super) password_env: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct Response {
    pub(super) format: Option<String>,
    pub(super) pointer: Option<String>,
}

pub(super) const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];
pub(super) const TYPES: &[&str] = &["string", "integer", "number", "boolean", "array", "object"];
pub(super) const LOCATIONS: &[&str] = &["path", "query", "header", "body"];
pub(super) const FORMATS: &[&str] = &["json", "text", "raw"];
