//! The limits of outbound HTTP a profile sets: time, response size,
//! redirects, and the URL rules of the tool's parameter layer.

use std::time::Duration;

/// Limits of outbound HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkLimits {
    /// Longest a request may take (the guest may ask for less).
    pub timeout: Duration,
    /// Largest response body, in bytes.
    pub max_response: u64,
    /// Most redirects followed.
    pub max_redirects: usize,
    /// The URL rules of the tool's parameter layer: every request it makes,
    /// each redirect hop included, must pass each of them.
    pub url_rules: Vec<crate::policy::canonical::UrlRule>,
}

impl Default for NetworkLimits {
    /// 30 s, 10 MiB, 5 redirects.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            max_response: 10 << 20,
            max_redirects: 5,
            url_rules: Vec::new(),
        }
    }
}
