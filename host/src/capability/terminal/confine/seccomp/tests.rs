//! The filter judged two ways: by a classic-BPF interpreter over generated
//! system call arguments (every width the registers can hold), and by the
//! kernel, in a forked child that installs it.

use proptest::prelude::*;

use super::*;

/// What the kernel hands a filter (`struct seccomp_data`).
struct Call {
    nr: u32,
    arch: u32,
    args: [u64; 6],
}

fn call(nr: libc::c_long, args: &[u64]) -> Call {
    let mut all = [0; 6];
    all[..args.len()].copy_from_slice(args);
    Call {
        nr: nr as u32,
        arch: audit_arch().unwrap(),
        args: all,
    }
}

/// The 32-bit word of `seccomp_data` at byte `offset` (little-endian).
fn word(call: &Call, offset: u32) -> u32 {
    match offset {
        0 => call.nr,
        4 => call.arch,
        16..=63 => {
            let arg = call.args[(offset as usize - 16) / 8];
            if offset.is_multiple_of(8) {
                arg as u32
            } else {
                (arg >> 32) as u32
            }
        }
        _ => panic!("the filter reads seccomp_data at {offset}"),
    }
}

/// Runs a classic-BPF program as the kernel would, on `call`.
fn run(program: &[sock_filter], call: &Call) -> u32 {
    let (mut pc, mut acc) = (0usize, 0u32);
    loop {
        let op = &program[pc];
        pc += 1;
        match op.code {
            0x20 => acc = word(call, op.k),
            0x54 => acc &= op.k,
            0x05 => pc += op.k as usize,
            0x15 | 0x25 | 0x35 => {
                let holds = match op.code {
                    0x15 => acc == op.k,
                    0x25 => acc > op.k,
                    _ => acc >= op.k,
                };
                pc += usize::from(if holds { op.jt } else { op.jf });
            }
            0x06 => return op.k,
            code => panic!("the interpreter does not know BPF op {code:#x}"),
        }
    }
}

/// What the installed filters answer together: the strictest action, as
/// the kernel picks it.
fn verdict(call: &Call) -> u32 {
    let rank = |action: u32| match action & 0xffff_0000 {
        libc::SECCOMP_RET_KILL_PROCESS => 0,
        libc::SECCOMP_RET_ERRNO => 1,
        libc::SECCOMP_RET_ALLOW => 2,
        other => panic!("unexpected action {other:#x}"),
    };
    filters()
        .unwrap()
        .iter()
        .map(|program| run(program, call))
        .min_by_key(|&action| rank(action))
        .unwrap()
}

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

proptest! {
    #[test]
    fn typing_into_a_terminal_is_refused_whatever_the_upper_bits(
        upper in any::<u32>(),
        fd in any::<u64>(),
        which in 0..REFUSED_IOCTLS.len(),
    ) {
        let request = u64::from(upper) << 32 | u64::from(REFUSED_IOCTLS[which]);
        prop_assert_eq!(verdict(&call(libc::SYS_ioctl, &[fd, request])), EPERM);
    }

    #[test]
    fn other_ioctl_requests_pass(request in any::<u64>()) {
        prop_assume!(!REFUSED_IOCTLS.contains(&(request as u32)));
        prop_assert_eq!(verdict(&call(libc::SYS_ioctl, &[0, request])), ALLOW);
    }

    #[test]
    fn clone_makes_no_namespace_whatever_else_the_flags_hold(
        flags in any::<u64>(),
        which in 0..NAMESPACE_FLAGS.len(),
    ) {
        let namespaces = NAMESPACE_FLAGS.iter().fold(0u64, |all, &f| all | u64::from(f as u32));
        let with = flags | u64::from(NAMESPACE_FLAGS[which] as u32);
        prop_assert_eq!(verdict(&call(libc::SYS_clone, &[with])), EPERM);
        let without = flags & !namespaces;
        prop_assert_eq!(verdict(&call(libc::SYS_clone, &[without])), ALLOW);
    }

    #[test]
    fn no_mode_with_a_set_id_bit_passes_any_call_that_sets_one(
        mode in any::<u64>(),
        other in any::<[u64; 6]>(),
        which in 0..MODE_ARGUMENTS.len(),
    ) {
        let (nr, index) = MODE_ARGUMENTS[which];
        let mut args = other;
        args[usize::from(index)] = mode;
        let privileged = mode & u64::from(libc::S_ISUID | libc::S_ISGID) != 0;
        let expected = if privileged { EPERM } else { ALLOW };
        prop_assert_eq!(verdict(&call(nr, &args)), expected);
    }

    #[test]
    fn calls_newer_than_the_filter_or_of_another_abi_answer_enosys(nr in any::<u32>()) {
        prop_assume!(nr > NEWEST_SYSCALL);
        prop_assert_eq!(verdict(&call(libc::c_long::from(nr), &[])), ENOSYS);
    }

    #[test]
    fn another_architecture_is_killed(nr in any::<u32>(), arch in any::<u32>()) {
        prop_assume!(arch != audit_arch().unwrap());
        let mut call = call(libc::c_long::from(nr), &[]);
        call.arch = arch;
        prop_assert_eq!(verdict(&call), libc::SECCOMP_RET_KILL_PROCESS);
    }
}

