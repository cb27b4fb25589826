//! Handles over MCP, for requests of revisions without sessions
//! (2026-07-28 on): the `handle` property added to the schemas and
//! descriptions of tools that keep state, taken out of the arguments before
//! the guest sees them, checked, and given back in every result.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, MetaObject, RequestMetaObject};
use serde_json::{Map, Value, json};

use crate::caller::Caller;
use crate::handles::{Claimed, HandleError, TERMINAL};
use crate::host::Host;
use crate::runtime::{PluginVersion, SessionState};

/// The property a tool's handle goes in, unless the tool has one of that
/// name already.
const PROPERTY: &str = "handle";
/// The property then.
const FALLBACK: &str = "toolhost_handle";
/// The key of the handle in a result's `_meta`.
pub(super) const META_KEY: &str = "dev.toolhost/handle";

/// Whether the request speaks a revision without sessions: its `_meta`
/// names one that has no `initialize`.
pub(super) fn stateless(meta: &RequestMetaObject) -> bool {
    meta.protocol_version()
        .is_some_and(|version| !version.has_initialize())
}

/// A part of a conversation's state a tool uses.
enum Part {
    /// The instance of a stateful plugin.
    Plugin(Arc<PluginVersion>),
    /// The terminal session.
    Terminal,
}

impl Part {
    fn name(&self) -> &str {
        match self {
            Self::Plugin(plugin) => plugin.name(),
            Self::Terminal => TERMINAL,
        }
    }

    /// What made it: the plugin version, by hash and identity.
    fn maker(&self) -> String {
        match self {
            Self::Plugin(plugin) => format!("{}@{:p}", plugin.hash(), Arc::as_ptr(plugin)),
            Self::Terminal => String::new(),
        }
    }
}

/// The parts of state tool `name` uses: its plugin's instance when the
/// plugin is stateful, the terminal when it declares a terminal permission.
fn parts(host: &Host, name: &str) -> Vec<Part> {
    let snapshot = host.snapshot();
    let Some(entry) = snapshot.tool(name) else {
        return Vec::new();
    };
    let mut parts = Vec::new();
    if entry.plugin.is_stateful() {
        parts.push(Part::Plugin(entry.plugin.clone()));
    }
    if entry
        .spec
        .permissions
        .iter()
        .any(|p| p.starts_with("terminal:"))
    {
        parts.push(Part::Terminal);
    }
    parts
}

/// The property that carries the handle in `schema` (a tool's input schema).
fn property(schema: &Value) -> &'static str {
    match schema.pointer("/properties/handle") {
        Some(_) => FALLBACK,
        None => PROPERTY,
    }
}

/// Adds the handle to each listed tool that keeps state: an optional
/// property in its input schema (and output schema, when it has one) and a
/// sentence in its description.
pub(super) fn list(host: &Host, tools: &mut [Value]) {
    let idle = crate::policy::show_duration(host.session_idle());
    let max_age = crate::policy::show_duration(host.handles().settings().max_age);
    for tool in tools {
        let name = tool["name"].as_str().unwrap_or_default().to_string();
        let parts = parts(host, &name);
        if parts.is_empty() {
            continue;
        }
        let key = property(&tool["inputSchema"]);
        let kept = parts
            .iter()
            .map(|part| match part {
                Part::Plugin(plugin) => format!("the data of plugin {}", plugin.name()),
                Part::Terminal => {
                    "the terminal's working directory, exported variables and background \
                     processes"
                        .to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" and ");
        let described = format!(
            "{} Keeps state between calls ({kept}): pass the \"{key}\" from the previous \
             result of this conversation to continue it; omit it to start new state. State is \
             dropped after {idle} without a call, when the plugin is reloaded, and {max_age} \
             after it was made; a call with a dropped handle fails with state_lost and runs \
             nothing.",
            tool["description"].as_str().unwrap_or_default()
        );
        tool["description"] = json!(described.trim_start());
        add_property(
            &mut tool["inputSchema"],
            key,
            json!({
                "type": "string",
                "description": "The handle from the previous result of this conversation: \
                                continues its state. Omit it to start new state.",
            }),
        );
        if tool.get("outputSchema").is_some_and(Value::is_object) {
            add_property(
                &mut tool["outputSchema"],
                key,
                json!({"type": "string", "description": "Pass it back to keep this state."}),
            );
        }
    }
}

fn add_property(schema: &mut Value, key: &str, definition: Value) {
    let Some(schema) = schema.as_object_mut() else {
        return;
    };
    let properties = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(properties) = properties.as_object_mut() {
        properties.insert(key.to_string(), definition);
    }
}

/// A call's handle, claimed for the call.
pub(super) struct InCall<'a> {
    claimed: Claimed<'a>,
    parts: Vec<Part>,
    key: &'static str,
    host: &'a Host,
    tenant: Option<String>,
}

/// Takes the handle out of `arguments` for tool `name` when it keeps state:
/// the handle claimed (or a new one), with the session the call runs in;
/// `Ok(None)` for a tool that keeps none; the error the call gets when the
/// handle is refused.
pub(super) fn take<'a>(
    host: &'a Host,
    caller: &Caller,
    name: &str,
    arguments: &mut Map<String, Value>,
) -> Result<Option<InCall<'a>>, HandleError> {
    let parts = parts(host, name);
    if parts.is_empty() {
        return Ok(None);
    }
    let schema = host
        .snapshot()
        .tool(name)
        .map(|entry| entry.spec.parameters.clone())
        .unwrap_or_default();
    let key = property(&schema);
    let tenant = caller.tenant_name();
    let handles = host.handles();
    let claimed = match arguments.remove(key) {
        None | Some(Value::Null) => handles.mint(tenant, caller.profile())?,
        Some(Value::String(text)) => handles.claim(&text, tenant, caller.profile())?,
        Some(other) => return Err(crate::handles::invalid(&other.to_string())),
    };
    let session = crate::runtime::session_key(tenant, &claimed.session());
    for part in &parts {
        let Some(maker) = claimed.parts.get(part.name()) else {
            continue;
        };
        if let Some(reason) = gone(host, part, maker, &session) {
            return Err(claimed.lose(reason));
        }
    }
    for part in parts
        .iter()
        .filter(|p| !claimed.parts.contains_key(p.name()))
    {
        match part {
            Part::Terminal => claimed.make_room(TERMINAL, || host.terminals().has_room(tenant)),
            Part::Plugin(plugin) => claimed.make_room(plugin.name(), || {
                plugin.has_session_room(tenant.unwrap_or_default())
            }),
        }
    }
    Ok(Some(InCall {
        claimed,
        parts,
        key,
        host,
        tenant: tenant.map(String::from),
    }))
}

