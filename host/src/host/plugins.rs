//! Loading, registering and removing a host's plugin versions.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::Host;
use crate::runtime::{CapturedPlugin, PluginVersion};
use crate::source::{LoadError, PluginSource, is_declarative_file};

impl Host {
    /// Unloads the plugin called `name` now: its tools disappear at once,
    /// calls in flight finish (see [`Host::unload`] for a bounded drain), its
    /// stateful sessions are torn down. Returns the version removed.
    pub async fn remove_plugin(&self, name: &str) -> Option<Arc<PluginVersion>> {
        let removed = self.remove_from_registry(name)?;
        removed.drain(Duration::MAX).await;
        tracing::info!(plugin = %name, version = %removed.hash().short(), "plugin removed");
        Some(removed)
    }

    pub(crate) fn remove_from_registry(&self, name: &str) -> Option<Arc<PluginVersion>> {
        self.inner.registry.remove(name)
    }

    /// Makes `version` live and returns the version it replaced; refuses it
    /// (keeping the old one) when a tool name collides with another plugin's.
    pub(crate) fn swap_in(
        &self,
        version: PluginVersion,
    ) -> Result<Option<Arc<PluginVersion>>, LoadError> {
        let added = self.inner.registry.add(Arc::new(version))?;
        match added.collisions {
            Some(error) => {
                self.record_load_error(error);
                Ok(added.replaced)
            }
            None => Ok(added.replaced),
        }
    }

    /// Loads one plugin at start: a bundled plugin whose specs were captured
    /// when toolhost was built is listed from them and compiled at its first
    /// call (see [`CapturedPlugin`]); any other is loaded now.
    pub(crate) async fn load_at_start(
        &self,
        name: &str,
        source: PluginSource,
    ) -> Result<PluginVersion, LoadError> {
        if source == PluginSource::Bundled
            && let Some(captured) = CapturedPlugin::bundled(name)
            && let Some(plugin) = crate::bundled::PLUGINS.iter().find(|p| p.name == name)
        {
            let cache = self.inner.cache.clone();
            return PluginVersion::bundled(plugin, captured, cache);
        }
        self.load(name, source).await
    }

    /// Loads (compiles, describes, validates) one plugin without registering it.
    pub async fn load(&self, name: &str, source: PluginSource) -> Result<PluginVersion, LoadError> {
        let bytes: Arc<[u8]> = match &source {
            PluginSource::Bundled => crate::bundled::PLUGINS
                .iter()
                .find(|p| p.name == name)
                .map(|p| Arc::from(p.wasm))
                .ok_or_else(|| LoadError {
                    plugin: name.to_string(),
                    source: source.clone(),
                    problems: vec!["no bundled plugin has this name".into()],
                })?,
            PluginSource::File(path) if is_declarative_file(path) => {
                return self.load_declarative(name, path).await;
            }
            PluginSource::File(path) => {
                tokio::fs::read(path)
                    .await
                    .map(Arc::from)
                    .map_err(|e| LoadError {
                        plugin: name.to_string(),
                        source: source.clone(),
                        problems: vec![format!("cannot read the file: {e}")],
                    })?
            }
        };
        PluginVersion::load(
            &self.inner.runtime,
            name,
            source,
            bytes,
            self.inner.cache.as_ref(),
        )
        .await
    }

    /// Loads a declarative tool file: validates it and pairs its tools with
    /// the wrapper plugin that runs them.
    async fn load_declarative(&self, name: &str, path: &Path) -> Result<PluginVersion, LoadError> {
        let source = PluginSource::File(path.to_path_buf());
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|e| LoadError::new(name, &source, format!("cannot read the file: {e}")))?;
        PluginVersion::declarative(
            &self.inner.runtime,
            name,
            source,
            &text,
            self.inner.cache.as_ref(),
        )
        .await
    }

    /// Makes a loaded plugin version live (replacing any version of the same
    /// plugin). Tool-name collisions are reported as an error; see
    /// [`Registry::add`].
    pub fn register(&self, version: PluginVersion) -> Result<(), LoadError> {
        let version = Arc::new(version);
        let added = self.inner.registry.add(version.clone())?;
        match &added.replaced {
            Some(old) => tracing::info!(
                plugin = %version.name(), source = %version.source(),
                from = %old.hash().short(), to = %version.hash().short(),
                "plugin replaced"
            ),
            None => tracing::info!(
                plugin = %version.name(), source = %version.source(),
                version = %version.hash().short(), tools = version.tools().len(),
                "plugin loaded"
            ),
        }
        match added.collisions {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub(crate) fn record_load_error(&self, error: LoadError) {
        tracing::error!("{error}");
        self.inner
            .load_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(error.plugin.clone(), error);
    }

    pub(crate) fn clear_load_error(&self, plugin: &str) {
        self.inner
            .load_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(plugin);
    }
}
