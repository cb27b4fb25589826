//! Rust bindings of the current WIT contract (`wit/plugin.wit`), host side.
//! Older contract series have their own, in `contract::adapter`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "full-plugin",
    imports: { default: async | trappable },
    exports: { default: async },
});

pub(crate) use self::toolhost::plugin::types::{Manifest, ToolError as GuestToolError};
pub(crate) use exports::toolhost::plugin::lifecycle::GuestIndices as LifecycleIndices;
pub(crate) use exports::toolhost::plugin::rich_tool::GuestIndices as RichIndices;
pub(crate) use exports::toolhost::plugin::tool::GuestIndices as ToolIndices;
