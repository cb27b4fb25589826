//! A sandbox launcher started before its sandbox is planned: the toolhost
//! binary already executed, in a pids cgroup of its own and its tenant's
//! cpu cgroup (joining one waits for a kernel grace period, some 10 ms
//! after a pause on cgroup v1). A sandbox built at the call takes it and
//! only sends its spec; the next one is started in the background, after
//! the command. Spares are kept per profile, so each is its tenant's.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use super::process_group::Launched;
use crate::capability::terminal::confine::cpu::CpuGroup;
use crate::capability::terminal::confine::pids::PidsGroup;

/// A sandbox's pids cgroup and its tenant's cpu cgroup.
pub(super) type Groups = (Option<PidsGroup>, Option<Arc<CpuGroup>>);

/// A launcher waiting for its spec, in its cgroups.
pub(super) struct Spare {
    launched: Launched,
    groups: Groups,
    /// What it was started for: the launcher binary, the process limit,
    /// whether the sandbox has a proxy relay, and the tenant's sandbox id.
    launcher: PathBuf,
    limit: u64,
    relay: bool,
    tenant: u32,
}

impl Spare {
    /// Starts `launcher` in a new pids cgroup of `limit` processes (see
    /// [`PidsGroup::for_command`]) and the cpu cgroup of the tenant whose
    /// commands run as `tenant` (see [`CpuGroup::for_tenant`]; without
    /// one, the launcher lowers its priority instead).
    pub(super) fn start(
        launcher: &Path,
        limit: u64,
        relay: bool,
        tenant: u32,
    ) -> Result<Self, String> {
        let pids = PidsGroup::for_command(limit, relay)?;
        let cpu = CpuGroup::for_tenant(tenant);
        let procs = pids.as_ref().map(PidsGroup::procs);
        let share = cpu.as_deref().map(CpuGroup::procs);
        let launched =
            Launched::spawn(launcher, procs.as_deref(), share.as_deref()).map_err(|e| {
                format!(
                    "could not start the sandbox launcher {}: {e}",
                    launcher.display()
                )
            })?;
        Ok(Self {
            launched,
            groups: (pids, cpu),
            launcher: launcher.to_path_buf(),
            limit,
            relay,
            tenant,
        })
    }

    /// Its launcher and cgroups, if it was started for the same and is
    /// still waiting.
    pub(super) fn take(
        mut self,
        launcher: &Path,
        limit: u64,
        relay: bool,
        tenant: u32,
    ) -> Option<(Launched, Groups)> {
        let same = self.launcher == launcher
            && self.limit == limit
            && self.relay == relay
            && self.tenant == tenant;
        (same && self.launched.alive()).then_some((self.launched, self.groups))
    }
}
