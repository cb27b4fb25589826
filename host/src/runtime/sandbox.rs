//! The state of one guest instance (a wasmtime `Store`'s data): its WASI
//! context, which inherits nothing from the host, its resource limits, its
//! captured stdio, and the identity used in logs and errors.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};

use super::capture::Capture;
use super::grants::Grants;
use super::memory::MemoryLimiter;
use crate::contract::CapabilityUse;
use crate::policy::{Access, PathRefusal, Profile, paths};

pub use crate::policy::Limits;

/// How much of a guest's stdout and stderr is kept for the log.
const CAPTURE_BYTES: usize = 16 * 1024;

/// How many `log` records one instance may write before the rest are dropped.
const MAX_LOG_RECORDS: u32 = 1000;

/// Who is running: used in log records and error messages.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub(crate) plugin: Arc<str>,
    pub(crate) tool: Option<Arc<str>>,
}

/// The most capability uses remembered per call for the audit line.
const MAX_CAPABILITY_USES: usize = 64;

/// The data of one guest `Store`.
pub struct Sandbox {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdout: Capture,
    pub(crate) stderr: Capture,
    pub(crate) identity: Identity,
    pub(crate) log_records: u32,
    pub(crate) grants: Arc<Grants>,
    pub(crate) files: FileGrants,
    pub(crate) uses: Vec<CapabilityUse>,
    /// Held while this store runs guest code, so the epoch ticks.
    pub(crate) running: Option<super::epoch::Running>,
}

impl Sandbox {
    /// A sandbox with what `grants` allows and nothing else: only the granted
    /// env vars and directories, no sockets, closed stdin, captured
    /// stdout/stderr.
    pub(crate) fn new(identity: Identity, limits: &Limits, grants: Arc<Grants>) -> Self {
        let stdout = Capture::new(CAPTURE_BYTES);
        let stderr = Capture::new(CAPTURE_BYTES);
        let mut wasi = WasiCtx::builder();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        if !grants.env.is_empty() {
            wasi.envs(&grants.env);
        }
        let mut files = FileGrants::default();
        if grants.file_read || grants.file_write {
            files.profile = Some(grants.profile.clone());
            files.write = grants.file_write;
            files.preopens = preopen(&mut wasi, &grants.profile, grants.file_write);
        }
        Self {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(limits.memory),
            stdout,
            stderr,
            identity,
            log_records: 0,
            grants,
            files,
            running: None,
            uses: Vec::new(),
        }
    }

    /// Remembers a capability use (or refusal) for the audit line.
    pub(crate) fn record(&mut self, used: CapabilityUse) {
        if self.uses.len() < MAX_CAPABILITY_USES {
            self.uses.push(used);
        }
    }

    /// Capability uses and refusals of the current call.
    pub(crate) fn capability_uses(&self) -> Vec<CapabilityUse> {
        let mut uses = self.uses.clone();
        uses.extend(self.files.refusals.iter().cloned());
        uses
    }

    pub(crate) fn filesystem_parts(&mut self) -> (WasiFilesystemCtxView<'_>, &mut FileGrants) {
        (
            WasiFilesystemCtxView {
                ctx: self.wasi.filesystem(),
                table: &mut self.table,
            },
            &mut self.files,
        )
    }

    /// Prepares a reused instance for its next call: new tool name, fresh
    /// output capture, counters and limit flags.
    pub(crate) fn begin_call(&mut self, tool: &str) {
        if self.identity.tool.as_deref() != Some(tool) {
            self.identity.tool = Some(tool.into());
        }
        self.stdout.clear();
        self.stderr.clear();
        self.log_records = 0;
        self.limiter.exceeded = None;
        self.uses.clear();
        self.files.refusals.clear();
    }

    /// Writes what the guest printed to the host log.
    pub(crate) fn flush_output(&self) {
        for (stream, capture) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if !capture.is_empty() {
                tracing::debug!(
                    plugin = %self.identity.plugin,
                    tool = self.identity.tool.as_deref().unwrap_or("-"),
                    stream,
                    output = %capture.text(),
                    "guest output"
                );
            }
        }
    }

    pub(crate) fn count_log_record(&mut self) -> bool {
        self.log_records += 1;
        if self.log_records == MAX_LOG_RECORDS + 1 {
            tracing::warn!(
                plugin = %self.identity.plugin,
                "guest wrote more than {MAX_LOG_RECORDS} log records in one call; dropping the rest"
            );
        }
        self.log_records <= MAX_LOG_RECORDS
    }
}

