//! What a call did with its capabilities, as the audit line records it.

use serde::Serialize;

/// One use or refusal of a capability, for the audit line. Never holds
/// secrets: no header or environment values, no request bodies, no query
/// strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CapabilityUse {
    /// `file`, `http`, `terminal`, `env`.
    pub capability: &'static str,
    /// What was used: `open /w/a.txt`, `GET https://host/path`, a command line.
    pub target: String,
    /// Whether it was allowed.
    pub allowed: bool,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl CapabilityUse {
    /// An allowed use.
    pub fn allowed(capability: &'static str, target: impl Into<String>) -> Self {
        Self {
            capability,
            target: target.into(),
            allowed: true,
            reason: None,
        }
    }

    /// A refusal, with why.
    pub fn refused(
        capability: &'static str,
        target: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            capability,
            target: target.into(),
            allowed: false,
            reason: Some(reason.into()),
        }
    }
}
