//! Who a sandboxed command is on the host. Inside, it is always uid and
//! gid [`INSIDE_ID`]. Run by another user, toolhost maps that to its own
//! uid and gid. Run as root, to an unprivileged id of `sandbox_ids` (one per
//! tenant), so host uid 0 is never in the map; the launcher, still root,
//! then clones each grant as a detached mount, idmapped so that files of
//! the grant's owner appear as the command's own and what the command
//! creates is written as that owner.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use super::spec::{Mount, MountKind};
use super::sys::{cstring, os_error};

/// The uid and gid of the command inside the sandbox.
pub(crate) const INSIDE_ID: u32 = 1000;

/// Writes the maps of `pid`'s new user namespace: [`INSIDE_ID`] is `uid`
/// and `gid` of the host, and nothing else is mapped. Unless toolhost runs
/// as root (whose groups the sandbox's first process drops itself, see
/// [`become_inside`]), `setgroups` is denied first, as the kernel wants
/// of a map written without privilege.
pub(super) fn write_maps(pid: libc::pid_t, uid: u32, gid: u32, root: bool) -> Result<(), String> {
    let write = |name: &str, text: String| {
        let path = format!("/proc/{pid}/{name}");
        std::fs::write(&path, text).map_err(|e| format!("writing {path}: {e}"))
    };
    if !root {
        write("setgroups", "deny".into())?;
    }
    write("uid_map", format!("{INSIDE_ID} {uid} 1\n")).map_err(|e| unmapped(e, uid))?;
    write("gid_map", format!("{INSIDE_ID} {gid} 1\n")).map_err(|e| unmapped(e, gid))
}

/// Most inotify instances and watches of one sandbox: its user namespace's
/// own limits, which its commands cannot raise. What they use is also
/// charged to toolhost's user, whose limits every sandbox shares (128
/// instances and a fixed number of watches by default): so no command can
/// take them all.
const INOTIFY_LIMITS: [(&str, &str); 2] = [
    ("/proc/sys/user/max_inotify_instances", "2"),
    ("/proc/sys/user/max_inotify_watches", "2048"),
];

/// In the sandbox's first process, still holding every capability in its
/// new user namespace: lowers that namespace's inotify limits.
pub(super) fn cap_inotify() -> Result<(), String> {
    for (path, value) in INOTIFY_LIMITS {
        std::fs::write(path, value).map_err(|e| format!("writing {path}: {e}"))?;
    }
    Ok(())
}

/// In the sandbox's first process, once its maps are written: takes
/// [`INSIDE_ID`] as its uid and gid. Created by a root launcher (`root`),
/// it still has root's ids and groups, which its namespace does not map:
/// it drops the groups (the command, without capabilities, cannot take any
/// back).
pub(super) fn become_inside(root: bool) -> Result<(), String> {
    // SAFETY: sets this process's ids and groups, within its own user
    // namespace.
    unsafe {
        if root && libc::setgroups(0, std::ptr::null()) < 0 {
            return os_error("dropping root's groups");
        }
    }
    // SAFETY: sets this process's ids, within its own user namespace.
    unsafe {
        if libc::setresgid(INSIDE_ID, INSIDE_ID, INSIDE_ID) < 0
            || libc::setresuid(INSIDE_ID, INSIDE_ID, INSIDE_ID) < 0
        {
            return os_error("taking the sandbox's uid and gid");
        }
    }
    Ok(())
}

/// Why an id could not be mapped, and what to change.
fn unmapped(error: String, id: u32) -> String {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return error;
    }
    format!(
        "{error}: toolhost runs as root, so commands run as host id {id} of sandbox_ids, which \
         this user namespace does not map; set sandbox_ids to ids it maps (see \
         /proc/self/uid_map), or run toolhost as another user"
    )
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
pub(super) struct MountAttr {
    pub(super) attr_set: u64,
    pub(super) attr_clr: u64,
    pub(super) propagation: u64,
    pub(super) userns_fd: u64,
}

pub(super) const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub(super) const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub(super) const MOUNT_ATTR_NODEV: u64 = 0x4;
pub(super) const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
pub(super) const AT_RECURSIVE: libc::c_uint = 0x8000;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MS_PRIVATE: u64 = 1 << 18;

/// `mount_setattr` on `path` relative to `dir` (the descriptor itself when
/// `path` is empty).
pub(super) fn set_attr_at(
    dir: libc::c_int,
    path: &Path,
    attr: &MountAttr,
    recursive: bool,
) -> Result<(), String> {
    let c = cstring(path)?;
    let mut flags = if recursive { AT_RECURSIVE } else { 0 };
    if path.as_os_str().is_empty() {
        flags |= libc::AT_EMPTY_PATH as libc::c_uint;
    }
    // SAFETY: `attr` is a valid `struct mount_attr` of the size passed.
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dir,
            c.as_ptr(),
            flags,
            attr as *const MountAttr,
            size_of::<MountAttr>(),
        )
    };
    if result < 0 {
        return os_error("mount_setattr");
    }
    Ok(())
}

