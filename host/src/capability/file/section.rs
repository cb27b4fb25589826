//! The file capability's table: its name and permissions, `[profiles.P.file]`
//! and `[global.file]` as written, and how they resolve into the profile's
//! [`PathRules`], each problem at its key. No wasmtime here; its imports
//! are in `imports`.

use std::path::PathBuf;

use serde::Deserialize;

use super::rules::{self as paths, PathRules};
use crate::capability::section::{Resolve, Section};
use crate::contract::Permission;

/// The permission to read granted files.
pub(crate) const FILE_READ: Permission = Permission::new("file:read");

/// The permission to write granted files.
pub(crate) const FILE_WRITE: Permission = Permission::new("file:write");

/// Files: the profile's granted directories through `wasi:filesystem`.
pub struct FileAccess;

/// `file.*` of a profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Directories readable (relative to the workspace).
    #[serde(default)]
    pub read: Vec<String>,
    /// Directories readable and writable.
    #[serde(default)]
    pub write: Vec<String>,
    /// Globs refused inside the grants (`**/.env`, `secrets/**`).
    #[serde(default)]
    pub deny: Vec<String>,
}

/// `[global.file]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalFileConfig {
    /// Globs refused inside every profile's grants.
    #[serde(default)]
    pub deny: Vec<String>,
}

impl Section for FileAccess {
    const KEY: &'static str = "file";
    type Written = FileConfig;
    type Global = GlobalFileConfig;
    type Rules = PathRules;

    fn deny_all() -> PathRules {
        let none: [&str; 0] = [];
        PathRules::new(Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), none)
            .expect("empty rules are valid")
    }

    fn resolve(written: &FileConfig, global: &GlobalFileConfig, cx: &mut Resolve<'_>) -> PathRules {
        let workspace = cx.workspace;
        let resolve = |entries: &[String]| -> Vec<PathBuf> {
            entries
                .iter()
                .map(|entry| {
                    let trimmed = entry.strip_suffix("/**").unwrap_or(entry);
                    let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
                    paths::normalize(&workspace.join(trimmed))
                })
                .collect()
        };
        let deny: Vec<String> = written
            .deny
            .iter()
            .chain(&global.deny)
            .map(|pattern| {
                if pattern.starts_with('/') || pattern.starts_with("**") {
                    pattern.clone()
                } else {
                    let joined = workspace.join(pattern.trim_start_matches("./"));
                    joined.to_string_lossy().into_owned()
                }
            })
            .collect();
        for (field, entries) in [("file.read", &written.read), ("file.write", &written.write)] {
            for (i, entry) in entries.iter().enumerate() {
                if written.deny.contains(entry) {
                    cx.problem(
                        cx.key(&format!("{field}[{i}]")),
                        format!("{entry:?} is both granted and denied (overlapping rules)"),
                    );
                }
            }
        }
        match PathRules::new(resolve(&written.read), resolve(&written.write), &deny) {
            Ok(rules) => rules.with_own(cx.own),
            Err(e) => {
                cx.problem(cx.key("file"), e.to_string());
                Self::deny_all()
            }
        }
    }
}
