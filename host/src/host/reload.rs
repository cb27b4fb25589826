//! Reloading a running host: a plugin file loaded (or removed) and swapped
//! in atomically, a configuration applied or rejected whole, each step
//! published as a [`ReloadEvent`]; the watcher (`watch`) calls these.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use super::watch::{WatchOptions, Watcher};
use super::{Host, Settings};
use crate::caller::Caller;
use crate::config::Config;
use crate::registry::ReloadEvent;
use crate::source::{LoadError, PluginSource, plugin_name_for};

impl Host {
    pub(super) fn publish(&self, event: ReloadEvent) {
        match &event {
            ReloadEvent::Failed { .. } | ReloadEvent::ConfigRejected { .. } => {
                tracing::error!("{event}")
            }
            _ => tracing::info!("{event}"),
        }
        let _ = self.events_sender().send(event);
    }

    /// Loads (or reloads) the plugin file at `path` and swaps it in. On any
    /// failure the running version, if any, keeps serving, and the failure is
    /// recorded and published. The replaced version drains in the background
    /// within `grace`.
    pub async fn reload_file(&self, path: &Path, grace: Duration) -> Result<(), LoadError> {
        let result = self.try_reload_file(path, grace).await;
        if let Err(error) = &result {
            self.fail(error);
        }
        result
    }

    /// [`Host::reload_file`] without recording or publishing a failure.
    pub(super) async fn try_reload_file(
        &self,
        path: &Path,
        grace: Duration,
    ) -> Result<(), LoadError> {
        let name = plugin_name_for(path);
        let version = self
            .load(&name, PluginSource::File(path.to_path_buf()))
            .await?;
        let unchanged = self
            .snapshot()
            .plugin(&name)
            .is_some_and(|live| live.hash() == version.hash() && live.source() == version.source());
        if unchanged {
            // Touched or rewritten with the same bytes: nothing to swap.
            self.clear_load_error(&name);
            return Ok(());
        }
        let tools: Vec<String> = version.tools().iter().map(|t| t.name.clone()).collect();
        let hash = version.hash().short();
        let replaced = self.swap_in(version)?;
        self.clear_load_error(&name);
        match replaced {
            Some(old) => {
                self.publish(ReloadEvent::Replaced {
                    plugin: name.clone(),
                    from: old.hash().short(),
                    to: hash,
                    tools,
                });
                self.drain_in_background(old, grace);
            }
            None => self.publish(ReloadEvent::Loaded {
                plugin: name,
                version: hash,
                tools,
            }),
        }
        Ok(())
    }

    pub(super) fn fail(&self, error: &LoadError) {
        self.record_load_error(error.clone());
        let _ = self.events_sender().send(ReloadEvent::Failed {
            plugin: error.plugin.clone(),
            reason: error.problems.join("; "),
        });
    }

    /// Unloads the plugin called `name`: its tools disappear at once and
    /// calls to them get an "unavailable" error; calls in flight finish within
    /// `grace` or are cancelled; then its sessions are torn down.
    pub async fn unload(&self, name: &str, grace: Duration) -> Option<crate::runtime::Drained> {
        let removed = self.remove_from_registry(name)?;
        self.publish(ReloadEvent::Removed {
            plugin: name.to_string(),
            version: removed.hash().short(),
        });
        let drained = removed.drain(grace).await;
        self.publish(ReloadEvent::Drained {
            plugin: name.to_string(),
            version: removed.hash().short(),
            in_flight: drained.in_flight,
            cancelled: drained.cancelled,
        });
        Some(drained)
    }

    fn drain_in_background(&self, old: Arc<crate::runtime::PluginVersion>, grace: Duration) {
        let host = self.clone();
        tokio::spawn(async move {
            let drained = old.drain(grace).await;
            host.publish(ReloadEvent::Drained {
                plugin: old.name().to_string(),
                version: old.hash().short(),
                in_flight: drained.in_flight,
                cancelled: drained.cancelled,
            });
        });
    }

