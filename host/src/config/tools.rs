//! The tool and parameter layers as written (`[global.tools.T]`,
//! `[profiles.P.tools.T]`), resolved into each profile's [`ToolRules`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::Config;
use super::file::{GlobalConfig, ToolConfig};
use crate::capability::{Profile, ToolRules};
use crate::policy::canonical::{UrlRule, is_url_glob};
use crate::policy::layers::check_pointer;
use crate::policy::{ArgumentRule, Confinement, Matcher, PermissionRules};

/// The rules of every tool the global layer or the profile names, each with
/// the profile as it applies to that tool. `profile` is complete but for
/// its tools.
pub(super) fn resolve_tools(
    name: &str,
    written: &BTreeMap<String, ToolConfig>,
    global: &GlobalConfig,
    profile: &Profile,
    problems: &mut Vec<(String, String)>,
) -> BTreeMap<String, Arc<ToolRules>> {
    let tools: BTreeSet<&String> = global.tools.keys().chain(written.keys()).collect();
    let mut resolved = BTreeMap::new();
    for tool in tools {
        let layers = [
            (format!("global.tools.{tool}"), global.tools.get(tool)),
            (format!("profiles.{name}.tools.{tool}"), written.get(tool)),
        ];
        let mut keys = Vec::new();
        let mut disabled_by = None;
        let mut permissions = PermissionRules::default();
        let mut arguments = Vec::new();
        for (key, layer) in layers {
            let Some(layer) = layer else { continue };
            if layer.enabled == Some(false) && disabled_by.is_none() {
                disabled_by = Some(format!("{key}.enabled = false"));
            }
            match PermissionRules::parse(&layer.allow, &layer.deny, &layer.approval_required) {
                Ok(own) => permissions = permissions.layered(&own),
                Err(e) => problems.push((key.clone(), e.to_string())),
            }
            for (pointer, value) in &layer.arguments {
                let at = format!("{key}.arguments.{pointer}");
                match argument_rule(pointer, value) {
                    Ok(matcher) => arguments.push(ArgumentRule {
                        key: at,
                        pointer: pointer.clone(),
                        matcher,
                    }),
                    Err(problem) => problems.push((at, problem)),
                }
            }
            keys.push(key);
        }
        let mut applied = profile.clone();
        applied.permissions = profile.permissions.layered(&permissions);
        applied.tools = BTreeMap::new();
        applied.network.url_rules = arguments
            .iter()
            .filter_map(|rule| match &rule.matcher {
                Matcher::Globs(globs) if globs.iter().any(|g| is_url_glob(g)) => Some(UrlRule {
                    key: rule.key.clone(),
                    globs: globs.clone(),
                }),
                _ => None,
            })
            .collect();
        let confined = confinement(&arguments, profile.workspace()).map(|confinement| {
            let mut confined = applied.clone();
            confined.file = applied.file.confined(confinement);
            Arc::new(confined)
        });
        let rules = ToolRules {
            tool: tool.clone(),
            keys,
            disabled_by,
            permissions,
            arguments,
            profile: Arc::new(applied),
            confined,
        };
        resolved.insert(tool.clone(), Arc::new(rules));
    }
    resolved
}

/// The globs of the path rules among `arguments` (glob rules not written
/// as URLs), resolved in `workspace`; `None` if there are none.
fn confinement(arguments: &[ArgumentRule], workspace: &std::path::Path) -> Option<Confinement> {
    let mut confinement: Option<Confinement> = None;
    for rule in arguments {
        let Matcher::Globs(globs) = &rule.matcher else {
            continue;
        };
        if !rule.matcher.is_path_rule(true) {
            continue;
        }
        match &mut confinement {
            Some(confinement) => confinement.add(&rule.key, globs, workspace),
            None => confinement = Some(Confinement::new(&rule.key, globs, workspace)),
        }
    }
    confinement
}

/// `Err` for a glob written as a URL that no canonical URL can match (its
/// text before the first `*` is not in canonical form), naming the form.
fn canonical_url_glob(glob: &str) -> Result<(), String> {
    if !is_url_glob(glob) {
        return Ok(());
    }
    let literal = glob.split('*').next().unwrap_or_default();
    // Only a literal that goes as far as the path is a URL by itself (not
    // `https://` before `*.host`, nor `http://h:` before a port).
    let reaches_path = literal
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains('/'));
    if !reaches_path {
        return Ok(());
    }
    match crate::policy::canonical::canonical_url(literal) {
        Err(why) => Err(format!(
            "the glob {glob:?} matches only URLs not in canonical form, which are refused: \
             {literal:?} {}",
            why.trim_start_matches("it ")
        )),
        Ok(()) => Ok(()),
    }
}

