//! The shell of a command, started by PID 1 (of a one-command sandbox or of
//! a session): it drops every privilege (Landlock unless PID 1 already
//! entered its domain, capabilities, `no_new_privs`, seccomp, resource
//! limits), places the descriptors the host sent, and runs the command
//! line. Also the pieces both kinds of PID 1 share: the channel to the
//! host, `fork`, and dropping capabilities.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use super::control::Blocking;
use super::rlimit::set_limits;
use super::spec::{Run, Spec};
use super::sys::{check, cstring, os_error};

/// `close_range(2)`: mark the range close-on-exec instead of closing it.
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// The channel to the host, moved off stdin (close-on-exec); -1 before.
pub(super) static CONTROL: AtomicI32 = AtomicI32::new(-1);

pub(super) fn control() -> Blocking {
    Blocking(CONTROL.load(Ordering::Relaxed))
}

/// Forks this single-threaded process: 0 in the child, its pid in the parent.
pub(super) fn fork() -> Result<libc::pid_t, String> {
    // SAFETY: the launcher and PID 1 are single-threaded; the child only
    // continues with this program's own code, then execs or exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 { os_error("fork") } else { Ok(pid) }
}

/// `Err` unless `run` came with the descriptors it says it has.
pub(super) fn check_descriptors(run: &Run, fds: &[OwnedFd]) -> Result<(), String> {
    if fds.len() != run.descriptors() {
        return Err(format!(
            "the command came with {} descriptors instead of {}",
            fds.len(),
            run.descriptors()
        ));
    }
    Ok(())
}

/// The shell process: gives up every privilege and runs the command line.
/// `ruleset` is `None` when the process already lives in its Landlock domain
/// (a session's PID 1 entered it for all its commands). Returns only on
/// failure.
pub(super) fn run_shell(
    spec: &Spec,
    run: &Run,
    stdio: &[OwnedFd],
    ruleset: Option<landlock::RulesetCreated>,
    filters: &[seccompiler::BpfProgram],
) -> Result<std::convert::Infallible, String> {
    let (io, state) = stdio.split_at(stdio.len() - usize::from(run.state));
    if run.pty {
        // A new session whose controlling terminal is the pseudo-terminal.
        // SAFETY: plain system calls on this process and a descriptor
        // received from the host.
        unsafe {
            check(libc::setsid(), "setsid")?;
            for target in [0, 1, 2] {
                check(
                    libc::dup2(io[0].as_raw_fd(), target),
                    "placing the pseudo-terminal",
                )?;
            }
            check(
                libc::ioctl(0, libc::TIOCSCTTY, 0),
                "making the pseudo-terminal the controlling terminal",
            )?;
        }
    } else {
        // stdout, stderr and (when given) stdin; stdin is /dev/null otherwise.
        for (fd, target) in io.iter().zip([1, 2, 0]) {
            // SAFETY: places a descriptor received from the host.
            check(
                unsafe { libc::dup2(fd.as_raw_fd(), target) },
                "placing the command's output",
            )?;
        }
        if spec.session {
            // Its own group, which the host's kill reaches as a whole.
            // SAFETY: plain system call on this process.
            check(unsafe { libc::setpgid(0, 0) }, "setpgid")?;
        }
    }
    std::env::set_current_dir(&run.cwd).map_err(|e| {
        format!(
            "the working directory {} is not in the sandbox: {e}",
            run.cwd.display()
        )
    })?;
    let shell = cstring(&run.shell)?;
    let argv = if run.argv.is_empty() {
        vec![
            shell.clone(),
            CString::new("-c").unwrap(),
            CString::new(run.line.as_bytes()).map_err(|_| "the command line holds a NUL byte")?,
        ]
    } else {
        run.argv
            .iter()
            .map(|arg| CString::new(arg.as_bytes()).map_err(|_| "an argument holds a NUL byte"))
            .collect::<Result<_, _>>()?
    };
    let env = run
        .env
        .iter()
        .map(|(name, value)| {
            let mut pair = name.clone();
            pair.push(b'=');
            pair.extend_from_slice(value);
            CString::new(pair).map_err(|_| "an environment variable holds a NUL byte".to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let argv_ptrs: Vec<*const libc::c_char> = argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let env_ptrs: Vec<*const libc::c_char> = env
        .iter()
        .map(|e| e.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();

    set_limits(spec)?;
    // SAFETY: plain prctl on this process.
    check(
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) },
        "prctl(PR_SET_NO_NEW_PRIVS)",
    )?;
    if let Some(ruleset) = ruleset {
        ruleset
            .restrict_self()
            .map_err(|e| format!("Landlock: {e}"))?;
    }
    drop_capabilities()?;
    // Nothing of the launcher's stays open in the command. The channel
    // stays until the shell starts, to report a failure before.
    // SAFETY: marks descriptors 3 and up of this process close-on-exec.
    check(
        unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) }
            as libc::c_int,
        "closing the launcher's descriptors",
    )?;
    if let Some(state) = state.first() {
        // SAFETY: places a descriptor received from the host at 3, without
        // close-on-exec (`dup2` onto itself would keep the flag).
        check(
            unsafe {
                if state.as_raw_fd() == 3 {
                    libc::fcntl(3, libc::F_SETFD, 0)
                } else {
                    libc::dup2(state.as_raw_fd(), 3)
                }
            },
            "placing the session's state pipe",
        )?;
    }
    for filter in filters {
        seccompiler::apply_filter(filter)
            .map_err(|e| format!("installing the seccomp filter: {e}"))?;
    }
    // SAFETY: argv and envp are NULL-terminated arrays of C strings that
    // outlive the call.
    unsafe {
        libc::execve(shell.as_ptr(), argv_ptrs.as_ptr(), env_ptrs.as_ptr());
    }
    os_error(format!("running {}", run.shell.display()))
}

/// `struct __user_cap_header_struct` and `__user_cap_data_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Drops every capability: bounding set, ambient, and the three sets.
pub(super) fn drop_capabilities() -> Result<(), String> {
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse::<libc::c_ulong>().ok())
        .unwrap_or(63);
    // SAFETY: prctl and capset on this process with valid arguments.
    unsafe {
        for cap in 0..=last {
            // Fails only for capabilities the kernel does not know.
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let header = CapHeader {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let data = [CapData::default(); 2];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) < 0 {
            return os_error("dropping capabilities");
        }
    }
    Ok(())
}