    /// Validates `path` and, when valid, applies its profiles and toolsets
    /// atomically; when not, keeps the running configuration.
    pub fn reload_config(&self, path: &Path) -> Result<(), String> {
        let shown = path.display().to_string();
        // The file was written: a file replaced by a rename is no longer the
        // one terminal sandboxes mask. Sessions end (their processes and
        // connections); their next commands get sandboxes masking the new
        // file.
        let ended = self.terminals().end_all();
        if ended > 0 {
            tracing::info!(
                ended,
                "terminal sessions ended: the configuration file changed"
            );
        }
        let applied = replaced_while_writable(path)
            .and_then(|()| Config::load(path).map_err(|e| e.to_string()))
            .and_then(|config| self.apply_config(config));
        match &applied {
            Ok(()) => self.publish(ReloadEvent::ConfigReloaded { path: shown }),
            Err(reason) => self.publish(ReloadEvent::ConfigRejected {
                path: shown,
                reason: reason.clone(),
            }),
        }
        applied
    }

    /// Applies the profiles and toolsets of `config` as one step.
    /// A profile pinned by the running config (`--profile`) stays in effect.
    pub fn apply_config(&self, mut config: Config) -> Result<(), String> {
        let current = self.settings();
        if let Some(pinned) = current
            .config
            .as_ref()
            .and_then(|c| c.pinned_profile.clone())
        {
            if !config.profiles.contains_key(&pinned) {
                return Err(format!(
                    "profile {pinned:?} (chosen with --profile) is no longer defined; \
                     keeping the running configuration"
                ));
            }
            config.default_profile = pinned.clone();
            config.pinned_profile = Some(pinned);
        }
        // What the running host still uses (the plugin directory, cache,
        // audit log and allowlist it started with) stays protected.
        config.retained_own = current.config.as_ref().map(|running| running.own_paths());
        let profile = config.profile(&config.default_profile, None)?;
        let caller = Caller::new(profile, current.caller.approvals().clone());
        self.terminals()
            .set_output_cap(config.tenant_caps.background_output);
        // A tenant removed, or whose token changed, no longer owns its
        // tasks: whoever gets that name later must not read them. Forgotten
        // once the new configuration is in force, so that a task made under
        // the old one is either there to forget or refused as made under a
        // configuration no longer running (see `Tasks::create`).
        let kept: Option<std::collections::HashSet<String>> =
            current.config.as_ref().map(|running| {
                running
                    .tenants
                    .iter()
                    .filter(|(name, was)| {
                        config
                            .tenants
                            .get(*name)
                            .is_some_and(|now| now.token_sha256 == was.token_sha256)
                    })
                    .map(|(name, _)| name.clone())
                    .collect()
            });
        let memory = self.sessions_memory();
        memory.set_share(
            config
                .tenant_caps
                .sessions_memory_share(memory.limit(), config.tenants.len()),
        );
        self.set_settings(Settings {
            caller,
            toolsets: config.toolsets.clone(),
            config: Some(Arc::new(config)),
        });
        if let Some(kept) = kept {
            self.tasks()
                .0
                .forget_tenants(|name| name.is_empty() || kept.contains(name));
        }
        Ok(())
    }

    /// Watches `dir` for plugin files (and `config`, if given) until the
    /// returned [`Watcher`] is dropped. The directory may not exist yet.
    pub fn watch(
        &self,
        dir: &Path,
        config: Option<&Path>,
        options: WatchOptions,
    ) -> Result<Watcher> {
        Watcher::start(self.clone(), dir, config, options)
    }
}

/// `Err` when the configuration file at `path` was replaced (saved by a
/// rename, or removed and written again) while a command's sandbox lived
/// that had the old file masked: that command could write the new one,
/// so toolhost does not read it, and sets it aside so that a later start
/// does not either. The sandboxes that could are ended first (any whose
/// guard has not seen the change yet too).
fn replaced_while_writable(path: &Path) -> Result<(), String> {
    let Some(moved) = crate::policy::own::set_aside_if_replaced(path) else {
        return Ok(());
    };
    let shown = path.display();
    Err(match moved {
        Ok(asides) => {
            let asides: Vec<String> = asides.iter().map(|p| p.display().to_string()).collect();
            format!(
                "{shown} was replaced (saved by a rename, or removed and written again) while \
                 commands ran whose sandboxes could write the new file; they were ended, and \
                 it is not applied: what was at its name was moved aside ({}). Stop the \
                 agent's commands (or save by writing the file in place, which no command \
                 can), look through it, then move it back",
                if asides.is_empty() {
                    "nothing was left there".to_string()
                } else {
                    asides.join(", ")
                }
            )
        }
        Err(e) => format!(
            "{shown} was replaced (saved by a rename, or removed and written again) while \
             commands ran whose sandboxes could write the new file; they were ended, and it \
             is not applied, but it could not be moved aside ({e}): look through it before \
             toolhost starts again, then save it in place"
        ),
    })
}
