//! A process of toolhost's that must not outlive toolhost's ability to
//! act: the sandbox launcher (which ends its sandbox) and the holder of the
//! containers' lifeline. Each watches the toolhost that started it and
//! acts when it is gone, stopped (SIGSTOP, SIGTSTP, a debugger) or frozen
//! (a cgroup freezer): such a toolhost keeps its descriptors open but
//! guards nothing, and may be killed before it resumes.

use std::time::Duration;

/// How often the parent is looked at.
pub(super) const EVERY: Duration = Duration::from_millis(100);

/// The toolhost that started this process, as seen at its start.
#[derive(Clone, Copy)]
pub(super) struct Parent(libc::pid_t);

impl Parent {
    /// This process's parent now.
    pub(super) fn now() -> Self {
        // SAFETY: getppid cannot fail.
        Self(unsafe { libc::getppid() })
    }

    /// Whether the parent can no longer act: this process was handed to
    /// another (the parent ended), or the parent is stopped, traced or
    /// frozen.
    pub(super) fn unable(self) -> bool {
        // SAFETY: getppid cannot fail.
        if unsafe { libc::getppid() } != self.0 {
            return true;
        }
        match std::fs::read(format!("/proc/{}/stat", self.0)) {
            Ok(stat) => stopped(&stat) || frozen(self.0),
            Err(_) => true,
        }
    }
}

/// Whether process `pid` is in a frozen cgroup (`systemctl freeze`, a
/// paused container): cgroup v2's `frozen 1` in `cgroup.events` (which
/// holds for the descendants of a frozen cgroup too), or v1's freezer
/// state other than `THAWED`. Such a process reads as sleeping.
fn frozen(pid: libc::pid_t) -> bool {
    let Ok(cgroups) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return false;
    };
    let (unified, freezer) = cgroup_mounts();
    cgroups.lines().any(|line| {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            return false;
        };
        let read = |mount: &Option<std::path::PathBuf>, file: &str| {
            mount.as_ref().and_then(|mount| {
                let dir = mount.join(path.trim_start_matches('/'));
                std::fs::read_to_string(dir.join(file)).ok()
            })
        };
        if id == "0" && controllers.is_empty() {
            read(unified, "cgroup.events")
                .is_some_and(|events| events.lines().any(|l| l == "frozen 1"))
        } else if controllers.split(',').any(|c| c == "freezer") {
            read(freezer, "freezer.state").is_some_and(|state| state.trim() != "THAWED")
        } else {
            false
        }
    })
}

/// Where cgroup v2 and v1's freezer are mounted, if they are: read once.
fn cgroup_mounts() -> &'static (Option<std::path::PathBuf>, Option<std::path::PathBuf>) {
    static MOUNTS: std::sync::OnceLock<(Option<std::path::PathBuf>, Option<std::path::PathBuf>)> =
        std::sync::OnceLock::new();
    MOUNTS.get_or_init(|| {
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let (mut unified, mut freezer) = (None, None);
        for line in info.lines() {
            // `... mount-point options [optional fields] - fstype source super-options`
            let Some((before, after)) = line.split_once(" - ") else {
                continue;
            };
            let Some(point) = before.split(' ').nth(4) else {
                continue;
            };
            let mut after = after.split(' ');
            let (fstype, options) = (after.next(), after.nth(1).unwrap_or_default());
            match fstype {
                Some("cgroup2") if unified.is_none() => unified = Some(point.into()),
                Some("cgroup") if options.split(',').any(|o| o == "freezer") => {
                    freezer = Some(point.into());
                }
                _ => {}
            }
        }
        (unified, freezer)
    })
}

/// Whether a `/proc/PID/stat` line says the process is stopped (`T`) or
/// stopped by its tracer (`t`). The state follows the last `)`: the name
/// before it may hold anything.
fn stopped(stat: &[u8]) -> bool {
    let Some(end) = stat.iter().rposition(|&b| b == b')') else {
        return true;
    };
    let state = stat[end + 1..].iter().find(|b| !b.is_ascii_whitespace());
    matches!(state, Some(b'T' | b't'))
}

/// `__toolhost-lifeline FIFO`: holds `FIFO` open for writing (it writes
/// nothing) while the toolhost that started it can act, so that every
/// container reading it sees its end when toolhost ends or stops; tells
/// toolhost it holds it with one byte on stdout. Never returns.
pub(crate) fn hold_lifeline() -> ! {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let parent = Parent::now();
    let Some(path) = std::env::args_os().nth(2) else {
        // SAFETY: ends this process.
        unsafe { libc::_exit(2) }
    };
    let held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&path);
    let Ok(_held) = held else {
        // SAFETY: ends this process.
        unsafe { libc::_exit(1) }
    };
    let _ = std::io::stdout()
        .write_all(b"1")
        .and_then(|()| std::io::stdout().flush());
    while !parent.unable() {
        std::thread::sleep(EVERY);
    }
    // SAFETY: ends this process (and its hold).
    unsafe { libc::_exit(0) }
}

#[cfg(test)]
mod tests {
    use super::stopped;

    #[test]
    fn the_state_is_read_after_the_last_parenthesis() {
        assert!(stopped(b"12 (toolhost) T 1 12 12 0"));
        assert!(stopped(b"12 (a) S (b)) t 1"));
        assert!(!stopped(b"12 (x) T) S 1 12"));
        assert!(!stopped(b"12 (toolhost) S 1 12 12 0"));
        assert!(!stopped(b"12 (toolhost) R 1"));
        assert!(stopped(b"garbage"));
    }
}
