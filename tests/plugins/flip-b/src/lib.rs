//! Test guest: version "b" of the plugin the reload tests swap back and forth.

const VERSION: &str = "b";

include!("../../flip-a/src/which.rs");
