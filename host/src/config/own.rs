//! The paths a configuration makes toolhost's own: the file itself, the
//! approvals allowlist, the audit log, the compile cache and its key, the
//! plugin directory, the terminal backends' credentials, and the binary.
//! A feature that keeps state on disk adds its path here.

use std::path::Path;
use std::sync::Arc;

use super::{AuditTarget, Config, ConfigSource, FILE_NAME};
use crate::policy::{OwnPaths, Placeholder, Protection};

/// What the terminal sandbox writes to a missing allowlist to be able to
/// mask it: an allowlist with no entries.
const EMPTY_ALLOWLIST: &str = "{}\n";

impl Config {
    /// toolhost's own paths under this configuration, with those the host
    /// still uses from the configuration it started with
    /// ([`Config::retained_own`]).
    pub fn own_paths(&self) -> Arc<OwnPaths> {
        let mut own = OwnPaths::process().as_ref().clone();
        if let Ok(launcher) = crate::capability::terminal::confine::launcher() {
            // `/proc/self/exe` is the binary already there.
            let launcher = launcher.canonicalize().unwrap_or(launcher);
            own.add(
                "sandbox launcher",
                "the binary commands' sandboxes start",
                &launcher,
                Protection::ReadOnly,
            );
        }
        match &self.source {
            ConfigSource::File(path) => {
                own.add("configuration", "--config", path, Protection::Hidden);
            }
            ConfigSource::Embedded => {
                own.add(
                    "configuration (the file a later start in this directory reads)",
                    "--config",
                    &self.base_dir.join(FILE_NAME),
                    Protection::Hidden,
                );
            }
        }
        own.add(
            "approvals allowlist",
            "approvals.allowlist",
            &self.allowlist,
            Protection::Hidden,
        )
        .placeholder = Some(Placeholder::File(EMPTY_ALLOWLIST));
        if let AuditTarget::File(path) = &self.audit {
            own.add("audit log", "audit", path, Protection::Hidden)
                .placeholder = Some(Placeholder::File(""));
        }
        if let Some(dir) = &self.cache_dir {
            own.add("compile cache", "cache_dir", dir, Protection::ReadOnly)
                .placeholder = Some(Placeholder::Dir);
            own.add(
                "compile cache's key",
                "cache_dir",
                &super::cache_key_path(dir),
                Protection::Hidden,
            );
        }
        if let super::KeySource::File(key) = &self.state.key {
            own.add("handle key", "state.key_file", key, Protection::Hidden);
        }
        if let Some(dir) = &self.plugins {
            let plugins = own.add("plugin directory", "plugins", dir, Protection::ReadOnly);
            plugins.writable_when_granted = true;
            plugins.placeholder = Some(Placeholder::Dir);
        }
        for (name, profile) in &self.profiles {
            if let Some(ssh) = &profile.terminal.ssh {
                own.add(
                    "ssh key",
                    &format!("profiles.{name}.terminal.ssh.key_file"),
                    &ssh.key_file,
                    Protection::Hidden,
                );
            }
            let socket = profile
                .terminal
                .container
                .as_ref()
                .and_then(|container| container.socket.as_deref());
            if let Some(socket) = socket {
                let path = socket.strip_prefix("unix://").unwrap_or(socket);
                own.add(
                    "container engine's socket",
                    &format!("profiles.{name}.terminal.container.socket"),
                    Path::new(path),
                    Protection::Hidden,
                );
            }
        }
        // The container engines' usual sockets: whoever talks to one runs
        // anything as root. Masked wherever a grant shows them.
        let docker_host = std::env::var("DOCKER_HOST").ok();
        let usual = [
            "/var/run/docker.sock",
            "/run/docker.sock",
            "/run/podman/podman.sock",
        ];
        let sockets = docker_host
            .as_deref()
            .and_then(|host| host.strip_prefix("unix://"))
            .into_iter()
            .chain(usual);
        for socket in sockets.filter(|socket| Path::new(socket).exists()) {
            own.add(
                "container engine's socket",
                "DOCKER_HOST, or where engines usually listen",
                Path::new(socket),
                Protection::Hidden,
            );
        }
        if let Some(retained) = &self.retained_own {
            own = own.merged(retained);
        }
        Arc::new(own)
    }
}
