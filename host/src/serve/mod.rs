//! Serving: MCP over stdio and Streamable HTTP, the OpenAI-style HTTP API,
//! and the tenants that call them.
//!
//! - [`mcp`]: the MCP server (tools/list, tools/call, list_changed,
//!   elicitation approvals) over stdio, and as a tower service for `/mcp`;
//!   `progress`: a call's progress reports as `notifications/progress`.
//! - [`http`]: the HTTP server: `/mcp` and `/v1/*` on one port, bearer-token
//!   authentication, body and time limits, a connection cap, graceful shutdown.
//!   `mcp::streamable` is `/mcp`: rmcp's Streamable HTTP service behind
//!   JSON-RPC checks of the body, with SSE priming only for clients that
//!   know it.
//! - `stdio`: the stdio transport of MCP, with JSON-RPC error answers,
//!   backpressure and a drain at shutdown; `jsonrpc`: the checks both use.
//! - [`api`]: the OpenAI-style routes under `/v1`; [`openai`]: the OpenAI
//!   shape of a batch, to and from the host's calls; [`content`]: a call's
//!   output in MCP's, Chat Completions' and Responses' shapes.
//! - `card`: the MCP server card at `/mcp/server-card`.
//! - `tasks`: `/v1/tasks` and async batches, on the host's task store.
//! - [`tenants`]: bearer tokens to callers, each with its profile, workspace
//!   and limits.

pub(crate) mod answers;
pub mod api;
mod approvals;
pub(crate) mod batch_body;
pub(crate) mod card;
mod connections;
pub mod content;
pub mod http;
mod jsonrpc;
mod lines;
pub mod mcp;
mod narrowings;
pub mod openai;
mod progress;
pub(crate) mod tasks;
pub mod tenants;

/// Waits until `count` is zero; whatever lowers it to zero notifies
/// `waiters` (`notify_waiters`).
pub(crate) async fn until_none(waiters: &tokio::sync::Notify, count: impl Fn() -> usize) {
    loop {
        let notified = waiters.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        if count() == 0 {
            return;
        }
        notified.await;
    }
}
