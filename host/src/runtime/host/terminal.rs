use crate::runtime::bindings::toolhost::plugin::terminal::{Command, Host, Output, TerminalError};
use crate::runtime::sandbox::Sandbox;

impl Host for Sandbox {
    async fn run(&mut self, command: Command) -> wasmtime::Result<Result<Output, TerminalError>> {
        Ok(Err(TerminalError::Denied(format!(
            "plugin {:?} may not run {:?}: terminal access is not granted",
            self.identity.plugin, command.command_line
        ))))
    }
}
