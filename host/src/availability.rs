//! Whether a tool is offered to a caller: every permission it declares must
//! be allowed by the caller's profile, and every environment variable it
//! requires must be set on the host and passed by the profile.

use crate::capability::Profile;
use crate::capability::env::ENV_READ;
use crate::contract::spec::ToolSpec;
use crate::policy::PermissionDecision;

/// `Ok` when the tool is offered under `profile`; otherwise why it is hidden.
pub(crate) fn check(spec: &ToolSpec, profile: &Profile) -> Result<(), String> {
    if let Some(key) = profile.disabled(&spec.name) {
        return Err(format!(
            "it is switched off by {key} (profile {:?})",
            profile.name
        ));
    }
    let profile = profile.applied(&spec.name);
    if let Err(refusal) = profile.permissions.check_all(&spec.permissions) {
        return Err(format!("{refusal} (profile {:?})", profile.name));
    }
    if spec.requires_env.is_empty() {
        return Ok(());
    }
    if !matches!(
        profile.permissions.decide(ENV_READ.as_str()),
        PermissionDecision::Allowed | PermissionDecision::NeedsApproval { .. }
    ) {
        return Err(format!(
            "it requires environment variables ({}) and profile {:?} does not allow {ENV_READ}",
            spec.requires_env.join(", "),
            profile.name
        ));
    }
    for name in &spec.requires_env {
        if !profile.env.allows(name) {
            return Err(format!(
                "it requires the environment variable {name}, which profile {:?} does not pass \
                 to tools (add it to env.allow)",
                profile.name
            ));
        }
        if std::env::var_os(name).is_none() {
            return Err(format!(
                "it requires the environment variable {name}, which is not set"
            ));
        }
    }
    Ok(())
}
