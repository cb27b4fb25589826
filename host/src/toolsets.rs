//! Toolsets: the toolset each tool declares, plus composite toolsets from the
//! config that include other toolsets and single tools; and the selection of
//! tools by enabled and disabled toolsets.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::contract::ToolSpec;

/// The loaded tools that toolsets resolve against (the registry's
/// [`Generation`](crate::registry::Generation)).
pub trait Catalog {
    /// The spec of each loaded tool.
    fn specs(&self) -> impl Iterator<Item = &ToolSpec>;

    /// Whether a tool named `name` is loaded.
    fn has(&self, name: &str) -> bool {
        self.specs().any(|spec| spec.name == name)
    }
}

/// A toolset defined in the config: `[toolsets.research] includes = ["web"], tools = ["echo"]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompositeToolset {
    /// Other toolsets (declared by plugins or composite) whose tools it has.
    #[serde(default)]
    pub includes: Vec<String>,
    /// Single tools it has.
    #[serde(default)]
    pub tools: Vec<String>,
    /// What the toolset is for.
    #[serde(default)]
    pub description: Option<String>,
}

/// Which tools to offer: those in the enabled toolsets (all when none is
/// given), minus those in the disabled toolsets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Toolsets to offer; empty means every tool.
    pub enabled: Vec<String>,
    /// Toolsets to take away, after `enabled`.
    pub disabled: Vec<String>,
}

impl Selection {
    /// Every tool.
    pub fn all() -> Self {
        Self::default()
    }

    /// The tools of these toolsets.
    pub fn only<S: Into<String>>(toolsets: impl IntoIterator<Item = S>) -> Self {
        Self {
            enabled: toolsets.into_iter().map(Into::into).collect(),
            disabled: Vec::new(),
        }
    }

    /// Also takes away the tools of these toolsets.
    pub fn without<S: Into<String>>(mut self, toolsets: impl IntoIterator<Item = S>) -> Self {
        self.disabled.extend(toolsets.into_iter().map(Into::into));
        self
    }
}

/// The composite toolsets of the config, validated (no cycles).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Toolsets {
    composites: BTreeMap<String, CompositeToolset>,
}

/// Names that mean "every tool".
fn is_everything(name: &str) -> bool {
    name == "*" || name == "all"
}

