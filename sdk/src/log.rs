//! Log records that the host writes to its own log, tagged with the plugin
//! and tool. Standard error is captured and logged too, but these carry a level.

use crate::__private::bindings::toolhost::plugin::log::{Level, log};

/// Logs at trace level.
pub fn trace(message: impl AsRef<str>) {
    log(Level::Trace, message.as_ref());
}

/// Logs at debug level.
pub fn debug(message: impl AsRef<str>) {
    log(Level::Debug, message.as_ref());
}

/// Logs at info level.
pub fn info(message: impl AsRef<str>) {
    log(Level::Info, message.as_ref());
}

/// Logs at warn level.
pub fn warn(message: impl AsRef<str>) {
    log(Level::Warn, message.as_ref());
}

/// Logs at error level.
pub fn error(message: impl AsRef<str>) {
    log(Level::Error, message.as_ref());
}