/// The host's directories of `mounts` the command reaches through an
/// idmapped clone, by index: every grant, `terminal.read` directory and
/// read-only file inside a grant, not the system directories. Each is
/// cloned with what lies mounted below it, read-only unless writable,
/// `nosuid`, `nodev`, private, and idmapped from its owner to `id`.
pub(super) fn idmapped(mounts: &[Mount], id: u32) -> Result<Vec<Option<OwnedFd>>, String> {
    use std::os::unix::fs::MetadataExt;
    let mut namespaces: Vec<((u32, u32), OwnedFd)> = Vec::new();
    let mut trees = Vec::with_capacity(mounts.len());
    for mount in mounts {
        let writable = match mount.kind {
            MountKind::ReadWrite => true,
            MountKind::ReadOnly if !super::plan::is_system(&mount.path) => false,
            _ => {
                trees.push(None);
                continue;
            }
        };
        // Gone or replaced by a link since the host planned it: nothing to
        // show, as for a bind mount.
        let meta = match mount.path.symlink_metadata() {
            Ok(meta) if !meta.file_type().is_symlink() => meta,
            _ => {
                trees.push(None);
                continue;
            }
        };
        let owner = (meta.uid(), meta.gid());
        let userns = match namespaces.iter().find(|(o, _)| *o == owner) {
            Some((_, fd)) => fd.as_raw_fd(),
            None => {
                let fd = namespace(owner, id)?;
                let raw = fd.as_raw_fd();
                namespaces.push((owner, fd));
                raw
            }
        };
        let tree = open_tree(&mount.path)?;
        let mut set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        if !writable {
            set |= MOUNT_ATTR_RDONLY;
        }
        let attr = MountAttr {
            attr_set: set,
            attr_clr: 0,
            propagation: MS_PRIVATE,
            userns_fd: userns as u64,
        };
        set_attr_at(tree.as_raw_fd(), Path::new(""), &attr, true).map_err(|e| {
            format!(
                "idmapping {} for the command's id {id}: {e} (its filesystem may not support \
                 idmapped mounts; grant a directory on one that does, such as ext4, xfs, btrfs \
                 or tmpfs, or run toolhost as another user)",
                mount.path.display()
            )
        })?;
        trees.push(Some(tree));
    }
    Ok(trees)
}

/// A detached clone of the mounts at and below `path`.
fn open_tree(path: &Path) -> Result<OwnedFd, String> {
    let c = cstring(path)?;
    let flags = OPEN_TREE_CLONE
        | libc::O_CLOEXEC as libc::c_uint
        | AT_RECURSIVE
        | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint;
    // SAFETY: a path-taking system call; the descriptor it returns is ours.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, c.as_ptr(), flags) };
    if fd < 0 {
        return os_error(format!("cloning the mount of {}", path.display()));
    }
    // SAFETY: a new descriptor owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// A user namespace that maps `owner` (uid, gid) to `id`: the idmapping of
/// a grant whose root `owner` holds. Made by a child that lives only until
/// the namespace is open.
fn namespace(owner: (u32, u32), id: u32) -> Result<OwnedFd, String> {
    let (hold, release) = super::sys::pipe()?;
    let pid = super::sys::clone(libc::CLONE_NEWUSER).map_err(super::sys::refused)?;
    if pid == 0 {
        drop(release);
        let mut byte = 0u8;
        // SAFETY: waits for the parent to close its end, then exits.
        unsafe {
            libc::read(hold.as_raw_fd(), (&mut byte as *mut u8).cast(), 1);
            libc::_exit(0)
        }
    }
    drop(hold);
    let opened = (|| {
        let write = |name: &str, text: String| {
            std::fs::write(format!("/proc/{pid}/{name}"), text)
                .map_err(|e| format!("mapping the owner of a grant ({name}): {e}"))
        };
        write("uid_map", format!("{} {id} 1\n", owner.0))?;
        write("gid_map", format!("{} {id} 1\n", owner.1))?;
        std::fs::File::open(format!("/proc/{pid}/ns/user"))
            .map(OwnedFd::from)
            .map_err(|e| format!("opening the grant's user namespace: {e}"))
    })();
    // The child exits when it reads the end of the pipe. It is not waited
    // for (a busy machine may take a while to run it): it stays a zombie
    // until the launcher ends.
    drop(release);
    opened
}
