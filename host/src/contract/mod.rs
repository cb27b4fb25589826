//! The contract between host and plugins, and the vocabulary every other
//! module speaks: the generated WIT bindings, the contract's version, a tool
//! as the host knows it ([`ToolSpec`]), a plugin version's identity
//! ([`ContentHash`]) and a capability use ([`CapabilityUse`]). It imports
//! nothing else of toolhost.

pub(crate) mod bindings;
mod hash;
pub(crate) mod spec;
mod uses;

pub use hash::ContentHash;
pub use spec::ToolSpec;
pub use uses::CapabilityUse;

/// The contract version this host speaks.
pub const CONTRACT_VERSION: &str = "0.2.1";
/// The versions it loads: any with the same major and minor (minor releases
/// only add).
pub const CONTRACT_SERIES: &str = "0.2.x";
/// The name of the interface every plugin must export.
pub const TOOL_INTERFACE: &str = "toolhost:plugin/tool@0.2.1";
