//! Which files of the plugin directory are plugins, and the name each is
//! loaded under.

use std::path::{Path, PathBuf};

/// Whether a file in the plugin directory is a plugin: a `*.wasm` component
/// or a declarative tool file (`*.toml` but not a `toolhost.toml` config,
/// `*.yaml`, `*.yml`).
pub fn is_plugin_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "wasm") || is_declarative_file(path)
}

/// Whether a plugin file is a declarative tool file (TOML or YAML).
pub fn is_declarative_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e == "toml" || e == "yaml" || e == "yml")
        && path.file_name().is_some_and(|n| n != "toolhost.toml")
}

/// Every plugin file directly in `dir`, sorted; a missing dir has none.
pub fn plugin_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if is_plugin_file(&path) && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The plugin name for a file: its stem (`plugins/weather.wasm` → `weather`).
pub fn plugin_name_for(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
