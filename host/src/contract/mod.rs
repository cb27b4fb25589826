//! The contract between host and plugins, and the vocabulary every other
//! module speaks: the generated WIT bindings, the contract's version, a tool
//! as the host knows it ([`ToolSpec`]), a plugin version's identity
//! ([`ContentHash`]), a permission's name ([`Permission`]) and a capability
//! use ([`CapabilityUse`]). It imports nothing else of toolhost.

pub(crate) mod adapter;
pub(crate) mod bindings;
pub mod content;
mod hash;
pub mod icons;
mod permission;
mod shown;
pub(crate) mod spec;
mod uses;

pub use adapter::{GuestOutput, RELEASED_CONTRACTS};
pub use content::{CallOutput, Content, MimeTypes};
pub use hash::ContentHash;
pub use permission::Permission;
pub use spec::ToolSpec;
pub use uses::CapabilityUse;

/// The contract version this host speaks: the newest released.
pub const CONTRACT_VERSION: &str = "0.2.2";
/// The versions it loads: every released version and whatever later minor
/// releases of their series add (minor releases only add).
pub const CONTRACT_SERIES: &str = "0.1.x and 0.2.x";
/// The name of the interface every plugin must export.
pub const TOOL_INTERFACE: &str = "toolhost:plugin/tool@0.2.2";
