//! Test guest built for wasm32-unknown-unknown (a lean component, no WASI):
//! allocates past the SDK heap's first region, and tries what needs WASI.

use toolhost_sdk::prelude::*;

/// Arguments of `lean_fill`.
#[derive(Deserialize, JsonSchema)]
struct FillArgs {
    /// How many bytes to allocate, in chunks of 4 KiB kept alive together.
    bytes: usize,
}

/// Allocates `bytes` in 4 KiB chunks, writes each, and sums them back.
#[tool(toolset = "lean")]
fn lean_fill(args: FillArgs) -> Result<Value, ToolError> {
    let chunks: Vec<Vec<u8>> = (0..args.bytes.div_ceil(4096))
        .map(|i| vec![(i % 251) as u8; 4096])
        .collect();
    let sum: u64 = chunks.iter().flatten().map(|&b| u64::from(b)).sum();
    Ok(json!({ "chunks": chunks.len(), "sum": sum }))
}

/// Arguments of `lean_read`.
#[derive(Deserialize, JsonSchema)]
struct ReadArgs {
    /// The path.
    path: String,
}

/// Reads a file with `std::fs`, which on this target has no file system.
#[tool(toolset = "lean", permissions = ["file:read"])]
fn lean_read(args: ReadArgs) -> Result<Value, ToolError> {
    Ok(match std::fs::read_to_string(&args.path) {
        Ok(text) => json!({ "ok": text }),
        Err(e) => json!({ "error": e.to_string() }),
    })
}

/// Reads the wall clock, which on this target panics.
#[tool(toolset = "lean")]
fn lean_clock() -> Result<Value, ToolError> {
    let now = std::time::SystemTime::now();
    Ok(json!({ "since_epoch": now.duration_since(std::time::UNIX_EPOCH).is_ok() }))
}

export_plugin!(lean_fill, lean_read, lean_clock);
