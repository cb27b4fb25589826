//! Resource limits of the sandbox's processes.

use super::spec::Spec;
use super::sys::check;

/// Sets the command's limits of `spec` on this process, each lowered to
/// the host's hard limit where that is lower.
pub(super) fn set_limits(spec: &Spec) -> Result<(), String> {
    let limits = &spec.limits;
    for (resource, value, name) in [
        (libc::RLIMIT_NPROC, limits.processes, "processes"),
        (libc::RLIMIT_AS, limits.memory, "memory"),
        (libc::RLIMIT_FSIZE, limits.file_size, "file size"),
        (libc::RLIMIT_NOFILE, limits.open_files, "open files"),
        (libc::RLIMIT_CORE, 0, "core files"),
    ] {
        // Lowering is always allowed, raising past the host's hard limit
        // never: where the host gives less than the profile, the host's
        // limit is the one that holds.
        let value = value.min(hard_limit(resource));
        let limit = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: sets a limit of this process.
        check(
            unsafe { libc::setrlimit(resource, &limit) },
            format!("limiting {name}"),
        )?;
    }
    Ok(())
}

/// This process's limit of `resource` (unlimited when unknown).
fn limit(resource: libc::__rlimit_resource_t) -> libc::rlimit {
    let mut limit = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: reads a limit of this process into `limit`.
    unsafe { libc::getrlimit(resource, &mut limit) };
    limit
}

/// This process's hard limit of `resource`.
pub(crate) fn hard_limit(resource: libc::__rlimit_resource_t) -> u64 {
    limit(resource).rlim_max
}

/// Raises this process's soft limit of `resource` to `wanted`, or to the
/// hard limit when that is lower; never lowers it.
pub(super) fn raise_soft_limit(resource: libc::__rlimit_resource_t, wanted: u64) {
    let mut now = limit(resource);
    if now.rlim_cur < wanted {
        now.rlim_cur = wanted.min(now.rlim_max);
        // SAFETY: sets a limit of this process within its hard limit.
        unsafe { libc::setrlimit(resource, &now) };
    }
}
