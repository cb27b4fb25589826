//! MCP: the server (`server`: tools, calls, list changes, elicitation
//! approvals, served over stdio), its Streamable HTTP transport at `/mcp`
//! (`streamable`), and tools as `tools/list` entries (`tools`).

mod server;
pub(crate) mod streamable;
mod tools;

pub use server::{McpServer, poll_readable, serve_stdio};
pub use streamable::{McpHttp, http_service};
pub use tools::mcp_tool;
