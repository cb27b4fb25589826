//! The sandbox's root filesystem, built by the launcher: system
//! directories and grants bind-mounted read-only or read-write, masks over
//! denied paths, a private `/tmp` and `/dev`, then `pivot_root` into it.

use std::ffi::CString;
use std::fs::File;
use std::path::{Path, PathBuf};

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::identity::{
    MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY, MountAttr,
    set_attr_at,
};
use super::spec::{MOVED, Mount, MountKind};
use super::sys::{check, cstring, os_error};

/// Where the launcher stages the new root before it pivots into it.
const STAGE: &str = "/tmp";

/// Sets mount flags on `path` (and every mount below it when `recursive`).
fn set_attr(path: &Path, set: u64, recursive: bool) -> Result<(), String> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    set_attr_at(libc::AT_FDCWD, path, &attr, recursive)
        .map_err(|e| format!("making {} read-only or nosuid: {e}", path.display()))
}

/// Attaches the detached mount `tree` (see [`super::identity::idmapped`])
/// at `target`.
fn attach(tree: &OwnedFd, target: &Path) -> Result<(), String> {
    let target_c = cstring(target)?;
    // SAFETY: moves a mount this process holds onto a NUL-terminated path.
    let result = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            target_c.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if result < 0 {
        return os_error(format!("attaching the grant at {}", target.display()));
    }
    Ok(())
}

fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), String> {
    let source_c = source.map(cstring).transpose()?;
    let target_c = cstring(target)?;
    let fstype_c = fstype.map(cstring).transpose()?;
    let data_c = data.map(cstring).transpose()?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is NUL-terminated or null.
    let result = unsafe {
        libc::mount(
            ptr(&source_c),
            target_c.as_ptr(),
            ptr(&fstype_c),
            flags,
            ptr(&data_c).cast(),
        )
    };
    if result < 0 {
        return os_error(format!(
            "mounting {} on {}",
            source.map_or_else(
                || fstype.unwrap_or("-").to_string(),
                |s| s.display().to_string()
            ),
            target.display()
        ));
    }
    Ok(())
}

fn pivot_root(new: &str, old: &str) -> Result<(), String> {
    let (new_c, old_c) = (cstring(new)?, cstring(old)?);
    // SAFETY: both paths are NUL-terminated.
    let result = unsafe { libc::syscall(libc::SYS_pivot_root, new_c.as_ptr(), old_c.as_ptr()) };
    if result < 0 {
        return os_error("pivot_root");
    }
    Ok(())
}

/// `path` inside the new root, seen from the staging root.
fn inside(path: &Path) -> PathBuf {
    Path::new("/newroot").join(path.strip_prefix("/").unwrap_or(path))
}

/// `path` of the host, seen from the staging root.
fn host(path: &Path) -> PathBuf {
    Path::new("/oldroot").join(path.strip_prefix("/").unwrap_or(path))
}

/// Builds the new root from `mounts` and pivots into it. `trees` holds,
/// by index, the mounts the launcher cloned already (idmapped grants).
pub(super) fn build_root(
    mounts: &[Mount],
    trees: &[Option<OwnedFd>],
    tmp_size: u64,
) -> Result<(), String> {
    // Nothing done here reaches the host's mounts.
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_SLAVE,
        None,
    )?;
    let stage = Path::new(STAGE);
    let tiny = Some("mode=0755,size=1m");
    let private = libc::MS_NOSUID | libc::MS_NODEV;
    mount(None, stage, Some("tmpfs"), private, tiny)?;
    std::env::set_current_dir(stage).map_err(|e| format!("entering the staging root: {e}"))?;
    for dir in ["newroot", "oldroot"] {
        std::fs::create_dir(dir).map_err(|e| format!("staging {dir}: {e}"))?;
    }
    mount(None, Path::new("newroot"), Some("tmpfs"), private, tiny)?;
    pivot_root(".", "oldroot")?;
    std::env::set_current_dir("/").map_err(|e| format!("entering the staging root: {e}"))?;
    // What masks are made of: an empty file and directory nobody may open.
    make_mask_sources()?;

    let new_root = open_path(libc::AT_FDCWD, Path::new("/newroot"), 0)
        .map_err(|e| format!("opening the new root: {e}"))?;
    for (i, entry) in mounts.iter().enumerate() {
        match trees.get(i) {
            Some(Some(tree)) => place_tree(entry, tree)?,
            _ => place(entry, mounts, &new_root, tmp_size)?,
        }
    }

    std::env::set_current_dir("/newroot").map_err(|e| format!("entering the new root: {e}"))?;
    pivot_root(".", ".")?;
    // SAFETY: detaches the staging root stacked on the new one.
    check(
        unsafe { libc::umount2(c".".as_ptr(), libc::MNT_DETACH) },
        "detaching the host's root",
    )?;
    std::env::set_current_dir("/").map_err(|e| format!("entering the new root: {e}"))?;
    set_attr(
        Path::new("/"),
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        false,
    )
}

