//! How a call of a declarative tool runs: as a call of the wrapper plugin's
//! `invoke`, with the tool's definition beside its arguments.

use std::collections::HashMap;

/// Turns a call of a declarative tool into a call of the wrapper's `invoke`.
#[derive(Debug, Default)]
pub(crate) struct Adapter {
    definitions: HashMap<String, Box<str>>,
}

impl Adapter {
    /// An adapter for these tools' definitions (JSON text, by tool name).
    pub(crate) fn new(definitions: HashMap<String, Box<str>>) -> Self {
        Self { definitions }
    }

    /// The wrapper's tool.
    pub(crate) const TOOL: &'static str = "invoke";

    /// The wrapper's arguments for a call of `tool` with `arguments` (a JSON
    /// object, already validated against the tool's schema).
    pub(crate) fn arguments(&self, tool: &str, arguments: &str) -> String {
        let definition = self.definitions.get(tool).map_or("null", |d| d);
        format!("{{\"definition\":{definition},\"arguments\":{arguments}}}")
    }
}
