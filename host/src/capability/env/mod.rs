//! `env`: the host environment variables a tool requires, through WASI's
//! environment, when the tool declares `env:read`, the profile allows it and
//! its `env.allow` passes each variable.

use wasmtime::component::Linker;
use wasmtime_wasi::WasiCtxBuilder;

use crate::capability::grants::Grants;
use crate::capability::sandbox::{Capability, CapabilityInfo, Sandbox};
use crate::contract::permission::ENV_READ;

/// Environment variables, set in the guest's WASI environment.
pub(crate) struct Environment;

impl Capability for Environment {
    const INFO: CapabilityInfo = CapabilityInfo {
        name: "env",
        permissions: &[ENV_READ],
        section: Some("env"),
        description: "the environment variables the tool requires (requires_env) that the \
                      profile's env.allow passes and the host has",
        each: &[],
    };
    type State = ();

    fn state(grants: &Grants, wasi: &mut WasiCtxBuilder) {
        if !grants.allows(ENV_READ) {
            return;
        }
        let env: Vec<(String, String)> = grants
            .requires_env
            .iter()
            .filter(|name| grants.profile.allows_env(name))
            .filter_map(|name| std::env::var(name).ok().map(|value| (name.clone(), value)))
            .collect();
        if !env.is_empty() {
            wasi.envs(&env);
        }
    }

    /// Nothing to link: WASI's `environment` interface serves what
    /// [`Self::state`] set.
    fn add_to_linker(_: &mut Linker<Sandbox>) -> wasmtime::Result<()> {
        Ok(())
    }
}