fn make_mask_sources() -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    File::create("/mask-file").map_err(|e| format!("creating the mask file: {e}"))?;
    std::fs::create_dir("/mask-dir").map_err(|e| format!("creating the mask directory: {e}"))?;
    for path in ["/mask-file", "/mask-dir"] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o000))
            .map_err(|e| format!("closing {path}: {e}"))?;
    }
    Ok(())
}

/// Creates what `target` needs to exist as a mount point: a directory or
/// an empty file. A mount point that already exists (in a bound grant) is
/// used as it is.
fn mount_point(target: &Path, dir: bool) -> Result<(), String> {
    if target.symlink_metadata().is_ok() {
        return Ok(());
    }
    let parent = target.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(parent)
        .map_err(|e| format!("creating {} in the sandbox: {e}", parent.display()))?;
    let made = if dir {
        std::fs::create_dir(target)
    } else {
        File::create(target).map(drop)
    };
    made.map_err(|e| format!("creating {} in the sandbox: {e}", target.display()))
}

/// Attaches a grant the launcher cloned, flags and idmapping set.
fn place_tree(entry: &Mount, tree: &OwnedFd) -> Result<(), String> {
    // SAFETY: `stat` fills the buffer for the descriptor we hold.
    let (dir, cloned) = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        check(
            libc::fstat(tree.as_raw_fd(), &mut stat),
            format!("reading {}", entry.path.display()),
        )?;
        (
            stat.st_mode & libc::S_IFMT == libc::S_IFDIR,
            (stat.st_dev, stat.st_ino),
        )
    };
    // What the launcher cloned is what was planned, not what was moved or
    // linked there since.
    if entry.found.is_some_and(|found| found != cloned) {
        return moved(entry);
    }
    let target = inside(&entry.path);
    mount_point(&target, dir)?;
    attach(tree, &target)
}

/// Makes one entry of the new root (`new_root`, opened) among `mounts`.
fn place(entry: &Mount, mounts: &[Mount], new_root: &OwnedFd, tmp_size: u64) -> Result<(), String> {
    let target = inside(&entry.path);
    let source = host(&entry.path);
    let hidden = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    match entry.kind {
        MountKind::Symlink => {
            let link = std::fs::read_link(&source)
                .map_err(|e| format!("reading the link {}: {e}", entry.path.display()))?;
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            std::os::unix::fs::symlink(&link, &target)
                .map_err(|e| format!("linking {}: {e}", entry.path.display()))
        }
        MountKind::ReadOnly | MountKind::ReadWrite => {
            let Ok(meta) = source.symlink_metadata() else {
                // Gone since the host planned it: nothing to show, unless
                // the plan counted on it.
                return entry.found.map_or(Ok(()), |_| moved(entry));
            };
            if meta.file_type().is_symlink() {
                return entry.found.map_or(Ok(()), |_| moved(entry));
            }
            mount_point(&target, meta.is_dir())?;
            mount(
                Some(&source),
                &target,
                None,
                libc::MS_BIND | libc::MS_REC,
                None,
            )?;
            let mut set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
            if entry.kind == MountKind::ReadOnly {
                set |= MOUNT_ATTR_RDONLY;
            }
            set_attr(&target, set, true)?;
            // What got mounted is what was planned, not what was moved or
            // linked there since.
            if let Some(found) = entry.found {
                let mounted = target.symlink_metadata().map(|m| {
                    use std::os::unix::fs::MetadataExt;
                    (m.dev(), m.ino())
                });
                if mounted.ok() != Some(found) {
                    return moved(entry);
                }
            }
            Ok(())
        }
        MountKind::MaskFile | MountKind::MaskDir => {
            let dir = entry.kind == MountKind::MaskDir;
            // The mask covers exactly what the plan found: opened without
            // following a link out of the new root, checked, then mounted
            // on (by descriptor, so a rename meanwhile changes nothing).
            let relative = entry.path.strip_prefix("/").unwrap_or(&entry.path);
            let covered = match open_path(new_root.as_raw_fd(), relative, RESOLVE_IN_ROOT) {
                Ok(covered) => covered,
                Err(e) => {
                    let inside = mounts.iter().any(|m| {
                        matches!(m.kind, MountKind::ReadOnly | MountKind::ReadWrite)
                            && entry.path.starts_with(&m.path)
                            && entry.path != m.path
                    });
                    if !inside && e.kind() == std::io::ErrorKind::NotFound {
                        // Not visible in the sandbox (outside every mount).
                        return Ok(());
                    }
                    return Err(format!("masking {}: {e}; {MOVED}", entry.path.display()));
                }
            };
            if entry
                .found
                .is_some_and(|found| identity(&covered) != Some(found))
            {
                return moved(entry);
            }
            let mask = if dir { "/mask-dir" } else { "/mask-file" };
            mount_onto(Path::new(mask), &covered, hidden)
                .map_err(|e| format!("masking {}: {e}", entry.path.display()))
        }
        MountKind::Proc => {
            mount_point(&target, true)?;
            mount(
                None,
                &target,
                Some("proc"),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                None,
            )
            .map_err(|e| format!("{e} (a private /proc needs a PID namespace)"))
        }
        MountKind::Tmpfs => {
            mount_point(&target, true)?;
            mount(
                None,
                &target,
                Some("tmpfs"),
                libc::MS_NOSUID | libc::MS_NODEV,
                Some(&format!("mode=1777,size={tmp_size}")),
            )
        }
        MountKind::Dev => make_dev(&target),
    }
}

