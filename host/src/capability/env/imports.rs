//! The env capability's imports: none of its own. Its state sets the
//! variables a tool requires, that `env.allow` passes, in the guest's WASI
//! environment.

use wasmtime::component::Linker;
use wasmtime_wasi::WasiCtxBuilder;

use super::{ENV_READ, Environment};
use crate::capability::grants::Grants;
use crate::capability::sandbox::{Capability, CapabilityInfo, Sandbox};

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
        if !grants.allows(ENV_READ.as_str()) {
            return;
        }
        let env: Vec<(String, String)> = grants
            .requires_env
            .iter()
            .filter(|name| grants.profile.env.allows(name))
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
