//! The tally capability's table: its name and permission,
//! `[profiles.P.tally]` as written, and how it resolves into the profile's
//! [`TallyRules`], each problem at its key. No wasmtime here.

use serde::Deserialize;

use super::rules::TallyRules;
use crate::capability::section::{NoGlobal, Resolve, Section};
use crate::contract::Permission;

/// The permission that grants it.
pub const TALLY_USE: Permission = Permission::new("tally:use");

/// A number that goes up at each `next`.
pub struct Tally;

/// `tally.*` of a profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TallyConfig {
    /// Most `next` calls a store answers (default: no limit).
    #[serde(default)]
    pub max: Option<u32>,
}

impl Section for Tally {
    const KEY: &'static str = "tally";
    type Written = TallyConfig;
    type Global = NoGlobal;
    type Rules = TallyRules;

    fn deny_all() -> TallyRules {
        TallyRules { max: Some(0) }
    }

    fn resolve(written: &TallyConfig, _: &NoGlobal, cx: &mut Resolve<'_>) -> TallyRules {
        if written.max == Some(0) {
            cx.problem(
                cx.key("tally.max"),
                "must be at least 1 (omit it for no limit)",
            );
        }
        TallyRules { max: written.max }
    }
}
