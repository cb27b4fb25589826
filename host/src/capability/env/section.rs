//! The env capability's table: its name and permission, `[profiles.P.env]`
//! as written, and how it resolves into the profile's [`EnvRules`], each
//! problem at its key. No wasmtime here; its imports are in `imports`.

use serde::Deserialize;

use crate::capability::section::{NoGlobal, Resolve, Section};
use crate::contract::Permission;
use crate::policy::wildcard;

/// The permission to receive environment variables.
pub(crate) const ENV_READ: Permission = Permission::new("env:read");

/// Environment variables, set in the guest's WASI environment.
pub struct Environment;

/// `env.*` of a profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvConfig {
    /// Host variables (names, `*` wildcards) that tools requiring them receive.
    #[serde(default)]
    pub allow: Vec<String>,
}

/// The env rules of a profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvRules {
    /// Host environment variables (names, `*` wildcards) tools may receive.
    pub allow: Vec<String>,
}

impl EnvRules {
    /// Whether tools may receive the host variable `name`.
    pub fn allows(&self, name: &str) -> bool {
        self.allow
            .iter()
            .any(|pattern| wildcard::matches(pattern, name))
    }
}

impl Section for Environment {
    const KEY: &'static str = "env";
    type Written = EnvConfig;
    type Global = NoGlobal;
    type Rules = EnvRules;

    fn deny_all() -> EnvRules {
        EnvRules::default()
    }

    fn resolve(written: &EnvConfig, _: &NoGlobal, cx: &mut Resolve<'_>) -> EnvRules {
        for (i, pattern) in written.allow.iter().enumerate() {
            if pattern.is_empty()
                || !pattern
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'*')
            {
                cx.problem(
                    cx.key(&format!("env.allow[{i}]")),
                    format!("{pattern:?} is not a variable name or a pattern like \"GITHUB_*\""),
                );
            }
        }
        EnvRules {
            allow: written.allow.clone(),
        }
    }
}
