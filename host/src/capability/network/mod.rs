//! `network`: outbound requests under the caller's profile, through the WIT
//! interface `http`. The tool must have `network:fetch` (declared and
//! allowed); each hop's host and resolved addresses are checked before
//! connecting, and each hop's URL against the tool's URL parameter rules;
//! redirects are followed here, and the whole exchange is capped in time
//! and response size.

pub(crate) mod connect;
mod imports;
mod request;
pub mod rules;
mod section;
pub use rules::{HostPattern, HostPatternError, HostRules, NetworkRefusal, SpecialRange};
pub(crate) use section::NETWORK_FETCH;
pub use section::{Network, NetworkConfig, NetworkRules};
