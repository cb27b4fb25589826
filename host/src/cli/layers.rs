//! `toolhost check --profile P [--tool T]`: a caller's effective permissions,
//! layer by layer (global, session, profile, tool, parameters), and what they
//! come to for each tool.

use std::fmt::Write as _;

use crate::capability::Profile;
use crate::config::Config;
use crate::contract::spec::ToolSpec;
use crate::policy::canonical::is_url_glob;
use crate::policy::{Matcher, PermissionDecision, PermissionPattern};

/// The report for `profile` (resolved in the base directory) and the
/// loaded `tools`; with `only`, of that tool alone.
pub(super) fn report(
    config: &Config,
    profile: &Profile,
    tools: &[ToolSpec],
    only: Option<&str>,
) -> String {
    let shown = |tool: &str| only.is_none_or(|only| only == tool);
    let mut out = String::new();
    let global = &config.global;
    let _ = writeln!(
        out,
        "profile {:?} (workspace {})",
        profile.name,
        profile.workspace.display()
    );
    let _ = writeln!(out, "\n1. global ([global], on top of every profile)");
    line(&mut out, "deny", &global.deny);
    line(&mut out, "approval_required", &global.approval_required);
    line(&mut out, "file.deny", &global.file.deny);
    line(
        &mut out,
        "terminal.deny_commands",
        &global.terminal.deny_commands,
    );
    let _ = writeln!(
        out,
        "\n2. session: none here; a client narrows its own session (MCP initialize \
         `capabilities.experimental.toolhost.narrow`, HTTP `POST /v1/sessions`), never wider"
    );
    let _ = writeln!(out, "\n3. profile {:?} and its tools", profile.name);
    if let Some(written) = config.profiles.get(&profile.name) {
        line(&mut out, "allow", &written.allow);
        line(&mut out, "deny", &written.deny);
        line(&mut out, "approval_required", &written.approval_required);
    }
    for rules in profile.tools.values().filter(|r| shown(&r.tool)) {
        let _ = writeln!(out, "   tool {} ({})", rules.tool, rules.keys.join(", "));
        if let Some(key) = &rules.disabled_by {
            let _ = writeln!(out, "     switched off by {key}");
        }
        patterns(&mut out, "  allow", &rules.permissions.allow);
        patterns(&mut out, "  deny", &rules.permissions.deny);
        patterns(
            &mut out,
            "  approval_required",
            &rules.permissions.approval_required,
        );
    }
    let _ = writeln!(out, "\n4. parameters");
    let mut any = false;
    for rules in profile.tools.values().filter(|r| shown(&r.tool)) {
        for rule in &rules.arguments {
            any = true;
            let kind = match &rule.matcher {
                Matcher::Globs(globs) if globs.iter().any(|g| is_url_glob(g)) => {
                    "; canonical URLs only"
                }
                Matcher::Globs(_) => {
                    "; on a tool that declares file permissions, every path it touches"
                }
                _ => "",
            };
            let _ = writeln!(
                out,
                "   {} {}: {} ({}{kind})",
                rules.tool, rule.pointer, rule.matcher, rule.key
            );
        }
    }
    if !any {
        let _ = writeln!(out, "   (none)");
    }
    let _ = writeln!(out, "\neffective");
    for spec in tools.iter().filter(|t| shown(&t.name)) {
        effective(&mut out, profile, spec);
    }
    out
}

/// What the layers come to for one tool: offered or hidden, and each of its
/// permissions' decision.
fn effective(out: &mut String, profile: &Profile, spec: &ToolSpec) {
    match crate::availability::check(spec, profile) {
        Ok(()) => {
            let _ = writeln!(out, "   {}: offered", spec.name);
        }
        Err(reason) => {
            let _ = writeln!(out, "   {}: hidden, {reason}", spec.name);
        }
    }
    let applied = profile.applied(&spec.name);
    for permission in &spec.permissions {
        let decision = match applied.permissions.decide(permission) {
            PermissionDecision::Allowed => "allowed".to_string(),
            PermissionDecision::NeedsApproval { pattern } => {
                format!("needs approval (approval_required \"{pattern}\")")
            }
            PermissionDecision::Denied { pattern } => format!("denied (deny \"{pattern}\")"),
            PermissionDecision::NotGranted => "not granted (no allow pattern)".to_string(),
            PermissionDecision::Narrowed { rule } => format!("narrowed away ({rule})"),
        };
        let _ = writeln!(out, "     {permission}: {decision}");
    }
}

fn line(out: &mut String, name: &str, values: &[String]) {
    if values.is_empty() {
        let _ = writeln!(out, "   {name}: (none)");
    } else {
        let _ = writeln!(out, "   {name}: {}", values.join(", "));
    }
}

fn patterns(out: &mut String, name: &str, values: &[PermissionPattern]) {
    if !values.is_empty() {
        let texts: Vec<String> = values.iter().map(ToString::to_string).collect();
        line(out, name, &texts);
    }
}
