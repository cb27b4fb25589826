//! The container of a session as the engine is asked for it: the mounts
//! of the plan (`nosuid,nodev` where the engine can say so), the limits,
//! an unprivileged user (never root, also when toolhost is), no
//! capabilities, `no-new-privileges`, and on Podman its default seccomp
//! profile with set-user-ID and set-group-ID modes refused. Its first
//! process waits on [`LIFELINE`], which ends when this process does: a
//! toolhost that is killed (SIGKILL leaves it no last step) leaves no
//! container running its commands unguarded.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, HostConfig, Mount as Bind, MountBindOptions,
    MountBindOptionsPropagationEnum, MountType, ResourcesUlimits,
};

use crate::capability::Profile;
use crate::capability::terminal::confine::{Mount, MountKind};
use crate::capability::terminal::{ContainerSettings, TerminalNetwork};

/// The least `RLIMIT_NPROC` of a container's processes.
const NPROC_FLOOR: u64 = 4096;

/// Most open files of each process, as in the kernel sandbox.
const OPEN_FILES: u64 = 1024;

/// Where Podman keeps its default seccomp profile.
const PODMAN_SECCOMP: &str = "/usr/share/containers/seccomp.json";

/// System calls that set a file's mode, by name, with the index of the
/// mode argument, as in the kernel sandbox's filter.
const MODE_ARGUMENTS: &[(&str, u32)] = &[
    ("open", 2),
    ("creat", 1),
    ("chmod", 1),
    ("mknod", 1),
    ("mkdir", 1),
    ("openat", 3),
    ("fchmod", 1),
    ("fchmodat", 2),
    ("fchmodat2", 2),
    ("mknodat", 2),
    ("mkdirat", 2),
];

/// System calls whose mode a filter cannot read: no longer allowed, they
/// get the profile's default answer (Podman's is `ENOSYS`, and the C
/// library falls back to `openat`).
const UNREADABLE: &[&str] = &["openat2"];

/// Calls the kernel sandbox refuses that the engine's default allows: a
/// new namespace (of users, mounts) from inside the container.
const NAMESPACES: &[&str] = &["unshare", "setns"];

/// Where a container sees its lifeline: a FIFO of this machine that only a
/// process of toolhost's holds open for writing (and writes nothing to),
/// while toolhost runs and is not stopped. The container's first process
/// reads it, so it ends, and the container with every command in it, when
/// toolhost ends or stops. Mounted read-only, and no other user may write
/// it: nothing in the container can keep it open.
pub(super) const LIFELINE: &str = "/.toolhost-lifeline";

/// What the engine can be asked for.
pub(super) struct Engine {
    /// Podman: bind mounts take `nosuid,nodev`, and a seccomp profile is
    /// named by its path.
    podman: bool,
}

impl Engine {
    /// The engine behind `docker`, as its version names it.
    pub(super) async fn of(docker: &Docker) -> Self {
        let podman = docker.version().await.is_ok_and(|version| {
            version
                .components
                .unwrap_or_default()
                .iter()
                .any(|c| c.name.contains("Podman"))
        });
        Self { podman }
    }
}

