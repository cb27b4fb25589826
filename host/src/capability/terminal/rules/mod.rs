//! The terminal's rules, with no wasmtime in sight: how a command line is
//! read (`shell`), `terminal.allow_commands` and `terminal.deny_commands`
//! (`commands`), the dangerous-command detector (`dangerous`), and how
//! commands run (`settings`).

pub mod commands;
pub mod dangerous;
pub mod settings;
mod shell;

pub use commands::{CommandPattern, CommandPatternError, CommandRefusal, CommandRules};
pub use dangerous::{Danger, DangerCategory};
pub use settings::{
    ContainerSettings, DEFAULT_SANDBOX_IDS, DangerousMode, SshSettings, TerminalBackend,
    TerminalLandlock, TerminalNetwork, TerminalRules, TerminalSandbox,
};
