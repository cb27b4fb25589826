//! Hot reload: the plugin directory (and the config file) watched with
//! `notify`, changes debounced per file, each plugin loaded off the hot path
//! and swapped in atomically (`host/reload`); replaced and removed versions
//! drained; every step published as a [`ReloadEvent`]. A broken file never
//! replaces a working version, and an invalid config never replaces the
//! running one.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, Result};
use notify::{RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

use crate::host::Host;
use crate::source::{PluginSource, is_plugin_file, plugin_files, plugin_name_for};

/// Default quiet time after the last change to a file before it is loaded.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(150);

/// Default time calls on a replaced or removed version may take to finish.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// How many times a file that fails to load while still changing is retried.
const RETRIES: u32 = 5;

/// Tuning of a [`Watcher`].
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// Quiet time after a file's last change before it is loaded.
    pub debounce: Duration,
    /// Time calls on a replaced or removed version may take to finish.
    pub grace: Duration,
}

impl Default for WatchOptions {
    /// [`DEFAULT_DEBOUNCE`] and [`DEFAULT_GRACE`].
    fn default() -> Self {
        Self {
            debounce: DEFAULT_DEBOUNCE,
            grace: DEFAULT_GRACE,
        }
    }
}

/// Whether `dir` (and `config`) can be watched now; why not, if not.
pub(crate) fn can_watch(dir: &Path, config: Option<&Path>) -> Result<(), String> {
    Watched::start(dir, config)
        .map(drop)
        .map_err(|error| format!("cannot watch {}: {error:#}", dir.display()))
}

/// How often a watcher that could not watch tries again.
pub(crate) const WATCH_RETRY: Duration = Duration::from_secs(5);

/// A running directory watcher. Dropping it stops watching. One that cannot
/// watch (the inotify limits reached, say) says so in the log and in
/// [`Host::not_watching`], tries again every [`WATCH_RETRY`], and once it
/// can, loads what changed meanwhile.
pub struct Watcher {
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watcher")
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a path is to the watcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plugin,
    Config,
    Directory,
}

struct Pending {
    since: Instant,
    attempts: u32,
}

impl Watcher {
    pub(super) fn start(
        host: Host,
        dir: &Path,
        config: Option<&Path>,
        options: WatchOptions,
    ) -> Result<Self> {
        let dir =
            std::path::absolute(dir).with_context(|| format!("resolving {}", dir.display()))?;
        // Symlinks on the way resolved once: a link a command could replace
        // does not lead a reload elsewhere.
        let config = config
            .map(|path| path.canonicalize().or_else(|_| std::path::absolute(path)))
            .transpose()?;
        if !dir.is_dir() {
            tracing::info!(dir = %dir.display(), "plugin directory does not exist yet; waiting for it");
        }
        // Watching starts before this returns: a change made just after is
        // seen.
        let first = Watched::start(&dir, config.as_deref());
        let task = tokio::spawn(watch_until_dropped(host, dir, config, options, first));
        Ok(Self { task })
    }
}

type Started = Result<(Watched, mpsc::UnboundedReceiver<PathBuf>)>;

/// Watches `dir` (and `config`) until aborted, from the `first` attempt,
/// trying again every [`WATCH_RETRY`] while it cannot.
async fn watch_until_dropped(
    host: Host,
    dir: PathBuf,
    config: Option<PathBuf>,
    options: WatchOptions,
    first: Started,
) {
    let mut missed = false;
    let mut attempt = Some(first);
    loop {
        let started = attempt
            .take()
            .unwrap_or_else(|| Watched::start(&dir, config.as_deref()));
        match started {
            Ok((watched, events)) => {
                host.set_not_watching(None);
                if missed {
                    tracing::info!(
                        dir = %dir.display(),
                        "watching the plugin directory again; loading what changed meanwhile"
                    );
                }
                // What changed while nothing watched is looked at again.
                let mut changed = Vec::new();
                if missed {
                    changed = plugin_files(&dir).unwrap_or_default();
                    changed.extend(host.plugins().iter().filter_map(|p| match p.source() {
                        PluginSource::File(file) if file.parent() == Some(&dir) => {
                            Some(file.clone())
                        }
                        _ => None,
                    }));
                    changed.extend(config.clone());
                }
                return run(host, watched, events, options, changed).await;
            }
            Err(error) => {
                let why = format!(
                    "cannot watch {}: {error:#}; changes to plugins and to the config are not \
                     picked up until it can (tried again every {WATCH_RETRY:?})",
                    dir.display()
                );
                // Status says so before the log does: whoever reads the
                // line and then asks finds it.
                host.set_not_watching(Some(why.clone()));
                if !missed {
                    tracing::warn!("{why}");
                }
                missed = true;
                tokio::time::sleep(WATCH_RETRY).await;
            }
        }
    }
}

/// Whether an event may have changed a file. Opening and reading one (as
/// loading it does) must not count, or every load would trigger the next.
fn is_change(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, EventKind};
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

struct Watched {
    dir: PathBuf,
    config: Option<PathBuf>,
    watcher: Arc<std::sync::Mutex<notify::RecommendedWatcher>>,
}

