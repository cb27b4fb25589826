//! Serving: MCP over stdio and Streamable HTTP, the OpenAI-style HTTP API,
//! and the tenants that call them.
//!
//! - [`mcp`]: the MCP server (tools/list, tools/call, list_changed,
//!   elicitation approvals) over stdio, and as a tower service for `/mcp`.
//! - [`http`]: the HTTP server: `/mcp` and `/v1/*` on one port, bearer-token
//!   authentication, body and time limits, a connection cap, graceful shutdown.
//! - [`api`]: the OpenAI-style routes under `/v1`.
//! - [`tenants`]: bearer tokens to callers, each with its profile, workspace
//!   and limits.

pub mod api;
mod connections;
pub mod http;
mod jsonrpc;
pub mod mcp;
mod mcp_http;
mod stdio;
pub mod tenants;
