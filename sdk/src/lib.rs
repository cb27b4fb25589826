//! Write [toolhost](https://github.com/toolhost/toolhost) tool plugins in Rust.
//!
//! A tool is an ordinary function over an argument struct that derives
//! [`Deserialize`](serde::Deserialize) and [`JsonSchema`]. Its doc comment is
//! the description models read; the argument type becomes the JSON Schema of
//! its parameters; [`export_plugin!`] turns a list of tools into a plugin.
//!
//! ```ignore
//! use toolhost_sdk::prelude::*;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct EchoArgs {
//!     /// The text to echo.
//!     text: String,
//!     /// Upper-case the text first.
//!     #[serde(default)]
//!     upper: bool,
//! }
//!
//! /// Echo the text back, optionally upper-cased.
//! #[tool(toolset = "demo", read_only)]
//! fn echo(args: EchoArgs) -> Result<Value, ToolError> {
//!     let text = if args.upper { args.text.to_uppercase() } else { args.text };
//!     Ok(json!({ "text": text }))
//! }
//!
//! export_plugin!(echo);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` (the crate is a
//! `cdylib`) and check it with `toolhost check target/wasm32-wasip2/release/<name>.wasm`.
//!
//! A plugin whose tools need nothing of WASI (no files, environment
//! variables, clock or randomness: only their arguments and the imports
//! above) can be built for `wasm32-unknown-unknown` instead and turned into
//! a component with `wasm-tools component new`. That component imports
//! nothing of WASI and is instantiated for each call in about a third of the
//! time. On that target this crate sets a `#[global_allocator]` that starts
//! in the module's initial memory (the `heap` feature, on by default; turn
//! it off to set your own): Rust's own allocator there would grow the memory
//! in every call.
//!
//! Files and environment variables are plain `std::fs` and `std::env`: the host
//! grants them per permission profile. Outbound HTTP goes through [`http`],
//! shell commands through [`terminal`], logs through [`log`], progress
//! reports through [`progress`].
//!
//! A tool whose result type derives [`Serialize`](serde::Serialize) and
//! [`JsonSchema`] and is a struct (or a map) declares that type's JSON Schema
//! as its output schema: the host checks every result against it, and MCP
//! clients receive the result as `structuredContent` too. A tool returning
//! [`Value`](serde_json::Value) declares none.
//!
//! ```ignore
//! #[derive(Serialize, JsonSchema)]
//! struct Counts {
//!     /// Lines in the text.
//!     lines: usize,
//!     /// Words in the text.
//!     words: usize,
//! }
//!
//! /// Count the lines and words of a text.
//! #[tool(title = "Count words", read_only)]
//! fn count(args: CountArgs) -> Result<Counts, ToolError> {
//!     Ok(Counts { lines: args.text.lines().count(), words: args.text.split_whitespace().count() })
//! }
//! ```

#![deny(missing_docs)]

extern crate self as toolhost_sdk;

pub mod content;
pub mod http;
pub mod log;
pub mod progress;
pub mod terminal;
mod tool;

#[cfg(all(feature = "heap", target_arch = "wasm32", target_os = "unknown"))]
mod heap;

#[doc(hidden)]
pub mod __private;

pub use content::{
    Audio, Content, EmbeddedResource, Icon, Image, IntoToolOutput, ResourceLink, ToolOutput,
};
pub use schemars::JsonSchema;
pub use tool::{NoArguments, Tool, ToolError, ToolSpec};
pub use toolhost_sdk_macros::tool;

/// Everything a plugin usually needs: `use toolhost_sdk::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Audio, Content, EmbeddedResource, Image, JsonSchema, NoArguments, ResourceLink, ToolError,
        export_plugin, tool,
    };
    pub use serde::{Deserialize, Serialize};
    pub use serde_json::{Value, json};
}

/// Exports the listed tools as this crate's plugin.
///
/// Each name is a function marked with [`#[tool]`](tool). Use it once per
/// plugin crate, at the top level:
///
/// ```ignore
/// export_plugin!(echo, word_count);
/// ```
///
/// A stateful plugin keeps one instance per session id, so data kept in
/// statics survives between that session's calls. Prefix the list with
/// `stateful;`, and optionally name `setup` (called with the session id before
/// the first call) and `teardown` functions:
///
/// ```ignore
/// export_plugin!(stateful(setup = open_session, teardown = close_session); todo);
/// export_plugin!(stateful; todo);
/// ```
#[macro_export]
macro_rules! export_plugin {
    (stateful(setup = $setup:path, teardown = $teardown:path); $($tool:ident),+ $(,)?) => {
        $crate::__export_plugin_impl!(true, $setup, $teardown; $($tool),+);
    };
    (stateful(setup = $setup:path); $($tool:ident),+ $(,)?) => {
        $crate::__export_plugin_impl!(true, $setup, $crate::__private::no_teardown; $($tool),+);
    };
    (stateful(teardown = $teardown:path); $($tool:ident),+ $(,)?) => {
        $crate::__export_plugin_impl!(true, $crate::__private::no_setup, $teardown; $($tool),+);
    };
    (stateful; $($tool:ident),+ $(,)?) => {
        $crate::__export_plugin_impl!(
            true, $crate::__private::no_setup, $crate::__private::no_teardown; $($tool),+
        );
    };
    ($($tool:ident),+ $(,)?) => {
        $crate::__export_plugin_impl!(
            false, $crate::__private::no_setup, $crate::__private::no_teardown; $($tool),+
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __export_plugin_impl {
    ($stateful:expr, $setup:path, $teardown:path; $($tool:ident),+) => {
        #[doc(hidden)]
        struct __ToolhostPlugin;

        impl $crate::__private::GuestTool for __ToolhostPlugin {
            fn describe() -> $crate::__private::Manifest {
                $crate::__private::manifest($stateful, ::std::vec![$(<$tool as $crate::Tool>::spec()),+])
            }

            fn call(
                name: ::std::string::String,
                arguments: ::std::string::String,
            ) -> ::core::result::Result<::std::string::String, $crate::__private::WitToolError> {
                $(
                    if name == <$tool as $crate::Tool>::NAME {
                        return <$tool as $crate::Tool>::call(&arguments)
                            .map($crate::__private::output_text)
                            .map_err(::core::convert::Into::into);
                    }
                )+
                ::core::result::Result::Err($crate::__private::unknown_tool(&name))
            }
        }

        impl $crate::__private::GuestRichTool for __ToolhostPlugin {
            fn icons() -> ::std::vec::Vec<$crate::__private::WitToolIcons> {
                $crate::__private::icons(::std::vec![$(<$tool as $crate::Tool>::spec()),+])
            }

            fn call(
                name: ::std::string::String,
                arguments: ::std::string::String,
            ) -> ::core::result::Result<$crate::__private::WitToolOutput, $crate::__private::WitToolError> {
                $(
                    if name == <$tool as $crate::Tool>::NAME {
                        return <$tool as $crate::Tool>::call(&arguments)
                            .map($crate::__private::output)
                            .map_err(::core::convert::Into::into);
                    }
                )+
                ::core::result::Result::Err($crate::__private::unknown_tool(&name))
            }
        }

        impl $crate::__private::GuestLifecycle for __ToolhostPlugin {
            fn setup(session: ::std::string::String) -> ::core::result::Result<(), ::std::string::String> {
                $setup(&session)
            }

            fn teardown() {
                $teardown()
            }
        }

        $crate::__private::bindings::__export_plugin_world!(__ToolhostPlugin with_types_in $crate::__private::bindings);
    };
}
