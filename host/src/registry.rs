//! The current generation of loaded plugins and their tools. A generation is
//! immutable and swapped atomically, so a reader never sees half an update and
//! a call keeps the plugin version it resolved until it ends. What happens to
//! it (a plugin loaded, replaced, drained, removed, a config reloaded) is
//! published as a [`ReloadEvent`].

use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Serialize;

use crate::contract::spec::ToolSpec;
use crate::runtime::PluginVersion;
use crate::source::LoadError;

/// A tool and the plugin version that provides it.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    /// The tool's spec.
    pub spec: Arc<ToolSpec>,
    /// The plugin version that runs it.
    pub plugin: Arc<PluginVersion>,
}

impl crate::toolsets::Catalog for Generation {
    fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.values().map(|entry| &*entry.spec)
    }

    fn has(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }
}

/// One immutable state of the registry.
#[derive(Debug, Default)]
pub struct Generation {
    number: u64,
    plugins: BTreeMap<Arc<str>, Arc<PluginVersion>>,
    tools: BTreeMap<String, ToolEntry>,
    /// Tools of removed plugins, so calls to them say so.
    removed: BTreeMap<String, Arc<str>>,
}

impl Generation {
    /// Increases by one with every change.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.get(name)
    }

    /// Every tool, by name.
    pub fn tools(&self) -> impl Iterator<Item = &ToolEntry> {
        self.tools.values()
    }

    /// Every plugin, by name.
    pub fn plugins(&self) -> impl Iterator<Item = &Arc<PluginVersion>> {
        self.plugins.values()
    }

    /// The plugin called `name`.
    pub fn plugin(&self, name: &str) -> Option<&Arc<PluginVersion>> {
        self.plugins.get(name)
    }

    /// The plugin that provided tool `name` before it was removed.
    pub fn removed(&self, name: &str) -> Option<&str> {
        self.removed.get(name).map(|p| &**p)
    }

    fn next(&self) -> Generation {
        Generation {
            number: self.number + 1,
            plugins: self.plugins.clone(),
            tools: self.tools.clone(),
            removed: self.removed.clone(),
        }
    }
}

/// What happened when a plugin version was added.
#[derive(Debug, Default)]
pub struct Added {
    /// The version it replaced, if any.
    pub replaced: Option<Arc<PluginVersion>>,
    /// Tools left out because another plugin already has a tool of that name,
    /// reported as a load error of this plugin.
    pub collisions: Option<LoadError>,
}

/// The live set of plugins and tools.
#[derive(Debug, Default)]
pub struct Registry {
    current: ArcSwap<Generation>,
}

impl Registry {
    /// The current generation. Hold it for as long as a consistent view is needed.
    pub fn snapshot(&self) -> Arc<Generation> {
        self.current.load_full()
    }

    /// Adds `version`, replacing any version of the same plugin.
    ///
    /// A tool whose name another plugin already provides is not added: when
    /// the plugin is new, its other tools are added and the collisions are
    /// reported in [`Added::collisions`]; when it replaces a working version,
    /// the whole replacement is refused and the old version keeps serving.
    pub fn add(&self, version: Arc<PluginVersion>) -> Result<Added, LoadError> {
        let mut outcome = Ok(Added::default());
        self.current.rcu(|current| {
            let (next, result) = with_plugin(current, &version);
            outcome = result;
            next.unwrap_or_else(|| current.clone())
        });
        outcome
    }

    /// Removes the plugin called `name`, returning its version.
    pub fn remove(&self, name: &str) -> Option<Arc<PluginVersion>> {
        let mut removed = None;
        self.current.rcu(|current| {
            removed = current.plugins.get(name).cloned();
            if removed.is_none() {
                return current.clone();
            }
            let mut next = current.next();
            next.plugins.remove(name);
            let plugin: Arc<str> = name.into();
            next.tools.retain(|tool, t| {
                let keep = &**t.plugin.name() != name;
                if !keep {
                    next.removed.insert(tool.clone(), plugin.clone());
                }
                keep
            });
            Arc::new(next)
        });
        removed
    }
}

