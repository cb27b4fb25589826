//! Contract 0.1 (`wit/0.1.0/plugin.wit`): its exports through its own
//! bindings, and its imports linked to the current host functions. Its
//! `http`, `terminal` and `log` interfaces have the functions and types of
//! 0.2's (0.2 added functions and an interface), so the same host code
//! serves them under their 0.1.0 names.

use wasmtime::StoreContextMut;
use wasmtime::component::{HasData, Linker};

use crate::contract::bindings::toolhost::plugin::{http, log, terminal, types as current};

wasmtime::component::bindgen!({
    path: "../wit/0.1.0",
    world: "stateful-plugin",
    imports: { default: async | trappable },
    exports: { default: async },
    // The same interfaces in 0.2: the current bindings serve them.
    with: {
        "toolhost:plugin/http@0.1.0": crate::contract::bindings::toolhost::plugin::http,
        "toolhost:plugin/terminal@0.1.0": crate::contract::bindings::toolhost::plugin::terminal,
        "toolhost:plugin/log@0.1.0": crate::contract::bindings::toolhost::plugin::log,
    },
});

use self::toolhost::plugin::types as old;
pub(crate) use self::toolhost::plugin::types::ToolError;
pub(crate) use exports::toolhost::plugin::lifecycle::{
    Guest as LifecycleGuest, GuestIndices as LifecycleIndices,
};
pub(crate) use exports::toolhost::plugin::tool::GuestIndices as ToolIndices;

/// A 0.1 manifest in the current types: no tool has a title or an output
/// schema.
pub(super) fn manifest(manifest: old::Manifest) -> current::Manifest {
    current::Manifest {
        tools: manifest
            .tools
            .into_iter()
            .map(|spec| current::ToolSpec {
                name: spec.name,
                description: spec.description,
                parameters: spec.parameters,
                toolset: spec.toolset,
                permissions: spec.permissions,
                requires_env: spec.requires_env,
                emoji: spec.emoji,
                read_only: spec.read_only,
                destructive: spec.destructive,
                title: None,
                output_schema: None,
            })
            .collect(),
        stateful: manifest.stateful,
    }
}

/// A 0.1 tool error in the current type.
pub(super) fn tool_error(error: ToolError) -> current::ToolError {
    match error {
        ToolError::InvalidArguments(m) => current::ToolError::InvalidArguments(m),
        ToolError::Denied(m) => current::ToolError::Denied(m),
        ToolError::Failed(m) => current::ToolError::Failed(m),
    }
}

/// Links `toolhost:plugin/http@0.1.0` to the host's `http` (`getter` as
/// for the current interface's `add_to_linker`).
pub(crate) fn add_http_to_linker<T, D>(
    linker: &mut Linker<T>,
    getter: fn(&mut T) -> D::Data<'_>,
) -> wasmtime::Result<()>
where
    T: Send + 'static,
    D: HasData,
    for<'a> D::Data<'a>: http::Host + Send,
{
    linker
        .instance("toolhost:plugin/http@0.1.0")?
        .func_wrap_async(
            "fetch",
            move |mut caller: StoreContextMut<'_, T>, (request,): (http::Request,)| {
                Box::new(async move {
                    let host = &mut getter(caller.data_mut());
                    Ok((http::Host::fetch(host, request).await?,))
                })
            },
        )
}

/// Links `toolhost:plugin/terminal@0.1.0` (which has `run` only) to the
/// host's `terminal`.
pub(crate) fn add_terminal_to_linker<T, D>(
    linker: &mut Linker<T>,
    getter: fn(&mut T) -> D::Data<'_>,
) -> wasmtime::Result<()>
where
    T: Send + 'static,
    D: HasData,
    for<'a> D::Data<'a>: terminal::Host + Send,
{
    linker
        .instance("toolhost:plugin/terminal@0.1.0")?
        .func_wrap_async(
            "run",
            move |mut caller: StoreContextMut<'_, T>, (command,): (terminal::Command,)| {
                Box::new(async move {
                    let host = &mut getter(caller.data_mut());
                    Ok((terminal::Host::run(host, command).await?,))
                })
            },
        )
}

/// Links `toolhost:plugin/log@0.1.0` to the host's `log`.
pub(crate) fn add_log_to_linker<T, D>(
    linker: &mut Linker<T>,
    getter: fn(&mut T) -> D::Data<'_>,
) -> wasmtime::Result<()>
where
    T: Send + 'static,
    D: HasData,
    for<'a> D::Data<'a>: log::Host + Send,
{
    linker
        .instance("toolhost:plugin/log@0.1.0")?
        .func_wrap_async(
            "log",
            move |mut caller: StoreContextMut<'_, T>, (level, message): (log::Level, String)| {
                Box::new(async move {
                    let host = &mut getter(caller.data_mut());
                    log::Host::log(host, level, message).await?;
                    Ok(())
                })
            },
        )
}
