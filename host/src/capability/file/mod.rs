//! `file`: `wasi:filesystem/types` with the profile's `file.deny` rules
//! enforced on every path-taking call, delegating the work to wasmtime-wasi
//! (`policed`, with its imports in `imports`, `plain` and `pinned`; what
//! cannot wait done on the calling thread, in `on_thread`); the
//! grants and deny globs a profile resolves to (`rules`, no wasmtime); its
//! permissions and table (`section`); a store's state (`state`).

pub(crate) mod fd_path;
mod imports;
mod on_thread;
mod pinned;
mod plain;
mod policed;
mod reads;
pub mod rules;
mod section;
mod state;
pub use rules::{Access, PathRefusal, PathRuleError, PathRules};
pub(crate) use section::{FILE_READ, FILE_WRITE};
pub use section::{FileAccess, FileConfig, GlobalFileConfig};
pub(crate) use state::FileState;
