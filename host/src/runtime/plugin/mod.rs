//! A plugin version: where a plugin came from and why it may not load
//! (`source`), which files are plugins (`directory`), what a component must
//! be to load (`checks`), the loaded version and its shared state
//! (`version`), loading it (`load`) and calling it (`call`).

mod call;
mod captured;
mod checks;
mod directory;
mod load;
mod source;
mod version;

pub use captured::{CAPTURED_FILE, CapturedPlugin};
pub use directory::{is_declarative_file, is_plugin_file, plugin_files, plugin_name_for};
pub use source::{LoadError, PluginSource};
pub use version::PluginVersion;
