//! Finding, reading and parsing the configuration, and resolving its
//! profiles on request.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::file::ConfigFile;
use super::parse::parse_toml;
use super::profile::resolve_profile;
use super::validate::validate;
use super::{Config, ConfigError, ConfigSource, EMBEDDED, FILE_NAME};
use crate::capability::Profile;
use crate::capability::terminal::TerminalSandbox;

impl Config {
    /// The built-in configuration, with the current directory as base.
    pub fn embedded() -> Config {
        let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Self::parse(EMBEDDED, ConfigSource::Embedded, &base)
            .expect("the embedded configuration is valid")
    }

    /// Loads `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let source = ConfigSource::File(path.to_path_buf());
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            source: source.clone(),
            problems: vec![(String::new(), format!("cannot read the file: {e}"))],
        })?;
        let base = path
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .unwrap_or(Path::new("."));
        // Symlinks resolved: a link on the way to the config (or to the
        // paths it names) that a command could replace leads nowhere else.
        let base = base
            .canonicalize()
            .or_else(|_| std::path::absolute(base))
            .unwrap_or_else(|_| base.to_path_buf());
        Self::parse(&text, source, &base)
    }

    /// `explicit` if given, else `./toolhost.toml` if it exists, else the
    /// embedded configuration.
    pub fn discover(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        match explicit {
            Some(path) => Self::load(path),
            None if Path::new(FILE_NAME).is_file() => Self::load(Path::new(FILE_NAME)),
            None => Ok(Self::embedded()),
        }
    }

    /// Parses and validates `text`; relative paths resolve against `base`.
    pub fn parse(text: &str, source: ConfigSource, base: &Path) -> Result<Config, ConfigError> {
        let file = parse_file(text).map_err(|problem| ConfigError {
            source: source.clone(),
            problems: vec![problem],
        })?;
        let mut problems = Vec::new();
        let config = validate(file, source.clone(), base, &mut problems);
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError { source, problems })
        }
    }

    /// Profiles that run terminal commands outside the kernel sandbox
    /// (`terminal.sandbox = "none"`), by name.
    pub fn unconfined_terminal_profiles(&self) -> Vec<&str> {
        self.profiles
            .iter()
            .filter(|(_, p)| p.terminal.sandbox == Some(TerminalSandbox::None))
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The profile `name` with its file grants rooted in `workspace` (the
    /// base directory when `None`), for callers that are not tenants.
    pub fn profile(&self, name: &str, workspace: Option<&Path>) -> Result<Arc<Profile>, String> {
        self.resolve(name, workspace, self.sandbox_ids.0)
    }

    /// The profile of `tenant`, rooted in its workspace, its commands run
    /// as its own id of `sandbox_ids`.
    pub fn tenant_profile(&self, tenant: &super::Tenant) -> Result<Arc<Profile>, String> {
        self.resolve(&tenant.profile, Some(&tenant.workspace), tenant.sandbox_id)
    }

    fn resolve(
        &self,
        name: &str,
        workspace: Option<&Path>,
        sandbox_id: u32,
    ) -> Result<Arc<Profile>, String> {
        let written = self
            .profiles
            .get(name)
            .ok_or_else(|| format!("unknown profile {name:?}; known: {}", self.profile_names()))?;
        let workspace = workspace.unwrap_or(&self.workspace);
        let mut problems = Vec::new();
        let own = self.own_paths();
        let mut profile =
            resolve_profile(name, written, &self.global, workspace, &own, &mut problems);
        profile.terminal.sandbox_id = sandbox_id;
        profile.generation = self.generation;
        match problems.first() {
            None => Ok(Arc::new(profile)),
            Some((key, problem)) => Err(format!("{key}: {problem}")),
        }
    }

    fn profile_names(&self) -> String {
        self.profiles.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// Parses the TOML into [`ConfigFile`]; the one error names its key and line.
fn parse_file(text: &str) -> Result<ConfigFile, (String, String)> {
    parse_toml(text)
}
