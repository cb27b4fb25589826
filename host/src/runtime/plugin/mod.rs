//! A plugin version: what a plugin file is and why it may not load
//! (`source`), the loaded version and its shared state (`version`), loading
//! it (`load`) and calling it (`call`).

mod call;
mod captured;
mod load;
mod source;
mod version;

pub use captured::{CAPTURED_FILE, CapturedPlugin};
pub use source::{
    LoadError, PluginSource, is_declarative_file, is_plugin_file, plugin_files, plugin_name_for,
};
pub use version::PluginVersion;
