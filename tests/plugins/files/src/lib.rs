//! Test guest: plain `std::fs` operations, reporting I/O errors as data so
//! tests can see exactly what the sandbox refused.

use std::io::ErrorKind;

use toolhost_sdk::prelude::*;

/// A path argument.
#[derive(Deserialize, JsonSchema)]
struct PathArgs {
    /// The path.
    path: String,
}

/// Two paths.
#[derive(Deserialize, JsonSchema)]
struct TwoPaths {
    /// The first path (source, or link target).
    from: String,
    /// The second path (destination, or link).
    to: String,
}

/// Arguments of `write`.
#[derive(Deserialize, JsonSchema)]
struct WriteArgs {
    /// The path.
    path: String,
    /// What to write.
    content: String,
}

fn outcome<T: Serialize>(result: std::io::Result<T>) -> Result<Value, ToolError> {
    Ok(match result {
        Ok(value) => json!({ "ok": value }),
        Err(e) => json!({ "error": kind(e.kind()), "message": e.to_string() }),
    })
}

fn kind(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::NotFound => "not_found",
        ErrorKind::PermissionDenied => "permission_denied",
        ErrorKind::ReadOnlyFilesystem => "read_only",
        _ => "other",
    }
}

/// Read a file.
#[tool(toolset = "files", permissions = ["file:read"])]
fn read(args: PathArgs) -> Result<Value, ToolError> {
    outcome(std::fs::read_to_string(&args.path))
}

/// List a directory.
#[tool(toolset = "files", permissions = ["file:read"])]
fn list(args: PathArgs) -> Result<Value, ToolError> {
    outcome(std::fs::read_dir(&args.path).and_then(|entries| {
        let mut names = entries
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<Vec<_>>>()?;
        names.sort();
        Ok(names)
    }))
}

/// Whether a path exists (stat).
#[tool(toolset = "files", permissions = ["file:read"])]
fn stat(args: PathArgs) -> Result<Value, ToolError> {
    outcome(std::fs::metadata(&args.path).map(|m| m.len()))
}

/// Read a symlink.
#[tool(toolset = "files", permissions = ["file:read"])]
fn readlink(args: PathArgs) -> Result<Value, ToolError> {
    outcome(std::fs::read_link(&args.path).map(|p| p.to_string_lossy().into_owned()))
}

/// Write a file.
#[tool(toolset = "files", permissions = ["file:read", "file:write"])]
fn write(args: WriteArgs) -> Result<Value, ToolError> {
    outcome(std::fs::write(&args.path, args.content))
}

/// Remove a file.
#[tool(toolset = "files", permissions = ["file:read", "file:write"])]
fn remove(args: PathArgs) -> Result<Value, ToolError> {
    outcome(std::fs::remove_file(&args.path))
}

/// Create a directory.
#[tool(toolset = "files", permissions = ["file:read", "file:write"])]
fn mkdir(args: PathArgs) -> Result<Value, ToolError> {
    outcome(std::fs::create_dir(&args.path))
}

/// Rename a file.
#[tool(toolset = "files", permissions = ["file:read", "file:write"])]
fn rename(args: TwoPaths) -> Result<Value, ToolError> {
    outcome(std::fs::rename(&args.from, &args.to))
}

/// Hard-link `to` to the file `from`.
#[tool(toolset = "files", permissions = ["file:read", "file:write"])]
fn link(args: TwoPaths) -> Result<Value, ToolError> {
    outcome(std::fs::hard_link(&args.from, &args.to))
}

/// Create a symlink `to` (an absolute path) pointing at `from`.
#[tool(toolset = "files", permissions = ["file:read", "file:write"])]
fn symlink(args: TwoPaths) -> Result<Value, ToolError> {
    use wasi::filesystem::{preopens, types::ErrorCode};
    let Some((dir, base)) = preopens::get_directories()
        .into_iter()
        .filter(|(_, base)| args.to.starts_with(&format!("{base}/")))
        .max_by_key(|(_, base)| base.len())
    else {
        return outcome::<()>(Err(ErrorKind::NotFound.into()));
    };
    let relative = &args.to[base.len() + 1..];
    outcome(
        dir.symlink_at(&args.from, relative)
            .map_err(|code| match code {
                ErrorCode::Access => ErrorKind::PermissionDenied.into(),
                ErrorCode::NoEntry => ErrorKind::NotFound.into(),
                ErrorCode::NotPermitted | ErrorCode::ReadOnly => {
                    ErrorKind::ReadOnlyFilesystem.into()
                }
                other => std::io::Error::other(format!("{other:?}")),
            }),
    )
}

/// Read a file without declaring file:read.
#[tool(toolset = "files")]
fn sneaky_read(args: PathArgs) -> Result<Value, ToolError> {
    outcome(std::fs::read_to_string(&args.path))
}

/// Arguments of `hold_open`.
#[derive(Deserialize, JsonSchema)]
struct HoldArgs {
    /// The file to open again and again.
    path: String,
    /// How many times.
    count: u32,
}

/// Open a file `count` times without closing it; how many opens succeeded,
/// and the error of the first that failed.
#[tool(toolset = "files", permissions = ["file:read"])]
fn hold_open(args: HoldArgs) -> Result<Value, ToolError> {
    let mut held = Vec::new();
    for _ in 0..args.count {
        match std::fs::File::open(&args.path) {
            Ok(file) => held.push(file),
            Err(e) => return Ok(json!({ "opened": held.len(), "error": e.to_string() })),
        }
    }
    Ok(json!({ "opened": held.len() }))
}

export_plugin!(
    read,
    list,
    stat,
    readlink,
    write,
    remove,
    mkdir,
    rename,
    link,
    symlink,
    sneaky_read,
    hold_open
);
