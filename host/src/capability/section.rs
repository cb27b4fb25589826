//! A capability's table of a permission profile, with no wasmtime in
//! sight: what is written under `[profiles.P.<key>]` (and, for some,
//! `[global.<key>]`), what it resolves to, and its checks, each problem at
//! its key. Implemented in each capability's `section.rs`. Public because
//! the profile's and the config's fields name its associated types; only
//! the host's own capabilities implement it.

use std::any::{Any, TypeId};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::policy::OwnPaths;

/// A capability's table of a profile.
pub trait Section: 'static {
    /// Its key: `[profiles.P.<KEY>]`, `[global.<KEY>]`, the prefix of its
    /// permissions, and its field of [`Profile`](super::Profile).
    const KEY: &'static str;
    /// The capabilities (their keys) whose rules this one reads while it
    /// resolves, or whose modules it imports. Each resolves before it.
    const NEEDS: &'static [&'static str] = &[];
    /// The table as written (serde, `deny_unknown_fields`).
    type Written: DeserializeOwned + Default + Clone + fmt::Debug + Send + Sync;
    /// `[global.<KEY>]` as written; [`NoGlobal`] when there is none.
    type Global: DeserializeOwned + Default + Clone + fmt::Debug + Send + Sync;
    /// What it resolves to: its field of the profile.
    type Rules: Clone + fmt::Debug + Send + Sync + 'static;
    /// The rules of a profile that allows nothing.
    fn deny_all() -> Self::Rules;
    /// Resolves `written`, with `global` on top, against the profile's
    /// workspace, pushing every problem at its key through `cx`; returns
    /// usable (possibly partial) rules either way.
    fn resolve(written: &Self::Written, global: &Self::Global, cx: &mut Resolve<'_>)
    -> Self::Rules;
}

/// [`Section::Global`] of a capability without a `[global.<key>]` table.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoGlobal {}

/// The rules resolved so far, by capability: implemented by the profile.
/// Asked while a configuration is resolved, never per call.
pub trait Resolved {
    /// The rules of the capability whose type id is `section`.
    fn rules(&self, section: TypeId) -> Option<&dyn Any>;
}

/// What a section resolves against.
pub struct Resolve<'a> {
    /// The profile's name.
    pub(crate) profile: &'a str,
    /// Its workspace, which relative grants are taken in.
    pub(crate) workspace: &'a Path,
    /// toolhost's own files, kept from every grant.
    pub(crate) own: &'a Arc<OwnPaths>,
    needs: &'static [&'static str],
    resolved: &'a dyn Resolved,
    problems: &'a mut Vec<(String, String)>,
}

impl<'a> Resolve<'a> {
    /// The context of section `S` of profile `profile`, whose earlier
    /// sections are in `resolved`.
    pub(crate) fn new<S: Section>(
        profile: &'a str,
        workspace: &'a Path,
        own: &'a Arc<OwnPaths>,
        resolved: &'a dyn Resolved,
        problems: &'a mut Vec<(String, String)>,
    ) -> Self {
        Self {
            profile,
            workspace,
            own,
            needs: S::NEEDS,
            resolved,
            problems,
        }
    }

    /// `profiles.<profile>.<field>` (`field` includes the table:
    /// `terminal.wrapper`).
    pub(crate) fn key(&self, field: &str) -> String {
        format!("profiles.{}.{field}", self.profile)
    }

    /// A problem at `key`.
    pub(crate) fn problem(&mut self, key: String, message: impl Into<String>) {
        self.problems.push((key, message.into()));
    }

    /// The resolved rules of `S`, which this section declares in `NEEDS`
    /// and which resolve before it.
    pub(crate) fn needs<S: Section>(&self) -> &'a S::Rules {
        assert!(
            self.needs.contains(&S::KEY),
            "reads the rules of {:?} without naming it in NEEDS",
            S::KEY
        );
        self.resolved
            .rules(TypeId::of::<S>())
            .and_then(|rules| rules.downcast_ref())
            .unwrap_or_else(|| panic!("{:?} resolves after its user", S::KEY))
    }
}
