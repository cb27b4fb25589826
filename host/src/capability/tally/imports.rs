//! The tally capability's imports: `impl Capability` for [`Tally`] and the
//! WIT interface `toolhost:test/tally`, declared inline (it is no part of
//! the plugins' contract).

use wasmtime::component::Linker;
use wasmtime_wasi::WasiCtxBuilder;

use self::toolhost::test::tally::{self as wit, Host};
use super::{TALLY_USE, Tally};
use crate::capability::grants::Grants;
use crate::capability::sandbox::{Capability, CapabilityInfo, InRoom, Room, Sandbox};

wasmtime::component::bindgen!({
    inline: "
        package toolhost:test;
        interface tally { next: func() -> u32; }
        world tallied { import tally; }
    ",
    imports: { default: async | trappable },
});

impl Capability for Tally {
    const INFO: CapabilityInfo = CapabilityInfo {
        name: "tally",
        permissions: &[TALLY_USE],
        section: Some("tally"),
        description: "a number that goes up, at most tally.max times per store",
        each: &[],
    };
    /// The last number answered.
    type State = u32;

    fn state(_: &Grants, _: &mut WasiCtxBuilder) -> u32 {
        0
    }

    fn add_to_linker(linker: &mut Linker<Sandbox>) -> wasmtime::Result<()> {
        wit::add_to_linker::<_, InRoom<Self>>(linker, Sandbox::room::<Self>)
    }
}

impl Host for Room<'_, Tally> {
    /// The next number, or 0 when refused (recorded, with why).
    async fn next(&mut self) -> wasmtime::Result<u32> {
        if !self.granted() {
            self.refused("next", format!("{TALLY_USE} is not granted"));
            return Ok(0);
        }
        let next = *self.state + 1;
        if !self.call.grants.profile.tally.allows(next) {
            self.refused("next", "tally.max reached");
            return Ok(0);
        }
        *self.state = next;
        self.allowed("next");
        Ok(next)
    }
}
