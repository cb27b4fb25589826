//! A profile as written, resolved against a workspace into the policy's
//! [`Profile`].

use std::path::Path;
use std::sync::Arc;

use super::file::{GlobalConfig, ProfileConfig};
use crate::capability::Profile;
use crate::capability::list::foreach_capability;
use crate::capability::section::{Resolve, Section};
use crate::policy::MAX_MEMORY;
use crate::policy::{Limits, OwnPaths, PermissionRules};

/// Resolves a written profile against `workspace`, pushing every problem.
/// Returns a usable (possibly partial) profile either way.
pub(super) fn resolve_profile(
    name: &str,
    written: &ProfileConfig,
    global: &GlobalConfig,
    workspace: &Path,
    own: &Arc<OwnPaths>,
    problems: &mut Vec<(String, String)>,
) -> Profile {
    let key = |field: &str| format!("profiles.{name}.{field}");
    let mut profile = Profile::deny_all(name, workspace);

    match PermissionRules::parse(&written.allow, &written.deny, &written.approval_required) {
        Ok(rules) => {
            for overlap in rules.overlaps() {
                problems.push((
                    key("deny"),
                    format!("{overlap:?} is both allowed and denied (overlapping rules); keep one"),
                ));
            }
            profile.permissions = rules;
        }
        Err(e) => problems.push((key_of_permission(name, written, &e.pattern), e.to_string())),
    }
    // The global layer's denies and approvals go on top (its patterns are
    // checked where it is validated).
    let none: [String; 0] = [];
    if let Ok(global_rules) = PermissionRules::parse(&none, &global.deny, &global.approval_required)
    {
        profile.permissions = profile.permissions.layered(&global_rules);
    }

    resolve_sections(&mut profile, written, global, own, problems);
    // One decision for both doors: the file tools ask the terminal's plan
    // what it keeps (the file capability may not import the terminal,
    // which needs it).
    profile.kept_by = Some(crate::capability::terminal::confine::kept::kept_from_commands);

    let limits = &written.limits;
    let defaults = Limits::default();
    profile.limits = Limits {
        memory: limits
            .memory
            .map(|s| s.0 as usize)
            .unwrap_or(defaults.memory),
        timeout: limits.timeout.map(|s| s.0).unwrap_or(defaults.timeout),
        max_output: limits
            .max_output
            .map(|s| s.0 as usize)
            .unwrap_or(defaults.max_output),
        max_arguments: limits
            .max_arguments
            .map(|s| s.0 as usize)
            .unwrap_or(defaults.max_arguments),
        concurrency: limits.concurrency.unwrap_or(defaults.concurrency),
    };
    if profile.limits.memory > MAX_MEMORY {
        problems.push((
            key("limits.memory"),
            format!(
                "{} is more than the host's maximum of 4GiB",
                profile.limits.memory
            ),
        ));
    }
    if profile.limits.memory < (1 << 20) {
        problems.push((key("limits.memory"), "must be at least 1MiB".into()));
    }
    if profile.limits.concurrency == 0 {
        problems.push((key("limits.concurrency"), "must be at least 1".into()));
    }
    if profile.limits.timeout.is_zero() {
        problems.push((key("limits.timeout"), "must be more than 0".into()));
    }
    profile.tools = super::tools::resolve_tools(name, &written.tools, global, &profile, problems);
    profile
}

/// The key of the list an invalid permission pattern is in.
fn key_of_permission(name: &str, written: &ProfileConfig, pattern: &str) -> String {
    for (field, list) in [
        ("allow", &written.allow),
        ("deny", &written.deny),
        ("approval_required", &written.approval_required),
    ] {
        if let Some(i) = list.iter().position(|p| p == pattern) {
            return format!("profiles.{name}.{field}[{i}]");
        }
    }
    format!("profiles.{name}")
}

macro_rules! resolve_sections {
    (sections: [$($(#[$sm:meta])* $skey:ident: $scap:path [$($g:ident)?]),* $(,)?],
     others: [$($rest:tt)*] $(,)?) => {
        /// Resolves each capability's table of `written` into `profile`, in
        /// the list's order (a section reads only those before it), with
        /// its `[global]` layer.
        fn resolve_sections(
            profile: &mut Profile,
            written: &ProfileConfig,
            global: &GlobalConfig,
            own: &Arc<OwnPaths>,
            problems: &mut Vec<(String, String)>,
        ) {
            $(
                $(#[$sm])*
                {
                    profile.$skey = resolve::<$scap>(
                        profile,
                        own,
                        &written.$skey,
                        global_layer!([$($g)?] global, $skey, $scap),
                        problems,
                    );
                }
            )*
        }
    };
}

/// A section's `[global.<key>]` as written, or the empty one of a section
/// without it.
macro_rules! global_layer {
    ([global] $global:ident, $key:ident, $cap:path) => {
        &$global.$key
    };
    ([] $global:ident, $key:ident, $cap:path) => {
        &<<$cap as Section>::Global as Default>::default()
    };
}
foreach_capability!(resolve_sections);

/// Resolves section `S` of `profile` (whose earlier sections are resolved)
/// from what is written and its global layer.
fn resolve<S: Section>(
    profile: &Profile,
    own: &Arc<OwnPaths>,
    written: &S::Written,
    global: &S::Global,
    problems: &mut Vec<(String, String)>,
) -> S::Rules {
    let mut cx = Resolve::new::<S>(&profile.name, &profile.workspace, own, profile, problems);
    S::resolve(written, global, &mut cx)
}
