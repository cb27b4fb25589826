//! The env capability's name and permission: what a tool declares and a
//! profile allows to receive host environment variables. No wasmtime here;
//! its imports are in `imports`.

use crate::contract::Permission;

/// The permission to receive environment variables.
pub(crate) const ENV_READ: Permission = Permission::new("env:read");

/// Environment variables, set in the guest's WASI environment.
pub(crate) struct Environment;
