//! The terminal capability's name and permission: what a tool declares and
//! a profile allows to run command lines. No wasmtime here; its imports are
//! in `imports`.

use crate::contract::Permission;

/// The permission a tool must declare to run commands.
pub(crate) const TERMINAL_EXECUTE: Permission = Permission::new("terminal:execute");

/// Command lines, run in the kernel sandbox built from the profile.
pub(crate) struct Terminal;
