//! The process limit of a command, held by a pids cgroup of its own.
//!
//! `RLIMIT_NPROC` alone does not hold it everywhere: the kernel exempts
//! processes of the global root user, and a host running as root maps the
//! sandbox's user to root. So every command whose host can make one runs in a
//! cgroup whose `pids.max` is the profile's `terminal.max_processes` plus
//! the sandbox's own processes (the launcher, PID 1 and, under
//! `terminal.network = "proxy"`, the relay). The launcher joins it before anything else of the
//! sandbox exists, so everything counts: joining a cgroup waits for a kernel
//! grace period after a pause, which a sandbox built ahead (or a session)
//! pays once, off the command's path.
//! Where no cgroup can be made, a host running as root refuses to run
//! commands rather than run them without the limit.
//!
//! The groups live under a `toolhost` directory: beside toolhost's own
//! cgroup in a cgroup v1 `pids` hierarchy, or at the top of a cgroup v2
//! hierarchy (which only root may write; the controller is enabled for it
//! there). Each is removed when its sandbox is dropped, or, when a process of
//! it is still being torn down then, at the next group made; groups left by
//! a toolhost that died are removed when another starts.

use std::path::{Path, PathBuf};

/// Processes of the sandbox itself in its group: the launcher and PID 1
/// (and the proxy relay, when there is one).
const SANDBOX_PROCESSES: u64 = 2;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// The directory the groups are made in, or why there is none.
fn base() -> &'static Result<PathBuf, String> {
    static BASE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BASE.get_or_init(|| {
        let base = locate("pids", true)?;
        sweep_dead(&base);
        Ok(base)
    })
}

/// Groups whose removal failed while their processes were still going.
static LEFT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A command's pids cgroup, removed on drop.
#[derive(Debug)]
pub(crate) struct PidsGroup {
    dir: PathBuf,
}

impl PidsGroup {
    /// Makes a group that holds at most `limit` processes (and threads).
    /// `Ok(None)` when there is no cgroup to make and the kernel's
    /// `RLIMIT_NPROC` holds the limit by itself (toolhost does not run as
    /// root); `Err` says why the limit cannot be held.
    /// `relay`: the sandbox runs a proxy relay, one more process of its own.
    pub(crate) fn for_command(limit: u64, relay: bool) -> Result<Option<Self>, String> {
        let limit = limit.saturating_add(SANDBOX_PROCESSES + u64::from(relay));
        // SAFETY: plain system call.
        Self::under(base(), unsafe { libc::getuid() }, limit)
    }

    /// As [`Self::for_command`], for a host running as `uid` with `base`.
    fn under(base: &Result<PathBuf, String>, uid: u32, limit: u64) -> Result<Option<Self>, String> {
        // A group that cannot be made (a `toolhost` directory another user
        // made, say) leaves a user other than root with RLIMIT_NPROC.
        let made = base
            .as_ref()
            .map_err(String::clone)
            .and_then(|base| Self::create(base, limit));
        match made {
            Ok(group) => Ok(Some(group)),
            Err(_) if uid != 0 => Ok(None),
            Err(why) => Err(format!(
                "terminal.max_processes cannot be enforced: toolhost runs as root, whose \
                 processes the kernel's process limit does not apply to, and no pids cgroup \
                 could be made for the command ({why}). Run toolhost as another user, or \
                 where it may write a cgroup (a cgroup v1 `pids` hierarchy, or cgroup v2 \
                 with the pids controller)"
            )),
        }
    }

    /// What holds the process limit here, or why nothing does, for
    /// `toolhost doctor`.
    pub(crate) fn mechanism() -> Result<String, String> {
        match base() {
            Ok(base) => Ok(format!(
                "a pids cgroup per command, under {}",
                base.display()
            )),
            Err(why) => {
                Self::for_command(1, false).map(|_| format!("RLIMIT_NPROC (no pids cgroup: {why})"))
            }
        }
    }

    fn create(base: &Path, limit: u64) -> Result<Self, String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        retry_left();
        let name = format!(
            "{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = base.join(name);
        std::fs::create_dir(&dir)
            .map_err(|e| format!("making the pids cgroup {}: {e}", dir.display()))?;
        let group = Self { dir };
        let max = group.dir.join("pids.max");
        std::fs::write(&max, limit.to_string())
            .map_err(|e| format!("writing {}: {e}", max.display()))?;
        Ok(group)
    }

    /// The file the command's shell writes `0` to, to join the group.
    pub(crate) fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }
}

impl Drop for PidsGroup {
    fn drop(&mut self) {
        if std::fs::remove_dir(&self.dir).is_err() && self.dir.exists() {
            LEFT.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(std::mem::take(&mut self.dir));
        }
    }
}

/// Removes the groups left behind whose processes have ended since.
fn retry_left() {
    let mut left = LEFT.lock().unwrap_or_else(|e| e.into_inner());
    left.retain(|dir| std::fs::remove_dir(dir).is_err() && dir.exists());
}

