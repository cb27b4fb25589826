//! The host side of each WIT import, one file per interface.

mod http;
mod log;
mod terminal;
