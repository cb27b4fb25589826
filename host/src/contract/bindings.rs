//! Rust bindings of the WIT contract (`wit/plugin.wit`), host side.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "stateful-plugin",
    imports: { default: async | trappable },
    exports: { default: async },
});

pub(crate) use self::toolhost::plugin::types::{Manifest, ToolError as GuestToolError};
pub(crate) use exports::toolhost::plugin::lifecycle::GuestIndices as LifecycleIndices;
pub(crate) use exports::toolhost::plugin::tool::GuestIndices as ToolIndices;
