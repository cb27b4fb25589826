//! Hooks for embedders: observe every call, and veto calls before they run.
//! Audit, metrics and approvals plug in here.

use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::contract::spec::ToolSpec;
use crate::error::CallError;
use crate::runtime::PluginVersion;

/// A boxed future, as hooks return them.
pub use futures::future::BoxFuture;

/// What a hook knows about a call.
#[derive(Debug, Clone, Copy)]
pub struct CallInfo<'a> {
    /// The tool being called.
    pub tool: &'a ToolSpec,
    /// The plugin version that runs it.
    pub plugin: &'a PluginVersion,
    /// The arguments, already validated against the tool's schema.
    pub arguments: &'a Value,
    /// The session id, if the call carries one.
    pub session: Option<&'a str>,
    /// The model's `tool_call_id`, if the call carries one.
    pub call_id: Option<&'a str>,
    /// The tenant making the call, if any.
    pub tenant: Option<&'a str>,
    /// The name of the permission profile the call runs under.
    pub profile: &'a str,
}

/// Observes and may veto calls. Both methods have do-nothing defaults.
pub trait CallHook: Send + Sync + 'static {
    /// Runs after the arguments are validated and before the tool runs.
    /// `Err(message)` blocks the call; the model sees
    /// `{"error": "blocked: <message>"}`.
    fn before_call<'a>(&'a self, call: &'a CallInfo<'a>) -> BoxFuture<'a, Result<(), String>> {
        let _ = call;
        Box::pin(async { Ok(()) })
    }

    /// Runs after the call, with its result and how long it took.
    fn after_call(
        &self,
        call: &CallInfo<'_>,
        result: Result<&RawValue, &CallError>,
        duration: Duration,
    ) {
        let _ = (call, result, duration);
    }
}
