//! The rules every capability shares, with no wasmtime in sight:
//! permissions and a session's narrowing (`permissions`), restrictions on
//! a tool's arguments (`layers`, with URLs in their canonical form:
//! `canonical`), a call's limits (`limits`), toolhost's own paths, out of
//! every grant (`own`), what a path is opened for and its lexical form
//! (`lexical`), a file tool's path rules (`confinement`) and the `*`-only
//! glob (`wildcard`). Each capability's own rules are in its folder under
//! `capability/`. Each refusal is a typed value whose message says what was
//! refused, which setting refused it and how to allow it.

pub mod canonical;
pub(crate) mod confinement;
pub mod layers;
pub(crate) mod lexical;
pub(crate) mod limits;
pub mod own;
pub mod permissions;
pub(crate) mod reserved;
pub mod units;
pub(crate) mod wildcard;

pub use confinement::Confinement;
pub use layers::{ArgumentRule, Matcher};
pub use lexical::{Access, normalize};
pub use limits::{Limits, MAX_MEMORY};
pub use own::{OwnPath, OwnPaths, Placeholder, Protection};
pub use permissions::{
    Narrowing, PermissionDecision, PermissionPattern, PermissionPatternError, PermissionRefusal,
    PermissionRules,
};
pub use units::{ByteSize, Span, human_bytes, parse_duration, parse_size, show_duration};
