//! The resource limits of one call, and the largest memory any guest may
//! have whatever its profile says.

use std::time::Duration;

/// Largest linear memory any guest may have, whatever its profile says.
pub const MAX_MEMORY: usize = 4 << 30;

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
    /// Most calls running at once under the profile.
    pub concurrency: usize,
}

impl Default for Limits {
    /// 64 MiB of memory, 30 s, 1 MiB of output, 1 MiB of arguments, 16 calls at once.
    fn default() -> Self {
        Self {
            memory: 64 << 20,
            timeout: Duration::from_secs(30),
            max_output: 1 << 20,
            max_arguments: 1 << 20,
            concurrency: 16,
        }
    }
}
