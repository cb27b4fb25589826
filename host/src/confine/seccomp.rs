//! The seccomp filter of sandboxed commands: system calls that could undo
//! or get around the sandbox (new namespaces, mounts, tracing other
//! processes, kernel keyrings, BPF, io_uring, module loading) fail with
//! `EPERM`; `clone3`, whose flags a filter cannot read, fails with `ENOSYS`
//! so that the C library falls back to `clone`, whose flags it can.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

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
    libc::SYS_syslog,
    libc::SYS_vhangup,
    libc::SYS_pidfd_getfd,
    libc::SYS_landlock_create_ruleset,
];

/// `clone` flags that would make new namespaces.
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

/// `ioctl` requests that type into the terminal of another process.
const REFUSED_IOCTLS: &[libc::Ioctl] = &[libc::TIOCSTI, libc::TIOCLINUX];

fn error(e: impl std::fmt::Display) -> String {
    format!("building the seccomp filter: {e}")
}

/// The filters, compiled for this machine's architecture: the first refuses
/// with `EPERM`, the second answers `clone3` with `ENOSYS`.
pub(crate) fn filters() -> Result<[BpfProgram; 2], String> {
    let arch: seccompiler::TargetArch = std::env::consts::ARCH.try_into().map_err(error)?;
    let condition = |index, op, value| {
        SeccompCondition::new(index, SeccompCmpArgLen::Qword, op, value)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(error)
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    rules.insert(
        libc::SYS_clone,
        NAMESPACE_FLAGS
            .iter()
            .map(|&flag| {
                let flag = flag as u64;
                condition(0, SeccompCmpOp::MaskedEq(flag), flag)
            })
            .collect::<Result<_, _>>()?,
    );
    // `Ioctl` is `c_int` on musl, `c_ulong` on glibc.
    #[allow(clippy::unnecessary_cast)]
    rules.insert(
        libc::SYS_ioctl,
        REFUSED_IOCTLS
            .iter()
            .map(|&request| condition(1, SeccompCmpOp::Eq, request as u64))
            .collect::<Result<_, _>>()?,
    );
    let compile = |rules, errno: i32| -> Result<BpfProgram, String> {
        SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )
        .and_then(BpfProgram::try_from)
        .map_err(error)
    };
    Ok([
        compile(rules, libc::EPERM)?,
        compile(
            BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
            libc::ENOSYS,
        )?,
    ])
}
