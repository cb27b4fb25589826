//! MCP: the server (`server`: tools and calls; `changes`: its session id
//! and list changes; `approve`:
//! approvals through elicitation, `ask`: through `input_required`; `logs`: guest logs forwarded; `handles`:
//! state named by handles for requests without sessions; `tasks`: long calls
//! as tasks), served over
//! stdio (`stdio`) and over its Streamable HTTP transport at `/mcp`
//! (`streamable`), and tools as `tools/list` entries (`tools`).

mod approve;
mod ask;
mod changes;
mod handles;
mod listen;
mod logs;
mod narrowing;
mod server;
mod stdio;
pub(crate) mod streamable;
mod tasks;
mod tools;

pub use server::McpServer;
pub(crate) use stdio::Lane;
pub use stdio::{poll_readable, serve_stdio};
pub use streamable::{McpHttp, http_service};
pub use tools::{mcp_tool, tools_list, tools_list_for};

/// The id the client gave the request `context` serves: the line transport
/// gives rmcp ids of its own ([`crate::serve::jsonrpc::ClientRequestId`]).
pub(crate) fn client_id(
    context: &rmcp::service::RequestContext<rmcp::service::RoleServer>,
) -> &rmcp::model::RequestId {
    context
        .extensions
        .get::<crate::serve::jsonrpc::ClientRequestId>()
        .map_or(&context.id, |client| &client.0)
}
