//! The host a command runs: the configuration found, with the command line's
//! overrides applied.

use std::path::PathBuf;

use anyhow::Result;

use super::args::Global;
use crate::approval::TtyApprover;
use crate::config::{self, Config};
use crate::host::{Host, HostBuilder};

/// Loads the configuration and builds the host it describes, with the
/// command line's overrides.
pub(super) async fn host(global: &Global) -> Result<Host> {
    let config = effective_config(global)?;
    warn_unset(&config);
    let builder: HostBuilder = Host::builder()
        .config(&config)?
        .approver(TtyApprover::or_deny());
    let host = builder.build().await?;
    for error in host.load_errors() {
        eprintln!(
            "warning: {}",
            crate::escape::escape_lines(&error.to_string())
        );
    }
    Ok(host)
}

/// Warns of the variables the configuration names that are not set: only
/// `serve --http` needs them, and refuses to start without them.
pub(super) fn warn_unset(config: &Config) {
    for (key, problem) in &config.unset_variables {
        eprintln!(
            "warning: {}: {}",
            config.source,
            crate::escape::escape(&format!("{key}: {problem}"))
        );
    }
}

/// The host of a server: it answers at once, while the plugins compile in
/// the background (load errors go to the log as each plugin finishes).
pub(super) async fn serving_host(global: &Global) -> Result<Host> {
    let config = effective_config(global)?;
    Host::builder()
        .config(&config)?
        .approver(TtyApprover::or_deny())
        .load_in_background(true)
        .build()
        .await
}

/// The configuration with the command line's overrides applied.
pub(super) fn effective_config(global: &Global) -> Result<Config> {
    let mut config = Config::discover(global.config.as_deref())?;
    if let Some(profile) = &global.profile {
        if !config.profiles.contains_key(profile) {
            anyhow::bail!(
                "unknown profile {profile:?}; {} defines: {}",
                config.source,
                config
                    .profiles
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        config.default_profile = profile.clone();
        config.pinned_profile = Some(profile.clone());
    }
    if let Some(dir) = &global.plugins {
        if !dir.is_dir() {
            anyhow::bail!(
                "plugin directory {} does not exist or is not a directory",
                dir.display()
            );
        }
        config.plugins = Some(dir.clone());
    }
    if global.no_bundled {
        config.bundled = false;
    }
    // Without a `plugins` key: `plugins/` next to the config file (or in the
    // current directory), for every command alike.
    if config.plugins.is_none() {
        config.plugins = Some(config.base_dir.join("plugins"));
    }
    Ok(config)
}

/// The plugin directory and config file to watch.
pub(super) fn watched(config: &Config) -> (PathBuf, Option<PathBuf>) {
    let dir = config
        .plugins
        .clone()
        .unwrap_or_else(|| config.base_dir.join("plugins"));
    let config_file = match &config.source {
        config::ConfigSource::File(path) => Some(path.clone()),
        config::ConfigSource::Embedded => None,
    };
    (dir, config_file)
}
