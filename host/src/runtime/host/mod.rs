//! The host side of each WIT import, one file per interface.

pub(crate) mod filesystem;
mod http;
mod log;
mod process_group;
mod terminal;
