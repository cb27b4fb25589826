//! The CPU share of each tenant's commands: one cpu cgroup per sandbox id
//! (a tenant, or the callers without one), whose `cpu.shares` make all of
//! that tenant's commands together weigh as one normal thread of the host.
//!
//! Every process that is runnable competes for the CPU with the host's own
//! threads on equal terms; without a group, one command of 250 busy loops
//! outweighs the server's few workers a hundred to one, and another tenant's
//! calls stall. The groups live in a `toolhost` directory beside toolhost's
//! own group of the cgroup v1 `cpu` hierarchy, itself weighted as one thread,
//! so that all tenants' commands together weigh as one thread while the
//! host is busy (and take every idle CPU while it is not). The launcher
//! joins its tenant's group with the pids group, before anything of the
//! sandbox exists. Where no group can be made (cgroup v2, where a process is
//! in one group for every controller, or no rights), the launcher lowers its
//! own priority instead (`SCHED_IDLE`, nice 19), which its processes inherit
//! and cannot raise.
//! A group lives while a sandbox of its tenant does, and is removed with the
//! last (or, while its processes are still being torn down, at the next
//! group made); groups of a toolhost that died are removed when another
//! starts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The weight of a tenant's group among the others, and of the `toolhost`
/// group among the host's threads: a normal thread's (nice 0).
pub(crate) const SHARES: u64 = 1024;

/// The nice value of a command's processes where no group can be made.
pub(crate) const FALLBACK_NICE: i32 = 19;

/// The directory the groups are made in, or why there is none.
fn base() -> &'static Result<PathBuf, String> {
    static BASE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BASE.get_or_init(|| {
        let base = super::pids::locate("cpu", false)?;
        let shares = base.join("cpu.shares");
        std::fs::write(&shares, SHARES.to_string())
            .map_err(|e| format!("writing {}: {e}", shares.display()))?;
        super::pids::sweep_dead(&base);
        Ok(base)
    })
}

/// The groups in use, by sandbox id, and those whose removal failed while
/// their processes were still going.
#[derive(Default)]
struct Groups {
    live: HashMap<u32, Weak<CpuGroup>>,
    left: Vec<PathBuf>,
}

static GROUPS: Mutex<Option<Groups>> = Mutex::new(None);

/// One tenant's cpu cgroup, removed when the last sandbox holding it drops.
#[derive(Debug)]
pub(crate) struct CpuGroup {
    dir: PathBuf,
}

impl CpuGroup {
    /// The group of the tenant whose commands run as `sandbox_id`, made if
    /// none is in use; `None` when none can be made (the launcher lowers
    /// the command's priority instead, see [`mechanism`]).
    pub(crate) fn for_tenant(sandbox_id: u32) -> Option<Arc<Self>> {
        Self::under(base().as_ref().ok()?, sandbox_id).ok()
    }

    /// As [`Self::for_tenant`], in `base`.
    fn under(base: &Path, sandbox_id: u32) -> Result<Arc<Self>, String> {
        let mut groups = GROUPS.lock().unwrap_or_else(|e| e.into_inner());
        let groups = groups.get_or_insert_with(Groups::default);
        groups
            .left
            .retain(|dir| std::fs::remove_dir(dir).is_err() && dir.exists());
        if let Some(group) = groups.live.get(&sandbox_id).and_then(Weak::upgrade) {
            return Ok(group);
        }
        let dir = base.join(format!("{}-{sandbox_id}", std::process::id()));
        // One left behind, still being emptied, is taken up again.
        groups.left.retain(|left| *left != dir);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("making the cpu cgroup {}: {e}", dir.display())),
        }
        let group = Arc::new(Self { dir });
        let shares = group.dir.join("cpu.shares");
        std::fs::write(&shares, SHARES.to_string())
            .map_err(|e| format!("writing {}: {e}", shares.display()))?;
        groups.live.insert(sandbox_id, Arc::downgrade(&group));
        Ok(group)
    }

    /// The file the launcher writes `0` to, to join the group.
    pub(crate) fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        let mut groups = GROUPS.lock().unwrap_or_else(|e| e.into_inner());
        let groups = groups.get_or_insert_with(Groups::default);
        groups.live.retain(|_, group| group.strong_count() > 0);
        // Taken up again by a sandbox made while this one was dropped.
        let again = groups
            .live
            .values()
            .any(|group| group.upgrade().is_some_and(|group| group.dir == self.dir));
        if again {
            return;
        }
        if std::fs::remove_dir(&self.dir).is_err() && self.dir.exists() {
            groups.left.push(std::mem::take(&mut self.dir));
        }
    }
}

/// What holds commands' CPU share here, for `toolhost doctor`: `Err` names
/// the fallback and why there is no group.
pub(crate) fn mechanism() -> Result<String, String> {
    match base() {
        Ok(base) => Ok(format!(
            "a cpu cgroup per tenant under {} (cpu.shares {SHARES}, all tenants' commands \
             together weigh as one thread of the host)",
            base.display()
        )),
        Err(why) => Err(format!(
            "commands run at nice {FALLBACK_NICE} and SCHED_IDLE, not in a cpu cgroup per \
             tenant ({why}); run toolhost where it may write a cgroup v1 `cpu` hierarchy \
             to give each tenant a share"
        )),
    }
}

/// Lowers the calling process's priority (inherited by what it starts):
/// `SCHED_IDLE` where the kernel has it, and nice [`FALLBACK_NICE`].
pub(crate) fn lower_priority() -> Result<(), String> {
    // SAFETY: plain system calls on this process.
    unsafe {
        if libc::setpriority(libc::PRIO_PROCESS, 0, FALLBACK_NICE) != 0 {
            return Err(format!(
                "lowering the command's priority: {}",
                std::io::Error::last_os_error()
            ));
        }
        let param = libc::sched_param { sched_priority: 0 };
        // Best effort: nice alone already lowers the weight.
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenants_group_is_shared_weighted_and_removed_after_the_last() {
        let Ok(base) = base() else {
            eprintln!("skipped: no cpu cgroup here");
            return;
        };
        let first = CpuGroup::under(base, 4242).unwrap();
        let second = CpuGroup::under(base, 4242).unwrap();
        let other = CpuGroup::under(base, 4243).unwrap();
        assert_eq!(first.dir, second.dir);
        assert_ne!(first.dir, other.dir);
        let shares = std::fs::read_to_string(first.dir.join("cpu.shares")).unwrap();
        assert_eq!(shares.trim(), SHARES.to_string());
        let top = std::fs::read_to_string(base.join("cpu.shares")).unwrap();
        assert_eq!(top.trim(), SHARES.to_string());
        assert!(first.procs().exists());
        let dir = first.dir.clone();
        drop(first);
        assert!(dir.exists(), "removed while a sandbox still holds it");
        drop(second);
        assert!(!dir.exists(), "{} left behind", dir.display());
        drop(other);
    }

    #[test]
    fn without_a_group_the_fallback_is_named() {
        let why = crate::capability::terminal::confine::pids::locate("no-such-controller", false)
            .unwrap_err();
        assert!(why.contains("no-such-controller"), "{why}");
        assert!(CpuGroup::under(Path::new("/nonexistent/toolhost"), 1).is_err());
    }
}
