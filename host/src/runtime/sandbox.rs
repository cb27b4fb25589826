//! The state of one guest instance (a wasmtime `Store`'s data): its WASI
//! context, which inherits nothing from the host, its resource limits, its
//! captured stdio, and the identity used in logs and errors.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::capture::Capture;

/// Resource limits of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest linear memory of the instance, in bytes.
    pub memory: usize,
    /// Wall-clock time limit of one call.
    pub timeout: Duration,
    /// Largest result, in bytes.
    pub max_output: usize,
    /// Largest arguments, in bytes.
    pub max_arguments: usize,
}

impl Default for Limits {
    /// 64 MiB of memory, 30 s, 1 MiB of output, 1 MiB of arguments.
    fn default() -> Self {
        Self {
            memory: 64 << 20,
            timeout: Duration::from_secs(30),
            max_output: 1 << 20,
            max_arguments: 1 << 20,
        }
    }
}

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

/// The data of one guest `Store`.
pub struct Sandbox {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdout: Capture,
    pub(crate) stderr: Capture,
    pub(crate) identity: Identity,
    pub(crate) log_records: u32,
}

impl Sandbox {
    /// A sandbox that grants nothing: no env, no files, no network, closed
    /// stdin, captured stdout/stderr.
    pub(crate) fn new(identity: Identity, limits: &Limits) -> Self {
        let stdout = Capture::new(CAPTURE_BYTES);
        let stderr = Capture::new(CAPTURE_BYTES);
        let mut wasi = WasiCtx::builder();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        Self {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(limits.memory),
            stdout,
            stderr,
            identity,
            log_records: 0,
        }
    }

    /// Prepares a reused instance for its next call: new tool name, fresh
    /// output capture, counters and limit flags.
    pub(crate) fn begin_call(&mut self, tool: Arc<str>) {
        self.identity.tool = Some(tool);
        self.stdout.clear();
        self.stderr.clear();
        self.log_records = 0;
        self.limiter.exceeded = None;
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

/// Caps linear memory and table growth, remembering whether the cap was hit
/// so that the resulting trap can be reported as a memory error.
#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    limit: usize,
    pub(crate) exceeded: Option<usize>,
}

impl MemoryLimiter {
    fn new(limit: usize) -> Self {
        Self {
            limit: limit.min(super::engine::MAX_MEMORY),
            exceeded: None,
        }
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.exceeded = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}
