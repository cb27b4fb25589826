//! The audit log: one JSON line per call, with who called what, on which
//! plugin version, how long it took, how it ended, and every capability use
//! and refusal. Secrets (header values, environment values) never appear.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;

use crate::contract::content::BlockSummary;
use crate::runtime::CapabilityUse;

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

/// Where audit lines go.
pub struct AuditLog {
    sink: Mutex<Box<dyn Write + Send>>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditLog")
    }
}

impl AuditLog {
    /// Appends to `path` (created if missing).
    pub fn file(path: &Path) -> std::io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
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
        }
    }

    /// Writes one line. A write failure is logged, never fatal to the call.
    pub fn record(&self, record: &AuditRecord<'_>) {
        let mut line = match serde_json::to_vec(record) {
            Ok(line) => line,
            Err(e) => {
                tracing::error!(error = %e, "cannot serialize an audit record");
                return;
            }
        };
        line.push(b'\n');
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
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_413), (2025, 11, 21));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
