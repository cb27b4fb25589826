//! Where plugins come from: files of the plugin directory (`directory`),
//! declarative tool files among them (`declarative`), later OCI references;
//! a plugin's source, and why it may not load.

pub(crate) mod declarative;
pub(crate) mod directory;

pub use directory::{is_declarative_file, is_plugin_file, plugin_files, plugin_name_for};

use std::fmt;
use std::path::PathBuf;

/// Where a plugin's bytes came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// A file in the plugin directory (or given on the command line).
    File(PathBuf),
    /// Compiled into the `toolhost` binary.
    Bundled,
}

impl fmt::Display for PluginSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Bundled => f.write_str("bundled"),
        }
    }
}

/// Why a plugin could not be loaded. The message says which plugin, where it
/// came from, what is wrong and, where it can, what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The plugin's name.
    pub plugin: String,
    /// Where it came from.
    pub source: PluginSource,
    /// Every problem found.
    pub problems: Vec<String>,
}

impl LoadError {
    pub(crate) fn new(plugin: &str, source: &PluginSource, problem: impl Into<String>) -> Self {
        Self {
            plugin: plugin.to_string(),
            source: source.clone(),
            problems: vec![problem.into()],
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "plugin {:?} ({}): ", self.plugin, self.source)?;
        match self.problems.as_slice() {
            [one] => f.write_str(one),
            many => {
                write!(f, "{} problems:", many.len())?;
                many.iter().try_for_each(|p| write!(f, "\n  - {p}"))
            }
        }
    }
}

impl std::error::Error for LoadError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_errors_list_problems() {
        let e = LoadError {
            plugin: "w".into(),
            source: PluginSource::File("plugins/w.wasm".into()),
            problems: vec!["a".into(), "b".into()],
        };
        assert_eq!(
            e.to_string(),
            "plugin \"w\" (plugins/w.wasm): 2 problems:\n  - a\n  - b"
        );
    }
}
