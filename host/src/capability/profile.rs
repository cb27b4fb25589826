//! A permission profile, resolved against a workspace: every rule a call is
//! checked against, and the limits it runs under.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::list::foreach_capability;
use super::section::{Resolved, Section};
use crate::policy::layers::ArgumentRule;
use crate::policy::limits::Limits;
use crate::policy::permissions::{Narrowing, PermissionRules};

macro_rules! profile {
    (sections: [$($(#[$sm:meta])* $skey:ident: $scap:path [$($g:ident)?]),* $(,)?],
     others: [$($rest:tt)*] $(,)?) => {
        /// Every rule of a profile, with file grants resolved against a
        /// workspace: what every capability shares, and one field per
        /// capability with a table, named by its key (`file`, `network`,
        /// `terminal`, `env`), in the list's order.
        #[derive(Debug, Clone)]
        pub struct Profile {
            /// The profile's name in the config.
            pub name: String,
            /// The directory relative file grants were resolved against.
            pub workspace: PathBuf,
            /// Which permissions tools may have.
            pub permissions: PermissionRules,
            $(
                $(#[$sm])*
                #[doc = concat!("`", stringify!($skey), ".*`: the rules of its table.")]
                pub $skey: <$scap as Section>::Rules,
            )*
            /// Limits of each call.
            pub limits: Limits,
            /// What the tool and parameter layers say of single tools, by name.
            pub tools: BTreeMap<String, Arc<ToolRules>>,
            /// What its commands may not change inside the writable
            /// grants, as the terminal's sandbox plan keeps it (repository
            /// metadata, where a kept link leads): the file tools write
            /// none of it either. Set where the profile is made from a
            /// configuration, which knows every capability; `None` (a
            /// profile made otherwise) keeps nothing more.
            pub kept_by: Option<KeptBy>,
            /// The configuration this profile was made from
            /// ([`crate::config::Config::generation`]; 0: none): a call made
            /// under a configuration since replaced is refused when it
            /// starts, and when an approval it waited for comes.
            pub generation: u64,
        }

        impl Profile {
            /// A profile that allows nothing: no permissions, no files, no
            /// hosts.
            pub fn deny_all(name: impl Into<String>, workspace: impl Into<PathBuf>) -> Self {
                let none: [&str; 0] = [];
                Self {
                    name: name.into(),
                    workspace: workspace.into(),
                    permissions: PermissionRules::parse(&none, &none, &none)
                        .expect("empty rules are valid"),
                    $($(#[$sm])* $skey: <$scap as Section>::deny_all(),)*
                    limits: Limits::default(),
                    tools: BTreeMap::new(),
                    kept_by: None,
                    generation: 0,
                }
            }
        }

        /// The rules of each capability with a table, for a section that
        /// reads another's while it resolves (at config time only).
        impl Resolved for Profile {
            fn rules(&self, section: TypeId) -> Option<&dyn Any> {
                $($(#[$sm])* if section == TypeId::of::<$scap>() {
                    return Some(&self.$skey);
                })*
                None
            }
        }
    };
}
foreach_capability!(profile);

/// [`Profile::kept_by`]: what commands of a profile may not change inside
/// its writable grants (blocking: it walks the grants; `Err` is the
/// refusal a command would get).
pub type KeptBy = fn(&Profile) -> Result<Vec<PathBuf>, String>;

/// What a profile says of one tool, beyond its permission rules.
#[derive(Debug, Clone)]
pub struct ToolRules {
    /// The tool.
    pub tool: String,
    /// Where each part was written (`global.tools.T`, `profiles.P.tools.T`).
    pub keys: Vec<String>,
    /// `Some(key)` when a layer switched the tool off (`enabled = false`).
    pub disabled_by: Option<String>,
    /// The tool's own permission patterns (allow, deny, approval), as written.
    pub permissions: PermissionRules,
    /// Restrictions on its arguments.
    pub arguments: Vec<ArgumentRule>,
    /// The profile as it applies to this tool: its permission rules with
    /// the tool's on top (the tool's denies win; its allows add).
    pub profile: Arc<Profile>,
    /// The same when the tool declares file permissions and has path rules
    /// (glob rules not written as URLs): every path it touches is confined
    /// to their globs.
    pub confined: Option<Arc<Profile>>,
}

impl Profile {
    /// The profile as it applies to `tool`: with the tool layer's
    /// permission rules on top, if it has any.
    pub fn for_tool(self: &Arc<Self>, tool: &str) -> Arc<Profile> {
        match self.tools.get(tool) {
            Some(rules) => rules.profile.clone(),
            None => self.clone(),
        }
    }

    /// The profile a call of `tool` runs under: [`Profile::for_tool`], with
    /// its paths confined to the tool's path rules when the tool declares
    /// file permissions (`files`).
    pub fn for_call(self: &Arc<Self>, tool: &str, files: bool) -> Arc<Profile> {
        match self.tools.get(tool) {
            Some(rules) => match (&rules.confined, files) {
                (Some(confined), true) => confined.clone(),
                _ => rules.profile.clone(),
            },
            None => self.clone(),
        }
    }

    /// [`Profile::for_tool`] by reference.
    pub fn applied(&self, tool: &str) -> &Profile {
        match self.tools.get(tool) {
            Some(rules) => &rules.profile,
            None => self,
        }
    }

    /// Why `tool` is switched off, if a layer did.
    pub fn disabled(&self, tool: &str) -> Option<&str> {
        self.tools.get(tool)?.disabled_by.as_deref()
    }

    /// The parameter restrictions of `tool`.
    pub fn argument_rules(&self, tool: &str) -> &[ArgumentRule] {
        self.tools
            .get(tool)
            .map_or(&[], |rules| rules.arguments.as_slice())
    }

    /// This profile narrowed by a session: the same rules, and a permission
    /// must also pass `narrowing` (for every tool).
    pub fn narrowed(&self, narrowing: &Narrowing) -> Profile {
        self.narrowed_by(&[Arc::new(narrowing.clone())])
    }

    /// This profile with a session's `narrowings` on top, all at once: one
    /// copy of the profile (and of each tool's), whatever their number.
    pub fn narrowed_by(&self, narrowings: &[Arc<Narrowing>]) -> Profile {
        let mut narrowed = self.clone();
        narrowed.permissions = self.permissions.narrowed(narrowings);
        narrowed.tools = self
            .tools
            .iter()
            .map(|(name, rules)| {
                let mut rules = (**rules).clone();
                rules.profile = Arc::new(rules.profile.narrowed_by(narrowings));
                rules.confined = rules
                    .confined
                    .as_ref()
                    .map(|confined| Arc::new(confined.narrowed_by(narrowings)));
                (name.clone(), Arc::new(rules))
            })
            .collect();
        narrowed
    }

    /// The workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }
}
