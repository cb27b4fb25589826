//! Permission profiles: the rules that decide, with no wasmtime in sight.
//! Plain data and decision functions; each refusal is a typed value whose
//! message says what was refused, which setting refused it and how to allow it.

pub mod canonical;
pub mod commands;
pub(crate) mod confinement;
pub mod dangerous;
pub mod hosts;
pub mod layers;
pub(crate) mod lexical;
mod limits;
mod network;
pub mod own;
pub mod paths;
pub mod permissions;
pub mod profile;
mod shell;
mod terminal;
mod wildcard;

#[cfg(test)]
mod robustness_tests;

pub use commands::{CommandPattern, CommandPatternError, CommandRefusal, CommandRules};
pub use dangerous::{Danger, DangerCategory};
pub use hosts::{HostPattern, HostPatternError, HostRules, NetworkRefusal, SpecialRange};
pub use layers::{ArgumentRule, Matcher};
pub use limits::{Limits, MAX_MEMORY};
pub use network::NetworkLimits;
pub use own::{OwnPath, OwnPaths, Placeholder, Protection};
pub use paths::{Access, Confinement, PathRefusal, PathRuleError, PathRules};
pub use permissions::{
    Narrowing, PermissionDecision, PermissionPattern, PermissionPatternError, PermissionRefusal,
    PermissionRules,
};
pub use profile::{Profile, ToolRules};
pub use terminal::{
    ContainerSettings, DEFAULT_SANDBOX_IDS, DangerousMode, SshSettings, TerminalBackend,
    TerminalLandlock, TerminalNetwork, TerminalSandbox, TerminalSettings,
};
