//! What the guard does with a plant it cannot move aside (a full disk or
//! quota: the longer name needs a directory entry there is no room for):
//! it makes it harmless where it is, which needs no room.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;

use super::beneath::{c, fd_or_error, fstat, is, open_dir, permitted, readlink};

/// What is left to do with `name` of `at` when it cannot be set aside (a
/// full disk or quota: the longer name needs a directory entry there is no
/// room for), needing no room: a symbolic link is removed (only its text is
/// lost, said in the answer), anything else loses every permission (mode
/// 000), so that neither git nor toolhost, run by the owner, reads or runs
/// it. Permissions bind no one running as root (toolhost then, and likely
/// the owner too): there what it holds is emptied as well, every regular
/// file inside truncated and every link removed, except what `spared`
/// names by device and inode (what the plan masked: the owner's, which a
/// command may have moved there inside a directory but could not have
/// changed). A command could have emptied or removed anything else it
/// moved there itself. What was done, for the message.
pub(super) fn neutralise(
    at: RawFd,
    name: &OsStr,
    spared: &dyn Fn(u64, u64) -> bool,
) -> io::Result<String> {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let done = permitted(at, || {
        let mut done = Emptied::default();
        harmless(at, name, root, spared, 0, &mut done).map(|()| done)
    })?;
    Ok(done.said(root))
}

/// What [`neutralise`] did.
#[derive(Default)]
struct Emptied {
    /// The text of the link that was at the name, if one was.
    link: Option<PathBuf>,
    files: usize,
    links: usize,
    spared: usize,
    /// Entries past the budget, left as they were (mode aside).
    left: bool,
}

/// Most entries [`neutralise`] goes through, and how deep.
const MOST_EMPTIED: usize = 10_000;
const DEEPEST_EMPTIED: usize = 64;

impl Emptied {
    fn said(&self, root: bool) -> String {
        if let Some(text) = &self.link {
            return format!("the link was removed (it led to {})", text.display());
        }
        let mut said =
            "it was left in place with every permission taken away (mode 000)".to_string();
        if root {
            said.push_str(&format!(
                "; as toolhost runs as root, whom permissions do not stop, what it held was \
                 emptied too (files truncated: {}, links removed: {}",
                self.files, self.links
            ));
            if self.spared > 0 {
                said.push_str(&format!(
                    ", files the sandbox masked left whole: {}",
                    self.spared
                ));
            }
            said.push(')');
            if self.left {
                said.push_str(&format!(
                    "; past {MOST_EMPTIED} entries or {DEEPEST_EMPTIED} levels the rest was not \
                     looked at"
                ));
            }
        }
        said
    }
}

/// [`neutralise`] of `name` in `at`, `depth` levels down.
fn harmless(
    at: RawFd,
    name: &OsStr,
    root: bool,
    spared: &dyn Fn(u64, u64) -> bool,
    depth: usize,
    done: &mut Emptied,
) -> io::Result<()> {
    let cname = c(name)?;
    // SAFETY: a NUL-terminated name relative to a descriptor of ours.
    let fd = fd_or_error(unsafe {
        libc::openat(
            at,
            cname.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    let stat = fstat(fd.as_raw_fd())?;
    if is(&stat, libc::S_IFLNK) {
        let text = readlink(at, name).unwrap_or_default();
        // SAFETY: as above; removing an entry needs no room.
        if unsafe { libc::unlinkat(at, cname.as_ptr(), 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        if depth == 0 {
            done.link = Some(text);
        } else {
            done.links += 1;
        }
        return Ok(());
    }
    let whole = spared(stat.st_dev as u64, stat.st_ino as u64);
    if root && whole {
        done.spared += 1;
    } else if root && is(&stat, libc::S_IFREG) {
        // The descriptor's own file, opened to write without blocking (a
        // name swapped since is not followed: it is this inode).
        let path = c(OsStr::new(&format!("/proc/self/fd/{}", fd.as_raw_fd())))?;
        // SAFETY: a NUL-terminated path; the result is checked.
        let file = fd_or_error(unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_WRONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        })?;
        // SAFETY: a descriptor of ours; truncating frees room, needs none.
        if unsafe { libc::ftruncate(file.as_raw_fd(), 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        done.files += 1;
    } else if root && is(&stat, libc::S_IFDIR) {
        let dir = open_dir(at, name)?;
        let listed = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))?;
        for entry in listed {
            if depth + 1 > DEEPEST_EMPTIED || done.files + done.links > MOST_EMPTIED {
                done.left = true;
                break;
            }
            let entry = entry?;
            harmless(
                dir.as_raw_fd(),
                &entry.file_name(),
                root,
                spared,
                depth + 1,
                done,
            )?;
        }
    }
    // The descriptor's own file, whatever is at the name now (`fchmod`
    // takes no `O_PATH` descriptor). What the sandbox masked keeps its
    // mode: the owner's, as the owner left it.
    if !whole {
        let path = c(OsStr::new(&format!("/proc/self/fd/{}", fd.as_raw_fd())))?;
        // SAFETY: a NUL-terminated path.
        if unsafe { libc::chmod(path.as_ptr(), 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