/// The generation after adding `version` to `current`, or `None` when it is refused.
fn with_plugin(
    current: &Arc<Generation>,
    version: &Arc<PluginVersion>,
) -> (Option<Arc<Generation>>, Result<Added, LoadError>) {
    let name = version.name();
    let replaced = current.plugins.get(name).cloned();
    let mut collisions = Vec::new();
    let mut problems = Vec::new();
    for spec in version.tools() {
        if let Some(existing) = current.tools.get(&spec.name)
            && existing.plugin.name() != name
        {
            collisions.push(spec.name.clone());
            problems.push(format!(
                "tool {:?} is already provided by plugin {:?} ({}); rename one of them",
                spec.name,
                &**existing.plugin.name(),
                existing.plugin.source()
            ));
        }
    }
    if replaced.is_some() && !problems.is_empty() {
        problems.push(format!(
            "the running version ({}) keeps serving",
            replaced
                .as_ref()
                .map(|r| r.hash().short())
                .unwrap_or_default()
        ));
        let error = LoadError {
            plugin: name.to_string(),
            source: version.source().clone(),
            problems,
        };
        return (None, Err(error));
    }
    let mut next = current.next();
    next.tools.retain(|_, t| t.plugin.name() != name);
    for spec in version.tools() {
        if !collisions.contains(&spec.name) {
            next.removed.remove(&spec.name);
            next.tools.insert(
                spec.name.clone(),
                ToolEntry {
                    spec: spec.clone(),
                    plugin: version.clone(),
                },
            );
        }
    }
    next.plugins.insert(name.clone(), version.clone());
    let collisions = (!problems.is_empty()).then(|| LoadError {
        plugin: name.to_string(),
        source: version.source().clone(),
        problems,
    });
    (
        Some(Arc::new(next)),
        Ok(Added {
            replaced,
            collisions,
        }),
    )
}

/// What happened to a plugin or to the config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ReloadEvent {
    /// A new plugin is serving.
    Loaded {
        /// Plugin name.
        plugin: String,
        /// Content hash (12 hex digits).
        version: String,
        /// Its tools.
        tools: Vec<String>,
    },
    /// A plugin's new version is serving; the old one is draining.
    Replaced {
        /// Plugin name.
        plugin: String,
        /// The old version.
        from: String,
        /// The new version.
        to: String,
        /// Its tools.
        tools: Vec<String>,
    },
    /// A plugin is gone; its version is draining.
    Removed {
        /// Plugin name.
        plugin: String,
        /// The removed version.
        version: String,
    },
    /// A replaced or removed version finished draining.
    Drained {
        /// Plugin name.
        plugin: String,
        /// The drained version.
        version: String,
        /// Calls that were in flight when the drain began.
        in_flight: usize,
        /// Of those, calls cancelled at the end of the grace period.
        cancelled: usize,
    },
    /// A plugin file could not be loaded; any previous version keeps serving.
    Failed {
        /// Plugin name.
        plugin: String,
        /// Why.
        reason: String,
    },
    /// The config file changed and was applied.
    ConfigReloaded {
        /// The file.
        path: String,
    },
    /// The config file changed but is invalid; the running config stays.
    ConfigRejected {
        /// The file.
        path: String,
        /// Every problem.
        reason: String,
    },
}

impl ReloadEvent {
    /// Whether the set of tools (or their definitions) may have changed.
    pub fn changes_tools(&self) -> bool {
        matches!(
            self,
            Self::Loaded { .. }
                | Self::Replaced { .. }
                | Self::Removed { .. }
                | Self::ConfigReloaded { .. }
        )
    }
}

impl std::fmt::Display for ReloadEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Loaded {
                plugin,
                version,
                tools,
            } => write!(f, "loaded {plugin} {version}: {}", tools.join(", ")),
            Self::Replaced {
                plugin, from, to, ..
            } => write!(f, "replaced {plugin} {from} → {to}"),
            Self::Removed { plugin, version } => write!(f, "removed {plugin} {version}"),
            Self::Drained {
                plugin,
                version,
                in_flight,
                cancelled,
            } => write!(
                f,
                "drained {plugin} {version}: {in_flight} call(s) in flight, {cancelled} cancelled"
            ),
            Self::Failed { plugin, reason } => write!(f, "failed {plugin}: {reason}"),
            Self::ConfigReloaded { path } => write!(f, "config reloaded from {path}"),
            Self::ConfigRejected { path, reason } => {
                write!(f, "config {path} rejected, running config kept: {reason}")
            }
        }
    }
}

#[cfg(test)]
mod tests;
