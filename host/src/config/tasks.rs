//! `[tasks]`: when a call of a client that declared MCP's Tasks extension
//! (or a `/v1` call with `"async": true`) runs as a task, how long a task is
//! kept and polled, and how many one tenant may hold; `[mcp]`: `tools_ttl`.

use std::time::Duration;

use serde::Deserialize;

use crate::policy::Span;

/// `[tasks]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksConfig {
    /// A call still running after this long becomes a task (`"0s"`: every
    /// call of a client that declared tasks).
    #[serde(default)]
    pub after: Option<Span>,
    /// How long a task is kept from when it was made.
    #[serde(default)]
    pub ttl: Option<Span>,
    /// How long a finished task's result is kept (at most `ttl`).
    #[serde(default)]
    pub keep: Option<Span>,
    /// The poll interval suggested to clients.
    #[serde(default)]
    pub poll: Option<Span>,
    /// Most tasks one tenant may hold, running or finished and kept.
    #[serde(default)]
    pub max_per_tenant: Option<usize>,
}

/// `[mcp]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// `ttlMs` of `tools/list` results to 2026-07-28 clients.
    #[serde(default)]
    pub tools_ttl: Option<Span>,
}

/// `[tasks]`, validated, with the defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSettings {
    /// A call still running after this long becomes a task (default 2s).
    pub after: Duration,
    /// How long a task is kept from when it was made (default 1h).
    pub ttl: Duration,
    /// How long a finished task's result is kept (default 10m).
    pub keep: Duration,
    /// The poll interval suggested to clients (default 1s).
    pub poll: Duration,
    /// Most tasks one tenant may hold (default 32).
    pub max_per_tenant: usize,
}

impl Default for TaskSettings {
    fn default() -> Self {
        Self {
            after: Duration::from_secs(2),
            ttl: Duration::from_secs(3600),
            keep: Duration::from_secs(600),
            poll: Duration::from_secs(1),
            max_per_tenant: 32,
        }
    }
}

/// The longest `ttl`: a task id's expiry is kept in 32 bits of seconds.
const MAX_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The settings of `[tasks]`; problems go to `problems`.
pub(super) fn settings(
    written: &TasksConfig,
    problems: &mut Vec<(String, String)>,
) -> TaskSettings {
    let defaults = TaskSettings::default();
    let mut at_least =
        |key: &str, value: Option<Span>, default: Duration, min: Duration| match value {
            Some(Span(value)) if value < min => {
                problems.push((
                    format!("tasks.{key}"),
                    format!(
                        "must be at least {}; leave it out for the default",
                        crate::policy::show_duration(min)
                    ),
                ));
                default
            }
            Some(Span(value)) => value,
            None => default,
        };
    let after = at_least("after", written.after, defaults.after, Duration::ZERO);
    let ttl = at_least("ttl", written.ttl, defaults.ttl, Duration::from_secs(1));
    let keep = at_least("keep", written.keep, defaults.keep, Duration::from_secs(1));
    let poll = at_least(
        "poll",
        written.poll,
        defaults.poll,
        Duration::from_millis(1),
    );
    if ttl > MAX_TTL {
        problems.push((
            "tasks.ttl".into(),
            "must be at most 87600h (ten years): a task id's expiry is kept in 32 bits".into(),
        ));
    }
    let max_per_tenant = match written.max_per_tenant {
        Some(0) => {
            problems.push((
                "tasks.max_per_tenant".into(),
                "must be at least 1; leave it out for the default".into(),
            ));
            defaults.max_per_tenant
        }
        Some(n) => n,
        None => defaults.max_per_tenant,
    };
    TaskSettings {
        after,
        ttl: ttl.min(MAX_TTL),
        keep: keep.min(ttl),
        poll,
        max_per_tenant,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_caps_and_ttls_are_problems_and_keep_is_at_most_ttl() {
        let mut problems = Vec::new();
        let written = TasksConfig {
            ttl: Some(Span(Duration::from_secs(60))),
            keep: Some(Span(Duration::from_secs(600))),
            ..TasksConfig::default()
        };
        let settings = settings(&written, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(settings.keep, Duration::from_secs(60));
        let written = TasksConfig {
            ttl: Some(Span(Duration::ZERO)),
            max_per_tenant: Some(0),
            ..TasksConfig::default()
        };
        let _ = super::settings(&written, &mut problems);
        let keys: Vec<&str> = problems.iter().map(|(key, _)| key.as_str()).collect();
        assert_eq!(keys, ["tasks.ttl", "tasks.max_per_tenant"]);
    }
}
