//! MCP: the server (`server`: tools, calls, list changes, elicitation
//! approvals, served over stdio) and its Streamable HTTP transport at `/mcp`
//! (`streamable`).

mod server;
pub(crate) mod streamable;

pub use server::{McpServer, poll_readable, serve_stdio};
pub use streamable::{McpHttp, http_service};
