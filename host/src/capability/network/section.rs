//! The network capability's name and permission: what a tool declares and a
//! profile allows to make outbound requests. No wasmtime here; its imports
//! (the WIT interface `http`) are in `imports`.

use crate::contract::Permission;

/// The permission the `http` import needs.
pub(crate) const NETWORK_FETCH: Permission = Permission::new("network:fetch");

/// Outbound HTTP requests to the profile's allowed hosts (the WIT interface
/// `http`, `"http"` in audit records).
pub(crate) struct Network;