#[test]
fn the_refused_and_unreadable_calls_are_known_and_answered() {
    for &nr in REFUSED {
        assert!(nr as u32 <= NEWEST_SYSCALL, "{nr}");
        assert_eq!(verdict(&call(nr, &[1, 2, 3])), EPERM, "{nr}");
    }
    for &nr in UNREADABLE {
        assert_eq!(verdict(&call(nr, &[0; 6])), ENOSYS, "{nr}");
    }
    // Ordinary work passes.
    for nr in [libc::SYS_read, libc::SYS_write, libc::SYS_getpid] {
        assert_eq!(verdict(&call(nr, &[0, 0, 0])), ALLOW, "{nr}");
    }
}

/// Runs `body` in a forked child that installed the filters; its exit code
/// is what `body` returned.
fn in_filtered_child(body: impl FnOnce() -> i32) -> i32 {
    let filters = filters().unwrap();
    // SAFETY: the child installs prebuilt filters and makes plain system
    // calls only, then exits without returning into the test harness.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0);
        if pid == 0 {
            for filter in &filters {
                if seccompiler::apply_filter(filter).is_err() {
                    libc::_exit(100);
                }
            }
            libc::_exit(body());
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        assert!(libc::WIFEXITED(status), "status {status}");
        libc::WEXITSTATUS(status)
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[test]
fn the_kernel_refuses_what_the_filter_says() {
    let (mut master, mut terminal) = (-1, -1);
    // SAFETY: opens a pseudo-terminal pair for this test.
    let opened = unsafe {
        libc::openpty(
            &mut master,
            &mut terminal,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(opened, 0);
    // SAFETY: raw mode on our own terminal, so one typed byte is readable.
    unsafe {
        let mut termios: libc::termios = std::mem::zeroed();
        libc::tcgetattr(terminal, &mut termios);
        libc::cfmakeraw(&mut termios);
        libc::tcsetattr(terminal, libc::TCSANOW, &termios);
    }
    let dir = tempfile::tempdir().unwrap();
    let file = std::ffi::CString::new(dir.path().join("f").to_str().unwrap()).unwrap();
    std::fs::write(dir.path().join("f"), "x").unwrap();
    let made = std::ffi::CString::new(dir.path().join("made").to_str().unwrap()).unwrap();
    let code = in_filtered_child(|| {
        // SAFETY: plain system calls on this child's own descriptors and
        // files; each result is checked against what the filter says.
        unsafe {
            let byte = b'x';
            let sti = (1u64 << 32) | u64::from(libc::TIOCSTI as u32);
            if libc::syscall(libc::SYS_ioctl, terminal, sti, &byte) != -1 || errno() != libc::EPERM
            {
                return 1;
            }
            if libc::chmod(file.as_ptr(), 0o4755) != -1 || errno() != libc::EPERM {
                return 2;
            }
            let fd = libc::open(made.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o2755);
            if fd != -1 || errno() != libc::EPERM {
                return 3;
            }
            if libc::syscall(libc::c_long::from(NEWEST_SYSCALL) + 1) != -1
                || errno() != libc::ENOSYS
            {
                return 4;
            }
            if libc::syscall(libc::SYS_openat2, libc::AT_FDCWD, made.as_ptr(), 0, 0) != -1
                || errno() != libc::ENOSYS
            {
                return 5;
            }
            #[cfg(target_arch = "x86_64")]
            if libc::syscall(libc::c_long::from(X32_SYSCALL_BIT) | libc::SYS_getpid) != -1
                || errno() != libc::ENOSYS
            {
                return 6;
            }
            // Allowed spellings still work.
            if libc::chmod(file.as_ptr(), 0o755) != 0 {
                return 7;
            }
            0
        }
    });
    assert_eq!(code, 0);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("f"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o755);
    assert!(!dir.path().join("made").exists());
    // Nothing was typed: the terminal's input is empty.
    // SAFETY: a non-blocking read of our own pseudo-terminal.
    unsafe {
        libc::fcntl(terminal, libc::F_SETFL, libc::O_NONBLOCK);
        let mut buffer = [0u8; 8];
        let read = libc::read(terminal, buffer.as_mut_ptr().cast(), buffer.len());
        assert!(read <= 0, "typed: {:?}", &buffer[..read as usize]);
        libc::close(master);
        libc::close(terminal);
    }
}