/// The failure of a mount whose path no longer holds what was planned.
fn moved(entry: &Mount) -> Result<(), String> {
    Err(format!("{}: {MOVED}", entry.path.display()))
}

/// `openat2(2)`'s `struct open_how`.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Resolves every path as if `dirfd` were the root (no link leaves it).
const RESOLVE_IN_ROOT: u64 = 0x10;
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const OPEN_TREE_CLONE: libc::c_uint = 0x1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

/// An `O_PATH` descriptor of `path` (relative to `dirfd`), its last
/// component not followed, resolved with `resolve` flags.
fn open_path(dirfd: libc::c_int, path: &Path, resolve: u64) -> std::io::Result<OwnedFd> {
    let c = cstring(path).map_err(std::io::Error::other)?;
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: resolve | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: a NUL-terminated path and a valid `open_how` of the size
    // passed; the descriptor returned is owned here.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            c.as_ptr(),
            &how as *const OpenHow,
            size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// The device and inode of what `fd` refers to.
fn identity(fd: &OwnedFd) -> Option<(u64, u64)> {
    // SAFETY: fstat fills a local `stat` for a descriptor owned here.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        (libc::fstat(fd.as_raw_fd(), &mut stat) == 0).then_some((stat.st_dev, stat.st_ino))
    }
}

/// Mounts a copy of `source` with the mount flags `attrs` onto what
/// `target` refers to.
fn mount_onto(source: &Path, target: &OwnedFd, attrs: u64) -> std::io::Result<()> {
    let c = cstring(source).map_err(std::io::Error::other)?;
    // SAFETY: a NUL-terminated path; the descriptor returned is owned here.
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    if tree < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, owned by nothing else.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as libc::c_int) };
    let attr = MountAttr {
        attr_set: attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the detached tree's descriptor, an empty path and a valid
    // `struct mount_attr` of the size passed.
    let set = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint,
            &attr as *const MountAttr,
            size_of::<MountAttr>(),
        )
    };
    if set < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two descriptors owned here, empty paths.
    let moved = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            target.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if moved < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A minimal `/dev`: the harmless character devices bound from the host,
/// the usual links, and a private `shm`.
fn make_dev(target: &Path) -> Result<(), String> {
    mount_point(target, true)?;
    mount(
        None,
        target,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("mode=0755,size=64k"),
    )?;
    for name in ["null", "zero", "full", "random", "urandom", "tty"] {
        let device = target.join(name);
        File::create(&device).map_err(|e| format!("creating /dev/{name}: {e}"))?;
        mount(
            Some(&Path::new("/oldroot/dev").join(name)),
            &device,
            None,
            libc::MS_BIND,
            None,
        )?;
    }
    for (name, link) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(link, target.join(name))
            .map_err(|e| format!("linking /dev/{name}: {e}"))?;
    }
    let shm = target.join("shm");
    std::fs::create_dir(&shm).map_err(|e| format!("creating /dev/shm: {e}"))?;
    mount(
        None,
        &shm,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=1777,size=16m"),
    )
}