/// One restriction: a list of globs, or a table with exactly one of
/// `glob`, `regex`, `enum`, or `min`/`max`.
fn argument_rule(pointer: &str, value: &Value) -> Result<Matcher, String> {
    check_pointer(pointer)?;
    let globs = |value: &Value| -> Result<Matcher, String> {
        let items = value.as_array().ok_or("glob takes a list of strings")?;
        let globs = items
            .iter()
            .map(|g| g.as_str().map(String::from))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| "glob takes a list of strings".to_string())?;
        globs.iter().try_for_each(|glob| canonical_url_glob(glob))?;
        Ok(Matcher::Globs(globs))
    };
    let table = match value {
        Value::Array(_) => return globs(value),
        Value::Object(table) => table,
        _ => {
            return Err(
                "write a list of globs, or a table with one of glob, regex, enum, min/max".into(),
            );
        }
    };
    let kinds: Vec<&str> = table.keys().map(String::as_str).collect();
    match kinds.as_slice() {
        ["glob"] => globs(&table["glob"]),
        ["regex"] => Matcher::regex(table["regex"].as_str().ok_or("regex takes a string")?),
        ["enum"] => match &table["enum"] {
            Value::Array(values) if !values.is_empty() => Ok(Matcher::OneOf(values.clone())),
            _ => Err("enum takes a non-empty list of values".into()),
        },
        bounds if !bounds.is_empty() && bounds.iter().all(|k| *k == "min" || *k == "max") => {
            let bound = |k: &str| -> Result<Option<f64>, String> {
                match table.get(k) {
                    None => Ok(None),
                    Some(v) => v.as_f64().map(Some).ok_or(format!("{k} takes a number")),
                }
            };
            let (min, max) = (bound("min")?, bound("max")?);
            if let (Some(lo), Some(hi)) = (min, max)
                && lo > hi
            {
                return Err(format!("min ({lo}) is above max ({hi})"));
            }
            Ok(Matcher::Range { min, max })
        }
        _ => Err(format!(
            "has keys [{}]; use one of glob, regex, enum, or min and/or max",
            kinds.join(", ")
        )),
    }
}

/// Where an approval rule is written: the TOML table that holds
/// `approval_required` with `pattern`, matched for `tool` under `profile`
/// (the tool's layers first, then the profile's, then `[global]`).
pub(crate) fn approval_table(
    config: Option<&Config>,
    profile: &str,
    tool: &str,
    pattern: &str,
) -> String {
    let holds = |patterns: &[String]| patterns.iter().any(|p| p == pattern);
    let written = config.and_then(|c| c.profiles.get(profile));
    let global = config.map(|c| &c.global);
    if written
        .and_then(|w| w.tools.get(tool))
        .is_some_and(|t| holds(&t.approval_required))
    {
        return format!("[profiles.{profile}.tools.{tool}]");
    }
    if global
        .and_then(|g| g.tools.get(tool))
        .is_some_and(|t| holds(&t.approval_required))
    {
        return format!("[global.tools.{tool}]");
    }
    if written.is_none_or(|w| holds(&w.approval_required)) {
        return format!("[profiles.{profile}]");
    }
    if global.is_some_and(|g| holds(&g.approval_required)) {
        return "[global]".into();
    }
    format!("[profiles.{profile}]")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::config::ConfigSource;

    #[test]
    fn restrictions_are_read_in_every_form_and_bad_ones_say_why() {
        assert!(matches!(
            argument_rule("/u", &json!(["a*"])),
            Ok(Matcher::Globs(_))
        ));
        assert!(matches!(
            argument_rule("/u", &json!({"glob": ["a*"]})),
            Ok(Matcher::Globs(_))
        ));
        assert!(matches!(
            argument_rule("/u", &json!({"regex": "a+"})),
            Ok(Matcher::Regex(_))
        ));
        assert!(matches!(
            argument_rule("/u", &json!({"enum": [1, "x"]})),
            Ok(Matcher::OneOf(_))
        ));
        assert!(matches!(
            argument_rule("/n", &json!({"min": 1})),
            Ok(Matcher::Range {
                min: Some(_),
                max: None
            })
        ));
        for (bad, says) in [
            (json!("a*"), "list of globs"),
            (json!({"regex": "("}), "invalid regular expression"),
            (json!({"enum": []}), "non-empty"),
            (json!({"min": 5, "max": 1}), "above max"),
            (json!({"glob": ["a"], "regex": "b"}), "use one of"),
            (json!(["HTTP://Api.example/*"]), "\"http://api.example/\""),
            (json!(["http://h/a/../b/*"]), "\"http://h/b/\""),
            (json!([1]), "list of strings"),
        ] {
            let problem = argument_rule("/u", &bad).unwrap_err();
            assert!(problem.contains(says), "{bad}: {problem}");
        }
        assert!(
            argument_rule("u", &json!(["a"]))
                .unwrap_err()
                .contains("JSON pointer")
        );
    }

    #[test]
    fn the_rule_is_found_in_the_layer_that_writes_it() {
        let config = Config::parse(
            "default_profile = \"dev\"\n[global]\napproval_required = [\"network:*\"]\n\
             [global.tools.fetch]\napproval_required = [\"env:*\"]\n\
             [profiles.dev]\nallow = [\"*\"]\napproval_required = [\"terminal:*\"]\n\
             [profiles.dev.tools.run]\napproval_required = [\"file:write\"]\n",
            ConfigSource::Embedded,
            Path::new("/ws"),
        )
        .unwrap();
        let table = |tool: &str, pattern: &str| approval_table(Some(&config), "dev", tool, pattern);
        assert_eq!(table("run", "file:write"), "[profiles.dev.tools.run]");
        assert_eq!(table("fetch", "env:*"), "[global.tools.fetch]");
        assert_eq!(table("run", "terminal:*"), "[profiles.dev]");
        assert_eq!(table("run", "network:*"), "[global]");
        assert_eq!(approval_table(None, "p", "run", "x"), "[profiles.p]");
    }
}
