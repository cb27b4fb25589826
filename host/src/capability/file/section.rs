//! The file capability's name and permissions: what a tool declares and a
//! profile allows to reach the profile's granted directories. No wasmtime
//! here; its imports are in `imports`.

use crate::contract::Permission;

/// The permission to read granted files.
pub(crate) const FILE_READ: Permission = Permission::new("file:read");

/// The permission to write granted files.
pub(crate) const FILE_WRITE: Permission = Permission::new("file:write");

/// Files: the profile's granted directories through `wasi:filesystem`.
pub(crate) struct FileAccess;
