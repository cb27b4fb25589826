//! A sandbox launcher started before its sandbox is planned: the toolhost
//! binary already executed and in a pids cgroup of its own (joining one
//! waits for a kernel grace period, some 10 ms after a pause on cgroup v1).
//! A sandbox built at the call takes it and only sends its spec; the next
//! one is started in the background, after the command.

use std::path::{Path, PathBuf};

use super::super::process_group::Launched;
use crate::confine::pids::PidsGroup;

/// A launcher waiting for its spec, in its pids cgroup.
pub(super) struct Spare {
    launched: Launched,
    pids: Option<PidsGroup>,
    /// What it was started for: the launcher binary, the process limit and
    /// whether the sandbox has a proxy relay.
    launcher: PathBuf,
    limit: u64,
    relay: bool,
}

impl Spare {
    /// Starts `launcher` in a new pids cgroup of `limit` processes (see
    /// [`PidsGroup::for_command`]).
    pub(super) fn start(launcher: &Path, limit: u64, relay: bool) -> Result<Self, String> {
        let pids = PidsGroup::for_command(limit, relay)?;
        let procs = pids.as_ref().map(PidsGroup::procs);
        let launched = Launched::spawn(launcher, procs.as_deref()).map_err(|e| {
            format!(
                "could not start the sandbox launcher {}: {e}",
                launcher.display()
            )
        })?;
        Ok(Self {
            launched,
            pids,
            launcher: launcher.to_path_buf(),
            limit,
            relay,
        })
    }

    /// Its launcher and cgroup, if it was started for the same and is still
    /// waiting.
    pub(super) fn take(
        mut self,
        launcher: &Path,
        limit: u64,
        relay: bool,
    ) -> Option<(Launched, Option<PidsGroup>)> {
        let same = self.launcher == launcher && self.limit == limit && self.relay == relay;
        (same && self.launched.alive()).then_some((self.launched, self.pids))
    }
}