impl WasiView for Sandbox {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Preopens the profile's grants at their own host paths (write grants
/// read-write when the tool may write, everything else read-only), and the
/// workspace once more as `.`, so relative paths resolve in it (wasi-libc
/// starts in `/` and resolves relative paths through a `.` preopen), whether
/// or not the workspace itself is granted: the policy decides each path, and
/// a listing of an ungranted workspace shows only what is granted. Returns
/// the host path of each preopen, in order.
fn preopen(
    wasi: &mut wasmtime_wasi::WasiCtxBuilder,
    profile: &Profile,
    write: bool,
) -> Vec<PathBuf> {
    let mut opened = Vec::new();
    let mut writes_in_workspace = false;
    for (dir, access) in profile.paths.grants() {
        let writable = write && access == Access::Write;
        let guest_path = dir.to_string_lossy();
        if let Err(e) = wasi.preopened_dir(dir, guest_path.as_ref(), perms(writable)) {
            tracing::debug!(dir = %dir.display(), error = %e, "granted directory not preopened");
            continue;
        }
        opened.push(dir.to_path_buf());
        writes_in_workspace |= writable
            && (dir.starts_with(profile.workspace()) || profile.workspace().starts_with(dir));
    }
    // Through `.` the guest reaches every grant under the workspace, so it is
    // writable when one of them is.
    match wasi.preopened_dir(profile.workspace(), ".", perms(writes_in_workspace)) {
        Ok(_) => opened.push(profile.workspace().to_path_buf()),
        Err(e) => tracing::debug!(
            workspace = %profile.workspace().display(),
            error = %e,
            "workspace not preopened as ."
        ),
    }
    opened
}

fn perms(writable: bool) -> FsPerms {
    if writable {
        FsPerms::ReadWrite
    } else {
        FsPerms::ReadOnly
    }
}

/// What the guest may do with files, and the host path behind each of its
/// open directory descriptors and listings.
#[derive(Default)]
pub(crate) struct FileGrants {
    profile: Option<Arc<Profile>>,
    write: bool,
    pub(crate) preopens: Vec<PathBuf>,
    pub(crate) descriptors: HashMap<u32, PathBuf>,
    pub(crate) streams: HashMap<u32, PathBuf>,
    refusals: Vec<CapabilityUse>,
}

impl FileGrants {
    /// Why `path` may not be used for `access`, if it may not.
    pub(crate) fn refusal(&self, path: &std::path::Path, access: Access) -> Option<PathRefusal> {
        let not_granted = || PathRefusal::NotGranted {
            path: path.to_path_buf(),
            access,
        };
        let Some(profile) = &self.profile else {
            return Some(not_granted());
        };
        if access == Access::Write && !self.write {
            return Some(not_granted());
        }
        let refusal = profile.paths.check(path, access).err()?;
        // The workspace is where relative paths start, so it may be read as
        // a directory even when not granted; its listing shows only what may
        // be read (see `is_hidden`).
        let workspace = access == Access::Read
            && matches!(refusal, PathRefusal::NotGranted { .. })
            && paths::normalize(path) == paths::normalize(profile.workspace());
        (!workspace).then_some(refusal)
    }

    /// The profile's path rules, if files are granted at all.
    pub(crate) fn rules(&self) -> Option<&crate::policy::PathRules> {
        self.profile.as_ref().map(|p| &p.paths)
    }

    /// Whether a listing should leave `path` out: it is denied, or not
    /// granted (in the listing of an ungranted workspace).
    pub(crate) fn is_hidden(&self, path: &std::path::Path) -> bool {
        self.profile
            .as_ref()
            .is_some_and(|p| p.paths.check(path, Access::Read).is_err())
    }

    pub(crate) fn record_refusal(
        &mut self,
        operation: &str,
        path: &std::path::Path,
        refusal: &PathRefusal,
    ) {
        self.record_refused(operation, path, &refusal.to_string());
    }

    /// Records a refused file operation and why, for the audit line.
    pub(crate) fn record_refused(&mut self, operation: &str, path: &std::path::Path, reason: &str) {
        if self.refusals.len() < MAX_CAPABILITY_USES {
            self.refusals.push(CapabilityUse::refused(
                "file",
                format!("{operation} {}", path.display()),
                reason,
            ));
        }
    }
}
