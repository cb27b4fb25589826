//! The audit log: one JSON line per call, with who called what, on which
//! plugin version, how long it took, how it ended, and every capability use
//! and refusal. Secrets (header values, environment values) never appear.
//! Each field a caller chooses is cut to a bound, and each tenant may add at
//! most `tenant_caps.audit_per_minute` bytes a minute: past it, its calls
//! are refused (not run unaudited) until the budget refills.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use crate::contract::CapabilityUse;
use crate::contract::content::BlockSummary;

/// One audit line.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord<'a> {
    /// RFC 3339 time the call ended.
    pub time: String,
    /// The tenant, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<&'a str>,
    /// The profile.
    pub profile: &'a str,
    /// The tool called (as requested).
    pub tool: &'a str,
    /// The plugin that ran it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<&'a str>,
    /// SHA-256 of the plugin version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin_hash: Option<String>,
    /// The model's tool_call_id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<&'a str>,
    /// The session id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<&'a str>,
    /// The W3C trace id of the request that made the call, if it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<&'a str>,
    /// The caller's span in that trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<&'a str>,
    /// Wall-clock duration in milliseconds.
    pub duration_ms: f64,
    /// `ok`, or the error kind.
    pub outcome: &'a str,
    /// The error message, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
    /// Capability uses and refusals.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub capabilities: &'a [CapabilityUse],
    /// The type and size of each content block the call returned (never
    /// their content).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub content: &'a [BlockSummary],
}

/// Longest tool name, call id or session id written whole.
pub const MAX_ID: usize = 256;

/// Longest error message written whole.
const MAX_ERROR: usize = 4096;

/// Longest capability target or reason written whole.
const MAX_USE: usize = 1024;

/// Most capability uses written for one call.
const MAX_USES: usize = 128;

/// Where audit lines go.
pub struct AuditLog {
    sink: Mutex<Box<dyn Write + Send>>,
    /// Bytes each tenant (`""`: the local caller) may still write, and when
    /// that was last refilled.
    budgets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditLog")
    }
}

impl AuditLog {
    /// Appends to `path` (created if missing), never through a symbolic
    /// link at its name (one a command put there, were the log in a
    /// writable grant, would have toolhost append where it leads).
    pub fn file(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt as _;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ELOOP) {
                    std::io::Error::other(format!(
                        "{} is a symbolic link, which toolhost does not follow for its audit \
                         log; name the file it leads to, or remove the link",
                        path.display()
                    ))
                } else {
                    e
                }
            })?;
        Ok(Self::writer(file))
    }

    /// Writes to standard error.
    pub fn stderr() -> Self {
        Self::writer(std::io::stderr())
    }

    /// Writes to any writer (tests use a buffer).
    pub fn writer(writer: impl Write + Send + 'static) -> Self {
        Self {
            sink: Mutex::new(Box::new(writer)),
            budgets: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `tenant` may make a call now under `per_minute` bytes of
    /// audit a minute; else why not.
    pub fn admit(&self, tenant: Option<&str>, per_minute: usize) -> Result<(), String> {
        let mut budgets = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
        let capacity = per_minute as f64;
        let now = Instant::now();
        let (left, since) = budgets
            .entry(tenant.unwrap_or_default().to_string())
            .or_insert((capacity, now));
        *left = (*left + now.duration_since(*since).as_secs_f64() * capacity / 60.0).min(capacity);
        *since = now;
        if *left > 0.0 {
            return Ok(());
        }
        let who = tenant.map_or("the local caller".to_string(), |t| format!("tenant {t:?}"));
        Err(format!(
            "{who} wrote its cap of tenant_caps.audit_per_minute = {per_minute} bytes of audit \
             log in the last minute; retry later (or raise the cap)"
        ))
    }

    /// Writes one line, each field a caller chooses cut to its bound, and
    /// charges it to `record.tenant`'s budget. A write failure is logged,
    /// never fatal to the call.
    pub fn record(&self, record: &AuditRecord<'_>) {
        let cut = |text: &str, max: usize| crate::error::bounded(text, max).into_owned();
        let (tool, call_id, session) = (
            cut(record.tool, MAX_ID),
            record.call_id.map(|id| cut(id, MAX_ID)),
            record.session.map(|id| cut(id, MAX_ID)),
        );
        let error = record.error.map(|e| cut(e, MAX_ERROR));
        let uses: Vec<CapabilityUse> = record
            .capabilities
            .iter()
            .take(MAX_USES)
            .map(|used| CapabilityUse {
                capability: used.capability,
                target: cut(&used.target, MAX_USE),
                allowed: used.allowed,
                reason: used.reason.as_deref().map(|r| cut(r, MAX_USE)),
            })
            .collect();
        let bounded = AuditRecord {
            tool: &tool,
            call_id: call_id.as_deref(),
            session: session.as_deref(),
            error: error.as_deref(),
            capabilities: &uses,
            plugin_hash: record.plugin_hash.clone(),
            time: record.time.clone(),
            ..*record
        };
        let mut line = match serde_json::to_vec(&bounded) {
            Ok(line) => line,
            Err(e) => {
                tracing::error!(error = %e, "cannot serialize an audit record");
                return;
            }
        };
        line.push(b'\n');
        if let Some((left, _)) = self
            .budgets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(record.tenant.unwrap_or_default())
        {
            *left -= line.len() as f64;
        }
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = sink.write_all(&line).and_then(|()| sink.flush()) {
            tracing::error!(error = %e, "cannot write the audit log");
        }
    }
}

/// The current time as RFC 3339 UTC with milliseconds.
pub(crate) fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let (y, mo, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}.{:03}Z",
        now.subsec_millis()
    )
}

/// Days since 1970-01-01 to (year, month, day), from Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_chosen_fields_are_cut_and_charged_to_the_tenant() {
        let buffer = std::sync::Arc::new(Mutex::new(Vec::new()));
        struct Shared(std::sync::Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let log = AuditLog::writer(Shared(buffer.clone()));
        let long = "x".repeat(1 << 20);
        let used = vec![CapabilityUse::refused("file", long.clone(), long.as_str()); 1000];
        assert!(log.admit(Some("a"), 64 << 10).is_ok());
        log.record(&AuditRecord {
            time: now_rfc3339(),
            tenant: Some("a"),
            profile: "p",
            tool: &long,
            plugin: None,
            plugin_hash: None,
            call_id: Some(&long),
            session: Some(&long),
            trace_id: None,
            parent_span_id: None,
            duration_ms: 1.0,
            outcome: "denied",
            error: Some(&long),
            capabilities: &used,
            content: &[],
        });
        let written = buffer.lock().unwrap().len();
        assert!(written < 300 << 10, "{written} bytes");
        assert!(written > 4 << 10);
        let refused = log.admit(Some("a"), 64 << 10).unwrap_err();
        assert!(
            refused.contains("tenant_caps.audit_per_minute"),
            "{refused}"
        );
        assert!(log.admit(Some("b"), 64 << 10).is_ok());
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_413), (2025, 11, 21));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
