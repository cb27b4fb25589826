//! The permissions the host's capabilities are granted by, as tools
//! declare them and profiles allow them: named below every module that
//! decides on them (the capabilities, the sandbox plan, declarative tools,
//! availability).

/// The permission to read granted files.
pub(crate) const FILE_READ: &str = "file:read";

/// The permission to write granted files.
pub(crate) const FILE_WRITE: &str = "file:write";

/// The permission the `http` import needs.
pub(crate) const NETWORK_FETCH: &str = "network:fetch";

/// The permission to receive environment variables.
pub(crate) const ENV_READ: &str = "env:read";
