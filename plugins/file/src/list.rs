//! `list_dir`: the entries of a directory, optionally recursive and filtered
//! by a glob, with types and sizes.

use std::fs;
use std::time::{Duration, Instant};

use toolhost_sdk::prelude::*;

use crate::fsio::{NameFilter, io_error};
use crate::walk::{Include, Kind, Walk};

/// Entries returned when `limit` is not given, and at most.
const DEFAULT_ENTRIES: usize = 500;
const MAX_ENTRIES: usize = 5000;
/// Deepest recursion allowed.
const MAX_DEPTH: usize = 20;
/// The listing stops (with what it found) after this long.
const TIME_BUDGET: Duration = Duration::from_secs(10);

/// Arguments of `list_dir`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListDirArgs {
    /// The directory to list (default `.`, the workspace).
    #[serde(default)]
    path: Option<String>,
    /// How many levels to descend: 1 (default) lists the directory's own
    /// entries, 2 adds its subdirectories' entries, and so on (at most 20).
    #[serde(default)]
    depth: Option<usize>,
    /// Only show entries whose name matches this glob (`*.rs`,
    /// `*.{ts,tsx}`); a glob with a `/` matches the path relative to `path`
    /// (`src/**/*.rs`). Directories are still descended into.
    #[serde(default)]
    glob: Option<String>,
    /// Include entries whose names start with `.` (default false).
    #[serde(default)]
    include_hidden: bool,
    /// Include entries that `.gitignore` or `.ignore` files exclude (build
    /// output, dependencies); default false, as in git and ripgrep.
    #[serde(default)]
    include_ignored: bool,
    /// The most entries to return (default 500, at most 5000).
    #[serde(default)]
    limit: Option<usize>,
}

/// List a directory: each entry's `path` (usable as is with the other file
/// tools), `type` (file, dir, symlink, other) and, for files, `size` in bytes,
/// in name order with each directory's contents after it. `depth` recurses,
/// `glob` filters by name, hidden entries (`.git`, `.env`) are left out
/// unless `include_hidden`, and entries excluded by `.gitignore` or `.ignore`
/// files unless `include_ignored`; symbolic links are listed, not followed.
/// `truncated` is true when `limit` cut the listing. Only what the caller's
/// profile grants is visible.
#[tool(toolset = "file", permissions = ["file:read"], read_only, emoji = "📁")]
pub(crate) fn list_dir(args: ListDirArgs) -> Result<Value, ToolError> {
    let path = match args.path.as_deref() {
        None | Some("") => ".",
        Some(path) => path,
    };
    let depth = args.depth.unwrap_or(1);
    if !(1..=MAX_DEPTH).contains(&depth) {
        return Err(ToolError::invalid_arguments(format!(
            "depth must be between 1 and {MAX_DEPTH}"
        )));
    }
    let limit = args.limit.unwrap_or(DEFAULT_ENTRIES);
    if !(1..=MAX_ENTRIES).contains(&limit) {
        return Err(ToolError::invalid_arguments(format!(
            "limit must be between 1 and {MAX_ENTRIES}"
        )));
    }
    let filter = args.glob.as_deref().map(NameFilter::new).transpose()?;
    let metadata = fs::metadata(path).map_err(|e| io_error("listing", path, &e))?;
    if !metadata.is_dir() {
        return Err(ToolError::invalid_arguments(format!(
            "{path} is a file, not a directory; use read_file to read it"
        )));
    }
    // Fail on an unreadable root rather than returning an empty listing.
    fs::read_dir(path).map_err(|e| io_error("listing", path, &e))?;

    let include = Include {
        hidden: args.include_hidden,
        ignored: args.include_ignored,
    };
    let mut walk = Walk::new(path, depth, include).deadline(Instant::now() + TIME_BUDGET);
    let mut entries = Vec::new();
    let mut truncated = false;
    for entry in walk.by_ref() {
        if filter.as_ref().is_some_and(|f| !f.matches(&entry.relative)) {
            continue;
        }
        if entries.len() == limit {
            truncated = true;
            break;
        }
        let mut item = json!({ "path": entry.shown, "type": entry.kind.name() });
        if entry.kind == Kind::File
            && let Ok(metadata) = fs::symlink_metadata(&entry.path)
        {
            item["size"] = json!(metadata.len());
        }
        entries.push(item);
    }
    let mut result = json!({
        "path": path,
        "count": entries.len(),
        "entries": entries,
        "truncated": truncated || walk.timed_out,
    });
    if truncated {
        result["note"] = json!(format!(
            "stopped at {limit} entries; list a subdirectory, lower depth, or use glob to \
             narrow it"
        ));
    } else if walk.timed_out {
        result["note"] = json!(format!(
            "stopped after {} s; list a subdirectory or lower depth",
            TIME_BUDGET.as_secs()
        ));
    }
    if walk.unreadable > 0 {
        result["unreadable"] = json!(walk.unreadable);
    }
    Ok(result)
}