/// Removes groups (empty by now) of toolhost processes that have ended.
pub(super) fn sweep_dead(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } < 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Finds (and makes) the `toolhost` directory groups of `controller`
/// (`pids`, `cpu`) are made in; under cgroup v2 only when `v2_too`.
pub(super) fn locate(controller: &str, v2_too: bool) -> Result<PathBuf, String> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("reading /proc/self/cgroup: {e}"))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("reading /proc/self/mountinfo: {e}"))?;
    let (base, v2) = hierarchy(&cgroups, &mounts, controller)?;
    if v2 && !v2_too {
        return Err(format!(
            "cgroup v2, where a command's processes are in one group for every controller \
             (its pids group), has no separate {controller} group for them"
        ));
    }
    let dir = base.join("toolhost");
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("making {}: {e}", dir.display())),
    }
    if v2 {
        // Its groups get the controller only if it passes it on.
        let control = dir.join("cgroup.subtree_control");
        std::fs::write(&control, format!("+{controller}"))
            .map_err(|e| format!("enabling {controller} in {}: {e}", control.display()))?;
    }
    Ok(dir)
}

/// The directory of the hierarchy with `controller` that toolhost's groups
/// go under, and whether it is cgroup v2, from `/proc/self/cgroup` and
/// `/proc/self/mountinfo`.
fn hierarchy(cgroups: &str, mountinfo: &str, controller: &str) -> Result<(PathBuf, bool), String> {
    // cgroup v1: a hierarchy of its own, under our own group.
    let own_v1 = cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then_some(path)
    });
    let mounts = mountinfo.lines().filter_map(|line| {
        // id parent major:minor root mount-point options... - fstype source super-options
        let (left, right) = line.split_once(" - ")?;
        let left: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        let (fstype, _, options) = (right.next()?, right.next()?, right.next()?);
        Some((*left.get(3)?, *left.get(4)?, fstype, options))
    });
    if let Some(own) = own_v1 {
        let (root, point) = mounts
            .filter(|(_, _, fstype, options)| {
                *fstype == "cgroup" && options.split(',').any(|o| o == controller)
            })
            .map(|(root, point, _, _)| (root, point))
            .next()
            .ok_or(format!("the {controller} cgroup hierarchy is not mounted"))?;
        let inside = own
            .strip_prefix(root)
            .unwrap_or(own)
            .trim_start_matches('/');
        return Ok((Path::new(&unescape(point)).join(inside), false));
    }
    // cgroup v2: the top of the hierarchy, when it has the controller.
    let point = mounts
        .filter(|(root, _, fstype, _)| *fstype == "cgroup2" && *root == "/")
        .map(|(_, point, _, _)| unescape(point))
        .next()
        .ok_or(format!(
            "no cgroup hierarchy with the {controller} controller is mounted"
        ))?;
    let controllers = Path::new(&point).join("cgroup.subtree_control");
    let enabled = std::fs::read_to_string(&controllers)
        .map_err(|e| format!("reading {}: {e}", controllers.display()))?;
    if !enabled.split_whitespace().any(|c| c == controller) {
        return Err(format!(
            "the {controller} controller is not enabled in {}",
            controllers.display()
        ));
    }
    Ok((PathBuf::from(point), true))
}

/// A mount point as `mountinfo` escapes it (`\040` for a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|digits| {
            let text = std::str::from_utf8(digits).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO_V1: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw";

    #[test]
    fn a_v1_pids_hierarchy_is_used_under_our_own_group() {
        let cgroups = "8:pids:/svc/one\n4:memory:/x\n0::/\n";
        assert_eq!(
            hierarchy(cgroups, MOUNTINFO_V1, "pids").unwrap(),
            (PathBuf::from("/sys/fs/cgroup/pids/svc/one"), false)
        );
    }

    #[test]
    fn a_v1_mount_of_part_of_the_hierarchy_is_followed() {
        let mountinfo = "39 31 0:36 /svc /mnt/my\\040pids rw - cgroup cgroup rw,pids";
        assert_eq!(
            hierarchy("8:pids:/svc/one\n", mountinfo, "pids").unwrap().0,
            PathBuf::from("/mnt/my pids/one")
        );
    }

    #[test]
    fn without_a_group_root_is_refused_and_others_keep_rlimit_nproc() {
        let none = Err("no hierarchy here".to_string());
        let why = PidsGroup::under(&none, 0, 20).unwrap_err();
        assert!(why.contains("runs as root"), "{why}");
        assert!(why.contains("no hierarchy here"), "{why}");
        assert!(PidsGroup::under(&none, 1000, 20).unwrap().is_none());
        // A hierarchy found but no group made in it: the same.
        let unwritable = Ok(PathBuf::from("/nonexistent/toolhost"));
        let why = PidsGroup::under(&unwritable, 0, 20).unwrap_err();
        assert!(
            why.contains("runs as root") && why.contains("/nonexistent"),
            "{why}"
        );
        assert!(PidsGroup::under(&unwritable, 1000, 20).unwrap().is_none());
    }

    #[test]
    fn without_a_pids_hierarchy_the_reason_is_given() {
        let cgroups = "4:memory:/x\n";
        let mountinfo = "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory";
        let why = hierarchy(cgroups, mountinfo, "pids").unwrap_err();
        assert!(why.contains("no cgroup hierarchy"), "{why}");
        let why = hierarchy("8:pids:/\n", mountinfo, "pids").unwrap_err();
        assert!(why.contains("not mounted"), "{why}");
    }
}
