//! A plugin version: what a component must be to load (`checks`), the
//! loaded version and its shared state (`version`), loading it (`load`),
//! calling it (`call`), and a plugin captured from a running host
//! (`captured`).

mod call;
mod captured;
mod checks;
mod load;
mod version;

pub use captured::{CAPTURED_FILE, CapturedPlugin};
pub use version::PluginVersion;
