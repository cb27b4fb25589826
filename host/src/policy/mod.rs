//! Permission profiles: the rules that decide, with no wasmtime in sight.
//! Plain data and decision functions; each refusal is a typed value whose
//! message says what was refused, which setting refused it and how to allow it.

pub mod canonical;
pub mod commands;
pub mod dangerous;
pub mod hosts;
pub mod layers;
pub mod own;
pub mod paths;
pub mod permissions;
pub mod profile;
mod shell;
mod wildcard;

#[cfg(test)]
mod robustness_tests;

pub use commands::{CommandPattern, CommandPatternError, CommandRefusal, CommandRules};
pub use dangerous::{Danger, DangerCategory};
pub use hosts::{HostPattern, HostPatternError, HostRules, NetworkRefusal, SpecialRange};
pub use layers::{ArgumentRule, Matcher};
pub use own::{OwnPath, OwnPaths, Protection};
pub use paths::{Access, Confinement, PathRefusal, PathRuleError, PathRules};
pub use permissions::{
    Narrowing, PermissionDecision, PermissionPattern, PermissionPatternError, PermissionRefusal,
    PermissionRules,
};
pub use profile::{
    ContainerSettings, DEFAULT_SANDBOX_IDS, DangerousMode, Limits, NetworkLimits, Profile,
    SshSettings, TerminalBackend, TerminalLandlock, TerminalNetwork, TerminalSandbox,
    TerminalSettings, ToolRules,
};
