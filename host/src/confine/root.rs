//! The sandbox's root filesystem, built by the launcher: system
//! directories and grants bind-mounted read-only or read-write, masks over
//! denied paths, a private `/tmp` and `/dev`, then `pivot_root` into it.

use std::ffi::CString;
use std::fs::File;
use std::path::{Path, PathBuf};

use std::os::fd::{AsRawFd, OwnedFd};

use super::identity::{
    MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY, MountAttr,
    set_attr_at,
};
use super::spec::{Mount, MountKind};
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
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
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

    for (i, entry) in mounts.iter().enumerate() {
        match trees.get(i) {
            Some(Some(tree)) => place_tree(entry, tree)?,
            _ => place(entry, tmp_size)?,
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
    let dir = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        check(
            libc::fstat(tree.as_raw_fd(), &mut stat),
            format!("reading {}", entry.path.display()),
        )?;
        stat.st_mode & libc::S_IFMT == libc::S_IFDIR
    };
    let target = inside(&entry.path);
    mount_point(&target, dir)?;
    attach(tree, &target)
}

/// Makes one entry of the new root.
fn place(entry: &Mount, tmp_size: u64) -> Result<(), String> {
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
                // Gone since the host planned it: nothing to show.
                return Ok(());
            };
            if meta.file_type().is_symlink() {
                return Ok(());
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
            set_attr(&target, set, true)
        }
        MountKind::MaskFile | MountKind::MaskDir => {
            let dir = entry.kind == MountKind::MaskDir;
            if target.symlink_metadata().is_err() {
                // Not visible in the sandbox (outside every mount).
                return Ok(());
            }
            let mask = if dir { "/mask-dir" } else { "/mask-file" };
            mount(Some(Path::new(mask)), &target, None, libc::MS_BIND, None)?;
            set_attr(&target, hidden, false)
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
