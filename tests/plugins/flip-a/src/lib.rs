//! Test guest: version "a" of the plugin the reload tests swap back and forth.

const VERSION: &str = "a";

include!("which.rs");