/// Why a part the handle made is gone, if it is.
fn gone(host: &Host, part: &Part, maker: &str, session: &str) -> Option<String> {
    match part {
        Part::Plugin(plugin) => {
            if part.maker() != maker {
                return Some(format!(
                    "plugin {:?} was reloaded, and its instance ended with the old version",
                    plugin.name()
                ));
            }
            match plugin.keep_session(session) {
                SessionState::Live => None,
                SessionState::Empty => Some(format!(
                    "plugin {:?}'s instance crashed or ran out of time in an earlier call, and \
                     its state went with it",
                    plugin.name()
                )),
                SessionState::Missing => Some(format!(
                    "plugin {:?}'s instance was torn down (idle for session_idle, or unloaded)",
                    plugin.name()
                )),
            }
        }
        Part::Terminal => (!host.terminals().keep(session)).then(|| {
            "its terminal session ended (idle for session_idle, or the configuration file \
             changed)"
                .to_string()
        }),
    }
}

impl InCall<'_> {
    /// The session the call runs in.
    pub(super) fn session(&self) -> String {
        self.claimed.session()
    }

    /// Whether the call must find its plugin's instance made by an earlier
    /// call (and fail rather than start a fresh one).
    pub(super) fn resumes(&self) -> bool {
        self.parts.iter().any(|part| {
            matches!(part, Part::Plugin(_)) && self.claimed.parts.contains_key(part.name())
        })
    }

    /// Drops the handle's state, which the call found gone; the error the
    /// call gets.
    pub(super) fn lost(self, reason: &str) -> HandleError {
        self.claimed.lose(reason.to_string())
    }

    /// Notes the parts the call made, and puts the handle in `result`: a
    /// text block, `structuredContent` and `_meta`. A new conversation
    /// whose first call kept no state (refused before it ran) gets none.
    pub(super) fn finish(mut self, result: &mut CallToolResult) {
        let session = crate::runtime::session_key(self.tenant.as_deref(), &self.claimed.session());
        let mut kept = false;
        for part in &self.parts {
            let made = match part {
                Part::Plugin(plugin) => plugin.keep_session(&session) == SessionState::Live,
                Part::Terminal => self.host.terminals().keep(&session),
            };
            if made {
                self.claimed.record(part.name(), &part.maker());
                kept = true;
            }
        }
        if !self.claimed.settle(kept) {
            return;
        }
        let text = &self.claimed.text;
        result.content.push(ContentBlock::text(format!(
            "{}: {text} (pass it as \"{}\" to keep this state)",
            self.key, self.key
        )));
        match &mut result.structured_content {
            Some(Value::Object(object)) => {
                object.insert(self.key.to_string(), json!(text));
            }
            Some(_) => {}
            None => result.structured_content = Some(json!({ self.key: text })),
        }
        result
            .meta
            .get_or_insert_with(MetaObject::default)
            .insert(META_KEY.to_string(), json!(text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_with_a_handle_of_its_own_gets_toolhost_handle() {
        let own = json!({"type": "object", "properties": {"handle": {"type": "integer"}}});
        assert_eq!(property(&own), FALLBACK);
        let plain = json!({"type": "object", "properties": {"x": {}}});
        assert_eq!(property(&plain), PROPERTY);
        let mut bare = json!({"type": "object", "additionalProperties": false});
        add_property(&mut bare, PROPERTY, json!({"type": "string"}));
        assert_eq!(bare["properties"]["handle"]["type"], "string");
        assert!(bare.get("required").is_none());
    }
}