/// The container of a session: the mounts, limits and confinement the
/// module's documentation lists.
pub(super) fn container_body(
    profile: &Profile,
    settings: &ContainerSettings,
    mounts: &[Mount],
    engine: &Engine,
    labels: HashMap<String, String>,
    user: &str,
) -> Result<ContainerCreateBody, String> {
    let terminal = &profile.terminal;
    let masks = masks()?;
    let lifeline_source = hold_lifeline(&masks)?;
    let mut binds = Vec::new();
    let mut specs = Vec::new();
    let lifeline = Mount {
        path: PathBuf::from(LIFELINE),
        kind: MountKind::ReadOnly,
        found: None,
    };
    for mount in mounts.iter().chain([&lifeline]) {
        // The engine's API names paths as UTF-8 text: a lossy spelling
        // would mount (or mask) some other path.
        if mount.path.to_str().is_none() {
            return Err(format!(
                "{} is not UTF-8, which a container engine cannot mount; rename it or take it \
                 out of the grants",
                std::os::unix::ffi::OsStrExt::as_bytes(mount.path.as_os_str()).escape_ascii()
            ));
        }
        let (source, read_only) = match mount.kind {
            _ if std::ptr::eq(mount, &lifeline) => (lifeline_source.clone(), true),
            MountKind::ReadWrite => (mount.path.clone(), false),
            MountKind::MaskFile => (masks.join("file"), true),
            MountKind::MaskDir => (masks.join("dir"), true),
            _ => (mount.path.clone(), true),
        };
        if engine.podman {
            // `src:dst:options`, which no path of the plan may confuse.
            let (source, target) = (source.to_string_lossy(), mount.path.to_string_lossy());
            if source.contains(':') || target.contains(':') {
                return Err(format!(
                    "{target:?} holds a ':', which a Podman bind mount cannot name; grant a \
                     directory without one"
                ));
            }
            let mode = if read_only { "ro" } else { "rw" };
            specs.push(format!("{source}:{target}:{mode},nosuid,nodev,rprivate"));
            continue;
        }
        binds.push(Bind {
            target: Some(mount.path.to_string_lossy().into_owned()),
            source: Some(source.to_string_lossy().into_owned()),
            typ: Some(MountType::BIND),
            read_only: Some(read_only),
            bind_options: Some(MountBindOptions {
                propagation: Some(MountBindOptionsPropagationEnum::RPRIVATE),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    // Each lowered to this process's hard limit where that is lower (a
    // runtime may not raise one past what it has).
    let limit = |name: &str, resource, value: u64| {
        let value = value.min(crate::capability::terminal::confine::hard_limit(resource));
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        ResourcesUlimits {
            name: Some(name.into()),
            soft: Some(value),
            hard: Some(value),
        }
    };
    let memory = i64::try_from(terminal.memory).unwrap_or(i64::MAX);
    let mut security = vec!["no-new-privileges".to_string()];
    if engine.podman
        && let Some(profile) = seccomp_profile()?
    {
        security.push(format!("seccomp={}", profile.display()));
    }
    Ok(ContainerCreateBody {
        image: Some(settings.image.clone()),
        entrypoint: Some(vec!["bash".into()]),
        cmd: Some(vec![
            "-c".into(),
            // Opening the lifeline waits for its holder: a container made
            // as toolhost ended (no holder left) ends after 10 s.
            format!(
                "trap 'exit 0' TERM; (sleep 10; kill -KILL $$) & exec 3< {LIFELINE}; \
                 kill $! 2>/dev/null; while read -r _ <&3; do :; done"
            ),
        ]),
        user: Some(keeper(user)),
        working_dir: Some("/".into()),
        env: Some(vec![format!(
            "PATH={}",
            crate::capability::terminal::terminals::script::DEFAULT_PATH
        )]),
        labels: Some(labels),
        // Nothing in it is owed a graceful end: removal kills at once.
        stop_signal: Some("SIGKILL".into()),
        stop_timeout: Some(1),
        network_disabled: Some(terminal.network != TerminalNetwork::Host),
        host_config: Some(HostConfig {
            mounts: Some(binds),
            binds: (!specs.is_empty()).then_some(specs),
            network_mode: Some(
                if terminal.network == TerminalNetwork::Host {
                    "host"
                } else {
                    "none"
                }
                .into(),
            ),
            readonly_rootfs: Some(true),
            tmpfs: Some(HashMap::from([(
                "/tmp".to_string(),
                format!("rw,nosuid,nodev,mode=1777,size={}", terminal.tmp_size),
            )])),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(security),
            init: Some(true),
            pids_limit: Some(i64::try_from(terminal.max_processes).unwrap_or(i64::MAX)),
            // The container's processes together weigh as one thread.
            cpu_shares: Some(crate::capability::terminal::confine::cpu::SHARES as i64),
            memory: Some(memory),
            memory_swap: Some(memory),
            ulimits: Some(vec![
                limit("nofile", libc::RLIMIT_NOFILE, OPEN_FILES),
                limit("fsize", libc::RLIMIT_FSIZE, terminal.max_file_size),
                // RLIMIT_NPROC counts every process of the uid on the host,
                // so it is not the container's limit (its pids limit is);
                // it is set, generously but below what engines run with,
                // so that the runtime does not try a default (Podman's is
                // its own maximum) that its hard limit refuses.
                limit(
                    "nproc",
                    libc::RLIMIT_NPROC,
                    terminal.max_processes.max(NPROC_FLOOR),
                ),
            ]),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// Who the commands of a container under `profile` run as: the configured
/// user, or (as root) the caller's id of `sandbox_ids`, so that a command
/// never makes root's files; otherwise toolhost's own ids.
pub(super) fn command_user(profile: &Profile, settings: &ContainerSettings) -> String {
    settings.user.clone().unwrap_or_else(|| {
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) =
            match crate::capability::terminal::confine::host_id(profile.terminal.sandbox_id) {
                Some(id) => (id, id),
                None => unsafe { (libc::getuid(), libc::getgid()) },
            };
        format!("{uid}:{gid}")
    })
}

/// Who a container's first process (the init and the lifeline's reader)
/// runs as: an id none of its commands runs as (`user`'s), so that no
/// command can stop it (SIGSTOP would keep the container alive after
/// toolhost ends) nor trace it.
pub(super) fn keeper(user: &str) -> String {
    // Compared as numbers: `065534` is uid 65534 to the engine.
    const NOBODY: u32 = 65534;
    let uid = user.split(':').next().and_then(|id| id.parse::<u32>().ok());
    let id = if uid == Some(NOBODY) {
        NOBODY - 1
    } else {
        NOBODY
    };
    format!("{id}:{id}")
}

/// A directory of this machine holding the empty, unreadable file and
/// directory that masks are bind-mounted from, and the seccomp profile:
/// made new by this process (never one found in the shared temporary
/// directory, which another user could have planted), mode 0700.
fn masks() -> Result<PathBuf, String> {
    static MASKS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    MASKS
        .get_or_init(|| {
            use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
            sweep_stale_masks(&std::env::temp_dir());
            let dir = std::env::temp_dir().join(format!(
                "{MASKS_PREFIX}{}-{:x}",
                std::process::id(),
                crate::capability::terminal::terminals::script::nonce()
            ));
            let made = (|| {
                std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
                std::fs::DirBuilder::new()
                    .mode(0o000)
                    .create(dir.join("dir"))?;
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o000)
                    .open(dir.join("file"))?;
                io::Result::Ok(())
            })();
            made.map(|()| dir.clone())
                .map_err(|e| format!("making the masks in {}: {e}", dir.display()))
        })
        .clone()
}

/// Sees that a process holds a lifeline FIFO in `dir` open for writing:
/// one this process started (`LIFELINE_ARG`), which lets go when this
/// process ends or is stopped; the FIFO's path. Started again, on a new
/// FIFO, if it ended (this process was stopped and resumed, which ended
/// the containers made before). Once held, the FIFO's mode is 0444: no one
/// may open it for writing again (its owner neither: a container's command
/// may run as toolhost's own uid, and a read-only mount does not keep a
/// FIFO from being opened for writing).
fn hold_lifeline(dir: &Path) -> Result<PathBuf, String> {
    use std::io::Read;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    static HOLDER: std::sync::Mutex<Option<(std::process::Child, PathBuf)>> =
        std::sync::Mutex::new(None);
    let mut holder = HOLDER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((child, path)) = holder.as_mut()
        && matches!(child.try_wait(), Ok(None))
    {
        return Ok(path.clone());
    }
    let fail = |e: &dyn std::fmt::Display| format!("holding the containers' lifeline: {e}");
    let path = dir.join(format!(
        "lifeline-{:x}",
        crate::capability::terminal::terminals::script::nonce()
    ));
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|e| fail(&e))?;
    // SAFETY: makes a FIFO at a path of this process's own directory.
    if unsafe { libc::mkfifo(name.as_ptr(), 0o600) } < 0 {
        return Err(fail(&io::Error::last_os_error()));
    }
    let launcher = crate::capability::terminal::confine::launcher().map_err(|e| fail(&e))?;
    let mut child = std::process::Command::new(launcher)
        .arg(crate::capability::terminal::confine::LIFELINE_ARG)
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| fail(&e))?;
    let mut byte = [0u8; 1];
    let held = child
        .stdout
        .take()
        .map(|mut out| out.read(&mut byte))
        .transpose()
        .map_err(|e| fail(&e))?;
    let sealed = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444));
    if held != Some(1) || sealed.is_err() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(fail(&"its holder could not open it"));
    }
    *holder = Some((child, path.clone()));
    Ok(path)
}

/// What the masks' directories are named with, before the pid of the
/// process that made them.
const MASKS_PREFIX: &str = "toolhost-masks-";

/// Removes the masks' directories in `tmp` of processes that have ended
/// (each process makes one and cannot remove it when it exits): only
/// directories (not links) owned by this process's user.
fn sweep_stale_masks(tmp: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(MASKS_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest
            .split('-')
            .next()
            .and_then(|p| p.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        let ours = entry
            .path()
            .symlink_metadata()
            .is_ok_and(|meta| meta.is_dir() && meta.uid() == me);
        if gone && ours {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Podman's default seccomp profile with set-id modes refused, written
/// once next to the masks; `None` where Podman keeps no profile to start
/// from (then its built-in one applies, and set-id modes pass).
fn seccomp_profile() -> Result<Option<PathBuf>, String> {
    static PROFILE: OnceLock<Result<Option<PathBuf>, String>> = OnceLock::new();
    PROFILE
        .get_or_init(|| {
            let Ok(text) = std::fs::read_to_string(PODMAN_SECCOMP) else {
                return Ok(None);
            };
            let profile = refusing_set_id(&text)
                .map_err(|e| format!("reading Podman's seccomp profile {PODMAN_SECCOMP}: {e}"))?;
            let path = masks()?.join("seccomp.json");
            std::fs::write(&path, profile.to_string())
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            Ok(Some(path))
        })
        .clone()
}

/// `profile` (OCI seccomp JSON) with each call of [`MODE_ARGUMENTS`]
/// allowed only for a mode without the set-id bits and refused with
/// `EPERM` otherwise, and [`UNREADABLE`] and [`NAMESPACES`] calls not allowed. A call that the
/// profile allows with no condition loses that rule (a condition beside it
/// would not count).
fn refusing_set_id(profile: &str) -> Result<serde_json::Value, String> {
    use serde_json::{Value, json};
    let mut profile: Value = serde_json::from_str(profile).map_err(|e| e.to_string())?;
    let calls = profile["syscalls"]
        .as_array_mut()
        .ok_or("it has no \"syscalls\" list")?;
    let ours = |name: &Value| {
        MODE_ARGUMENTS.iter().any(|(call, _)| name == *call)
            || UNREADABLE
                .iter()
                .chain(NAMESPACES)
                .any(|call| name == *call)
    };
    for rule in calls.iter_mut() {
        let unconditional = rule["args"].as_array().is_none_or(Vec::is_empty)
            && rule["includes"].as_object().is_none_or(|i| i.is_empty())
            && rule["excludes"].as_object().is_none_or(|e| e.is_empty());
        if rule["action"] == "SCMP_ACT_ALLOW"
            && unconditional
            && let Some(names) = rule["names"].as_array_mut()
        {
            names.retain(|name| !ours(name));
        }
    }
    let set_id = u64::from(libc::S_ISUID | libc::S_ISGID);
    for &(name, index) in MODE_ARGUMENTS {
        calls.push(json!({
            "names": [name], "action": "SCMP_ACT_ALLOW",
            "args": [{ "index": index, "value": set_id, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ" }],
        }));
        for bit in [libc::S_ISUID, libc::S_ISGID] {
            calls.push(json!({
                "names": [name], "action": "SCMP_ACT_ERRNO", "errnoRet": libc::EPERM,
                "args": [{ "index": index, "value": bit, "valueTwo": bit, "op": "SCMP_CMP_MASKED_EQ" }],
            }));
        }
    }
    Ok(profile)
}

#[cfg(test)]
mod sweep_tests {
    use super::*;

    #[test]
    fn the_masks_of_ended_processes_are_swept_and_no_others() {
        let tmp = tempfile::tempdir().unwrap();
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        let ended_pid = ended.id();
        ended.wait().unwrap();
        let stale = tmp.path().join(format!("{MASKS_PREFIX}{ended_pid}-ab"));
        let live = tmp
            .path()
            .join(format!("{MASKS_PREFIX}{}-cd", std::process::id()));
        for dir in [&stale, &live] {
            std::fs::create_dir_all(dir.join("dir")).unwrap();
            std::fs::write(dir.join("file"), "").unwrap();
        }
        let other = tmp.path().join("unrelated-1-ab");
        std::fs::create_dir(&other).unwrap();
        let link = tmp.path().join(format!("{MASKS_PREFIX}{ended_pid}-ef"));
        std::os::unix::fs::symlink(&other, &link).unwrap();
        sweep_stale_masks(tmp.path());
        assert!(!stale.exists());
        assert!(live.exists() && other.exists());
        assert!(link.symlink_metadata().is_ok(), "a link is left alone");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keeper_never_runs_as_the_commands_uid_however_it_is_spelled() {
        for user in ["65534", "65534:100", "065534:065534", "0065534"] {
            assert_eq!(keeper(user), "65533:65533", "{user}");
        }
        for user in ["1000:1000", "65533", "2001"] {
            assert_eq!(keeper(user), "65534:65534", "{user}");
        }
    }

    #[test]
    fn the_seccomp_profile_allows_modes_only_without_set_id_bits() {
        let base = r#"{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [
            {"names": ["read", "chmod", "openat", "openat2"], "action": "SCMP_ACT_ALLOW", "args": []},
            {"names": ["fchmod"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_X"]}}
        ]}"#;
        let profile = refusing_set_id(base).unwrap();
        let calls = profile["syscalls"].as_array().unwrap();
        assert_eq!(calls[0]["names"], serde_json::json!(["read"]));
        // Conditional rules are left as they are.
        assert_eq!(calls[1]["names"], serde_json::json!(["fchmod"]));
        let chmod: Vec<_> = calls.iter().filter(|c| c["names"][0] == "chmod").collect();
        assert_eq!(chmod.len(), 3);
        assert_eq!(chmod[0]["args"][0]["value"], 0o6000);
        assert_eq!(chmod[0]["args"][0]["valueTwo"], 0);
        assert_eq!(chmod[1]["errnoRet"], libc::EPERM);
        assert!(refusing_set_id("{}").is_err());
    }
}
