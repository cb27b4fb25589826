//! The seccomp filter of sandboxed commands: system calls that could undo
//! or get around the sandbox (new namespaces, mounts, tracing other
//! processes, kernel keyrings, BPF, io_uring, module loading), typing into
//! a terminal, and setting the set-user-ID or set-group-ID bit fail with
//! `EPERM`. Calls whose arguments a filter cannot read (`clone3`,
//! `openat2`), calls of another ABI (x32) and calls newer than the filter
//! fail with `ENOSYS`, so that the C library falls back to a call it can
//! read. Arguments are compared at the width the kernel reads them.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, sock_filter,
};

/// The newest system call the filter was written for: `file_setattr`
/// (Linux 6.17). Numbers from 424 on are the same on every architecture;
/// anything above answers `ENOSYS`, so a call added by a newer kernel is
/// refused until it is reviewed here.
pub(super) const NEWEST_SYSCALL: u32 = 469;

/// `open_tree_attr` (Linux 6.15), which the `libc` crate does not name yet.
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;

/// `fchmodat2` (Linux 6.6), by its number, the same on every architecture.
const SYS_FCHMODAT2: libc::c_long = 452;

/// The mark of the x32 ABI on an x86_64 system call number; its calls are
/// the same calls under other numbers, which the rules below would miss.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// System calls refused outright.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_open_tree,
    SYS_OPEN_TREE_ATTR,
    libc::SYS_move_mount,
    libc::SYS_mount_setattr,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    libc::SYS_syslog,
    libc::SYS_vhangup,
    libc::SYS_pidfd_getfd,
    libc::SYS_landlock_create_ruleset,
];

/// System calls answered with `ENOSYS`: their arguments are in memory a
/// filter cannot read (`clone3`'s flags, `openat2`'s mode), and the C
/// library falls back to `clone` and `openat`, whose arguments it can.
const UNREADABLE: &[libc::c_long] = &[libc::SYS_clone3, libc::SYS_openat2];

/// `clone` flags that would make new namespaces. The kernel reads the low
/// 32 bits of the flags.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWTIME,
];

/// `ioctl` requests that type into a terminal. The kernel reads the
/// request as 32 bits, whatever the upper half of the register holds.
const REFUSED_IOCTLS: &[u32] = &[libc::TIOCSTI as u32, libc::TIOCLINUX as u32];

/// The mode bits no command may set.
const PRIVILEGE_BITS: &[u32] = &[libc::S_ISUID, libc::S_ISGID];

/// System calls that set a file's mode, with the index of the mode
/// argument (a `umode_t`, of which the kernel reads 16 bits). A mode with
/// [`PRIVILEGE_BITS`] is refused whatever the flags: the kernel uses the
/// mode of `open` with `O_CREAT` or `O_TMPFILE`, and ignores it otherwise.
const MODE_ARGUMENTS: &[(libc::c_long, u8)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_open, 2),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_creat, 1),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_chmod, 1),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mknod, 1),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mkdir, 1),
    (libc::SYS_openat, 3),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (SYS_FCHMODAT2, 2),
    (libc::SYS_mknodat, 2),
    (libc::SYS_mkdirat, 2),
];

fn error(e: impl std::fmt::Display) -> String {
    format!("building the seccomp filter: {e}")
}

/// The filters, compiled for this machine's architecture: the first
/// answers `ENOSYS` (another ABI, a call newer than the filter, a call it
/// cannot read), the second refuses with `EPERM`. Both kill a process that
/// calls in through another architecture (`int 0x80`).
pub(crate) fn filters() -> Result<[BpfProgram; 2], String> {
    let arch: seccompiler::TargetArch = std::env::consts::ARCH.try_into().map_err(error)?;
    let rule = |conditions: Vec<(u8, SeccompCmpOp, u64)>| {
        conditions
            .into_iter()
            .map(|(index, op, value)| {
                SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value)
            })
            .collect::<Result<Vec<_>, _>>()
            .and_then(SeccompRule::new)
            .map_err(error)
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    let bit = |bit: u64| (SeccompCmpOp::MaskedEq(bit), bit);
    let mut namespaces = Vec::new();
    for &flag in NAMESPACE_FLAGS {
        let (op, value) = bit(u64::from(flag as u32));
        namespaces.push(rule(vec![(0, op, value)])?);
    }
    rules.insert(libc::SYS_clone, namespaces);
    let mut ioctls = Vec::new();
    for &request in REFUSED_IOCTLS {
        ioctls.push(rule(vec![(1, SeccompCmpOp::Eq, u64::from(request))])?);
    }
    rules.insert(libc::SYS_ioctl, ioctls);
    for &(call, index) in MODE_ARGUMENTS {
        let mut modes = Vec::new();
        for &mode in PRIVILEGE_BITS {
            let (op, value) = bit(u64::from(mode));
            modes.push(rule(vec![(index, op, value)])?);
        }
        rules.insert(call, modes);
    }
    let refusing = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .and_then(BpfProgram::try_from)
    .map_err(error)?;
    Ok([unknown_calls(audit_arch()?), refusing])
}

/// `AUDIT_ARCH_*` of this machine, as the kernel puts it in `seccomp_data`.
fn audit_arch() -> Result<u32, String> {
    const EM_X86_64: u32 = 62;
    const EM_AARCH64: u32 = 183;
    const EM_RISCV: u32 = 243;
    // 64-bit, little-endian.
    const FLAGS: u32 = 0x8000_0000 | 0x4000_0000;
    Ok(FLAGS
        | match std::env::consts::ARCH {
            "x86_64" => EM_X86_64,
            "aarch64" => EM_AARCH64,
            "riscv64" => EM_RISCV,
            other => return Err(error(format!("no seccomp filter for {other}"))),
        })
}

/// The filter of calls the other one cannot judge: `ENOSYS` for a number
/// with the x32 bit, above [`NEWEST_SYSCALL`], or in [`UNREADABLE`].
fn unknown_calls(arch: u32) -> BpfProgram {
    const LOAD: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGT: u16 = 0x25; // BPF_JMP | BPF_JGT | BPF_K (unsigned)
    const JGE: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K (unsigned)
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    let op = |code, k, jt, jf| sock_filter { code, jt, jf, k };
    let mut program = vec![
        op(LOAD, ARCH, 0, 0),
        op(JEQ, arch, 1, 0),
        op(RET, libc::SECCOMP_RET_KILL_PROCESS, 0, 0),
        op(LOAD, NR, 0, 0),
    ];
    // Each test jumps to the `ENOSYS` return at the end when it holds.
    let tests: Vec<(u16, u32)> = [(JGE, X32_SYSCALL_BIT), (JGT, NEWEST_SYSCALL)]
        .into_iter()
        .chain(UNREADABLE.iter().map(|&call| (JEQ, call as u32)))
        .collect();
    let count = tests.len();
    for (i, (code, k)) in tests.into_iter().enumerate() {
        // Past the tests still to come and the `ALLOW`.
        let to_enosys = (count - i) as u8;
        program.push(op(code, k, to_enosys, 0));
    }
    program.push(op(RET, libc::SECCOMP_RET_ALLOW, 0, 0));
    program.push(op(RET, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32, 0, 0));
    program
}

#[cfg(test)]
mod tests;