impl Toolsets {
    /// Validates the composite toolsets: names, and no cycles through
    /// `includes`. Each problem names the toolset (`toolsets.research`).
    pub fn new(composites: BTreeMap<String, CompositeToolset>) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        for name in composites.keys() {
            if is_everything(name) {
                problems.push(format!(
                    "toolsets.{name}: \"{name}\" is reserved (it means every tool)"
                ));
            } else if !crate::contract::spec::is_valid_tool_name(name) {
                problems.push(format!(
                    "toolsets.{name}: invalid name; use 1 to 64 characters of a-z, A-Z, 0-9, '_' or '-'"
                ));
            }
        }
        let toolsets = Self { composites };
        let mut reported = BTreeSet::new();
        for name in toolsets.composites.keys() {
            if let Some(cycle) = toolsets.find_cycle(name, &mut Vec::new()) {
                let key: BTreeSet<String> = cycle.iter().cloned().collect();
                if reported.insert(key.into_iter().collect::<Vec<_>>()) {
                    problems.push(format!(
                        "toolsets.{}: includes form a cycle: {}",
                        cycle[0],
                        cycle.join(" → ")
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(toolsets)
        } else {
            Err(problems)
        }
    }

    fn find_cycle(&self, name: &str, path: &mut Vec<String>) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|p| p == name) {
            let mut cycle = path[start..].to_vec();
            cycle.push(name.to_string());
            return Some(cycle);
        }
        let composite = self.composites.get(name)?;
        path.push(name.to_string());
        for include in &composite.includes {
            if let Some(cycle) = self.find_cycle(include, path) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }

    /// The composite toolsets, by name.
    pub fn composites(&self) -> &BTreeMap<String, CompositeToolset> {
        &self.composites
    }

    /// The tool names in toolset `name`: a composite toolset, a toolset some
    /// loaded tool declares, or `*` / `all`.
    pub fn resolve(
        &self,
        name: &str,
        generation: &impl Catalog,
    ) -> Result<BTreeSet<String>, String> {
        if is_everything(name) {
            return Ok(generation.specs().map(|t| t.name.clone()).collect());
        }
        let declared: BTreeSet<String> = generation
            .specs()
            .filter(|t| t.toolset == name)
            .map(|t| t.name.clone())
            .collect();
        match self.composites.get(name) {
            Some(composite) => {
                let mut tools = declared;
                for include in &composite.includes {
                    // An include may name a toolset whose plugin is not loaded
                    // (yet): it contributes nothing.
                    tools.extend(self.resolve(include, generation).unwrap_or_default());
                }
                tools.extend(
                    composite
                        .tools
                        .iter()
                        .filter(|t| generation.has(t))
                        .cloned(),
                );
                Ok(tools)
            }
            None if !declared.is_empty() => Ok(declared),
            None => Err(format!(
                "unknown toolset {name:?}; known toolsets: {}",
                self.known(generation).join(", ")
            )),
        }
    }

    /// Every toolset name: declared by loaded tools, and composite.
    pub fn known(&self, generation: &impl Catalog) -> Vec<String> {
        let mut names: BTreeSet<String> = generation.specs().map(|t| t.toolset.clone()).collect();
        names.extend(self.composites.keys().cloned());
        names.into_iter().collect()
    }

    /// The tool names a selection offers.
    pub fn select(
        &self,
        selection: &Selection,
        generation: &impl Catalog,
    ) -> Result<BTreeSet<String>, String> {
        let mut tools = if selection.enabled.is_empty() {
            self.resolve("*", generation)?
        } else {
            let mut tools = BTreeSet::new();
            for name in &selection.enabled {
                tools.extend(self.resolve(name, generation)?);
            }
            tools
        };
        for name in &selection.disabled {
            for tool in self.resolve(name, generation)? {
                tools.remove(&tool);
            }
        }
        Ok(tools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Generation;

    fn composite(includes: &[&str], tools: &[&str]) -> CompositeToolset {
        CompositeToolset {
            includes: includes.iter().map(|s| s.to_string()).collect(),
            tools: tools.iter().map(|s| s.to_string()).collect(),
            description: None,
        }
    }

    #[test]
    fn a_cycle_is_named() {
        let composites = BTreeMap::from([
            ("a".to_string(), composite(&["b"], &[])),
            ("b".to_string(), composite(&["c", "web"], &[])),
            ("c".to_string(), composite(&["a"], &[])),
        ]);
        let problems = Toolsets::new(composites).unwrap_err();
        assert_eq!(
            problems,
            ["toolsets.a: includes form a cycle: a → b → c → a"]
        );
    }

    #[test]
    fn a_self_include_is_a_cycle() {
        let composites = BTreeMap::from([("me".to_string(), composite(&["me"], &[]))]);
        let problems = Toolsets::new(composites).unwrap_err();
        assert_eq!(problems, ["toolsets.me: includes form a cycle: me → me"]);
    }

    #[test]
    fn reserved_and_invalid_names_are_refused() {
        let composites = BTreeMap::from([
            ("all".to_string(), composite(&[], &[])),
            ("bad name".to_string(), composite(&[], &[])),
        ]);
        let problems = Toolsets::new(composites).unwrap_err();
        assert_eq!(problems.len(), 2);
        assert!(problems[0].contains("reserved"));
        assert!(problems[1].contains("invalid name"));
    }

    #[test]
    fn empty_generation_resolves_everything_to_nothing() {
        let toolsets = Toolsets::new(BTreeMap::from([(
            "research".to_string(),
            composite(&["web"], &["echo"]),
        )]))
        .unwrap();
        let generation = Generation::default();
        assert!(
            toolsets
                .resolve("research", &generation)
                .unwrap()
                .is_empty()
        );
        assert!(toolsets.resolve("*", &generation).unwrap().is_empty());
        let error = toolsets.resolve("nope", &generation).unwrap_err();
        assert_eq!(error, "unknown toolset \"nope\"; known toolsets: research");
    }
}
