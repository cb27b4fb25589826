//! `env`: the host environment variables a tool requires, through WASI's
//! environment, when the tool declares `env:read`, the profile allows it and
//! its `env.allow` passes each variable.

mod imports;
mod section;
pub(crate) use section::ENV_READ;
pub use section::{EnvConfig, EnvRules, Environment};
