//! `terminal`: runs a guest's command line with `bash -c`, in the kernel
//! sandbox of [`crate::capability::terminal::confine`] (unless the profile says
//! `terminal.sandbox = "none"`), after checking it against the profile, in
//! this order: the tool declared
//! `terminal:execute` and the profile allows it; `terminal.deny_commands` and
//! `terminal.allow_commands`; the working directory; the dangerous-command
//! detector under `terminal.dangerous` (`deny`, `approve` asks the approver,
//! `allow`). Every command line, run or refused, goes to the audit record.
//!
//! What a command gets:
//! - a working directory inside a directory the profile grants for reading
//!   (`file.read` or `file.write`, minus `file.deny`), checked as written and
//!   again with symlinks resolved. A relative `cwd` is taken relative to the
//!   workspace; without one, commands start in the workspace when it is
//!   granted, else in the first granted directory. A profile that grants no
//!   directory cannot run commands. Write access is not required: the
//!   directory check only decides where a command starts; what the command
//!   can touch is decided by the sandbox, built from the same profile.
//! - an empty environment plus the host variables named (exactly, no
//!   wildcards) in `terminal.env` that are set;
//!   `PATH=/usr/local/bin:/usr/bin:/bin` unless `terminal.env` passes `PATH`;
//!   `HOME` set to the default working directory unless `terminal.env`
//!   passes `HOME`, so programs looking in `~` find the workspace rather than
//!   the host user's dotfiles and credentials.
//! - the smaller of the guest's timeout and `terminal.timeout`; at expiry,
//!   when the shell exits, or when the call is abandoned, every process it
//!   started is gone (the sandbox's PID namespace ends).
//! - stdout and stderr kept up to `terminal.max_output` bytes each.

mod ahead;
mod background;
mod command;
pub mod confine;
mod imports;
pub(crate) mod process_group;
pub(crate) mod proxy;
pub mod rules;
mod section;
mod spare;
pub(crate) mod terminals;
pub use rules::{
    CommandPattern, CommandPatternError, CommandRefusal, CommandRules, ContainerSettings,
    DEFAULT_SANDBOX_IDS, Danger, DangerCategory, DangerousMode, SshSettings, TerminalBackend,
    TerminalLandlock, TerminalNetwork, TerminalRules, TerminalSandbox,
};

pub(crate) use section::TERMINAL_EXECUTE;
pub use section::{GlobalTerminalConfig, Terminal, TerminalConfig};
pub(crate) use terminals::check_container_engine;
pub use terminals::{MAX_PROCESSES, MAX_TERMINAL_SESSIONS, Terminals};

/// Ends every command still running and removes every terminal container,
/// for a process about to exit without dropping the calls that run them
/// (so that nothing of theirs outlives toolhost).
pub(crate) fn kill_commands() {
    process_group::kill_all();
    terminals::remove_containers();
    // What a command left at a kept name as it was killed is set aside
    // before toolhost exits (a later start must not read it).
    confine::guard::settle_at_exit(std::time::Duration::from_secs(2));
}