impl Watched {
    /// Watches `dir`, its parent (so that creating or re-creating it is
    /// noticed) and the directory of `config`; the changed paths come on
    /// the receiver.
    fn start(
        dir: &Path,
        config: Option<&Path>,
    ) -> Result<(Self, mpsc::UnboundedReceiver<PathBuf>)> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
                Ok(event) if is_change(&event.kind) => {
                    for path in event.paths {
                        let _ = sender.send(path);
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "file watcher error"),
            })
            .context("starting the file watcher")?;
        let parent = dir.parent().unwrap_or(Path::new("/")).to_path_buf();
        if parent.is_dir() {
            watcher
                .watch(&parent, RecursiveMode::NonRecursive)
                .with_context(|| format!("watching {}", parent.display()))?;
        }
        if dir.is_dir() {
            watcher
                .watch(dir, RecursiveMode::NonRecursive)
                .with_context(|| format!("watching {}", dir.display()))?;
        }
        if let Some(config_dir) = config.and_then(Path::parent)
            && config_dir != parent
            && config_dir != dir
        {
            watcher
                .watch(config_dir, RecursiveMode::NonRecursive)
                .with_context(|| format!("watching {}", config_dir.display()))?;
        }
        let watched = Self {
            dir: dir.to_path_buf(),
            config: config.map(Path::to_path_buf),
            watcher: Arc::new(std::sync::Mutex::new(watcher)),
        };
        Ok((watched, receiver))
    }

    /// (Re)starts watching the directory after it appeared.
    fn watch_directory(&self) {
        let mut watcher = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        let _ = watcher.unwatch(&self.dir);
        if let Err(e) = watcher.watch(&self.dir, RecursiveMode::NonRecursive) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot watch the plugin directory");
        }
    }

    fn kind(&self, path: &Path) -> Option<Kind> {
        if Some(path) == self.config.as_deref() {
            return Some(Kind::Config);
        }
        if path == self.dir {
            return Some(Kind::Directory);
        }
        if path.parent() == Some(&self.dir) && is_plugin_file(path) {
            return Some(Kind::Plugin);
        }
        None
    }
}

async fn run(
    host: Host,
    watched: Watched,
    mut events: mpsc::UnboundedReceiver<PathBuf>,
    options: WatchOptions,
    changed: Vec<PathBuf>,
) {
    let mut pending: HashMap<PathBuf, Pending> = changed
        .into_iter()
        .map(|path| {
            let since = Instant::now();
            (path, Pending { since, attempts: 0 })
        })
        .collect();
    let mut busy: HashSet<PathBuf> = HashSet::new();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(PathBuf, bool)>();
    let mut dir_watched = watched.dir.is_dir();
    let tick = (options.debounce / 3).max(Duration::from_millis(10));
    let mut ticker = tokio::time::interval(tick);
    // Changes seen while the plugins found at start still load wait for them.
    host.loaded().await;
    loop {
        tokio::select! {
            Some(path) = events.recv() => {
                if let Some(kind) = watched.kind(&path) {
                    if kind == Kind::Directory {
                        let exists = watched.dir.is_dir();
                        if exists && !dir_watched {
                            // The directory appeared (or came back): watch it
                            // and look at every plugin in it.
                            watched.watch_directory();
                            for file in plugin_files(&watched.dir).unwrap_or_default() {
                                pending.insert(file, Pending { since: Instant::now(), attempts: 0 });
                            }
                        } else if !exists && dir_watched {
                            // It went away: so did its plugins.
                            for plugin in host.plugins() {
                                if let PluginSource::File(file) = plugin.source()
                                    && file.parent() == Some(&watched.dir)
                                {
                                    pending.insert(file.clone(), Pending { since: Instant::now(), attempts: 0 });
                                }
                            }
                        }
                        dir_watched = exists;
                        continue;
                    }
                    let entry = pending.entry(path).or_insert(Pending { since: Instant::now(), attempts: 0 });
                    entry.since = Instant::now();
                }
            }
            Some((path, retry)) = done_rx.recv() => {
                busy.remove(&path);
                if retry {
                    let entry = pending.entry(path).or_insert(Pending { since: Instant::now(), attempts: 0 });
                    entry.attempts += 1;
                    entry.since = Instant::now();
                }
            }
            // Only while something waits: an idle watcher does not wake up.
            _ = ticker.tick(), if !pending.is_empty() => {
                let ready: Vec<PathBuf> = pending
                    .iter()
                    .filter(|(path, p)| p.since.elapsed() >= options.debounce * (p.attempts + 1) && !busy.contains(*path))
                    .map(|(path, _)| path.clone())
                    .collect();
                for path in ready {
                    let attempts = pending.remove(&path).map(|p| p.attempts).unwrap_or(0);
                    let kind = watched.kind(&path);
                    busy.insert(path.clone());
                    let host = host.clone();
                    let done = done_tx.clone();
                    tokio::spawn(async move {
                        let retry = match kind {
                            Some(Kind::Config) => {
                                if path.is_file() {
                                    let _ = host.reload_config(&path);
                                }
                                false
                            }
                            _ => process_plugin(&host, &path, attempts, options.grace).await,
                        };
                        let _ = done.send((path, retry));
                    });
                }
            }
        }
    }
}

/// Loads, reloads or unloads the plugin at `path`. Returns true when it
/// should be retried (the file was still changing).
async fn process_plugin(host: &Host, path: &Path, attempts: u32, grace: Duration) -> bool {
    if !path.is_file() {
        let name = plugin_name_for(path);
        let ours = host
            .snapshot()
            .plugin(&name)
            .is_some_and(|p| p.source() == &PluginSource::File(path.to_path_buf()));
        if ours {
            host.unload(&name, grace).await;
        }
        return false;
    }
    let before = fingerprint(path);
    match host.try_reload_file(path, grace).await {
        Ok(()) => false,
        Err(_)
            if attempts < RETRIES && (fingerprint(path) != before || recently_modified(path)) =>
        {
            tracing::debug!(file = %path.display(), "plugin file is still changing; retrying");
            true
        }
        Err(error) => {
            host.fail(&error);
            false
        }
    }
}

fn fingerprint(path: &Path) -> Option<(u64, SystemTime)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

fn recently_modified(path: &Path) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < Duration::from_secs(2))
}

#[cfg(test)]
mod tests;
