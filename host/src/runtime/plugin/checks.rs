//! What a component must be to load: the checks of its bytes, its contract
//! version, what a link error means, and its declared tools.

use std::sync::Arc;

use crate::contract::adapter::Series;
use crate::contract::spec::{self, ToolSpec};
use crate::contract::{CONTRACT_SERIES, CONTRACT_VERSION, RELEASED_CONTRACTS, TOOL_INTERFACE};

/// The optional lifecycle interface, without its version.
pub(super) const LIFECYCLE_INTERFACE: &str = "toolhost:plugin/lifecycle@";

/// The optional interface of content results and icons (0.2.2), without its
/// version.
pub(super) const RICH_INTERFACE: &str = "toolhost:plugin/rich-tool@";

/// Checks the first bytes: a component, not a core module or something else.
pub(super) fn sniff(bytes: &[u8]) -> Result<(), String> {
    const MAGIC: &[u8; 4] = b"\0asm";
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err(if bytes.is_empty() {
            "the file is empty".to_string()
        } else {
            "is not a WebAssembly file (no \\0asm header)".to_string()
        });
    }
    match (
        bytes[4..6] == [1, 0],
        bytes[6..8] == [0, 0],
        bytes[6..8] == [1, 0],
    ) {
        (true, true, _) => Err("is a core WebAssembly module, not a component: build with \
             `--target wasm32-wasip2` (or wrap it with `wasm-tools component new`)"
            .to_string()),
        (_, _, true) => Ok(()),
        _ => Err(format!(
            "has an unknown WebAssembly version/layer {:02x?}",
            &bytes[4..8]
        )),
    }
}

/// The contract version of the `tool` interface a component exports, and
/// its series: every released version loads (see
/// [`crate::contract::RELEASED_CONTRACTS`]); anything else is refused with
/// the versions this host loads named.
pub(super) fn contract_version(exports: &[String]) -> Result<(String, Series), String> {
    const PREFIX: &str = "toolhost:plugin/tool@";
    let Some(version) = exports.iter().find_map(|e| e.strip_prefix(PREFIX)) else {
        let found = if exports.is_empty() {
            "nothing".to_string()
        } else {
            exports.join(", ")
        };
        return Err(format!(
            "does not export {TOOL_INTERFACE}, so it is not a toolhost plugin \
             (it exports {found}); build it against the toolhost WIT, for example with toolhost-sdk"
        ));
    };
    match Series::of(version) {
        Some(series) => Ok((version.to_string(), series)),
        None => Err(format!(
            "was built against contract toolhost:plugin@{version}, which this host does not \
             know: it speaks toolhost:plugin@{CONTRACT_VERSION} and loads every released version \
             ({}, that is {CONTRACT_SERIES}); run a toolhost that speaks {version}, or rebuild \
             the plugin against {CONTRACT_VERSION}",
            RELEASED_CONTRACTS.join(", ")
        )),
    }
}

/// Says which import could not be satisfied, in terms an author can act on.
pub(super) fn describe_link_error(error: &wasmtime::Error, imports: &[String]) -> String {
    let text = format!("{error:#}");
    let missing = imports.iter().find(|i| text.contains(i.as_str()));
    match missing {
        Some(import) => format!(
            "imports {import}, which toolhost does not provide (toolhost gives plugins \
             toolhost:plugin/{{http,terminal,log,progress}} and wasi:cli/filesystem/clocks/random/io 0.2): {text}"
        ),
        None => format!("cannot be linked against the host's imports: {text}"),
    }
}

/// Most tools one plugin may declare.
pub(super) const MAX_TOOLS: usize = 128;

/// Validates every spec; a plugin with any invalid spec is rejected whole.
pub(super) fn validate_manifest(
    plugin: &Arc<str>,
    raw: Vec<crate::contract::bindings::toolhost::plugin::types::ToolSpec>,
    mut icons: Vec<crate::contract::bindings::toolhost::plugin::types::ToolIcons>,
) -> (Vec<Arc<ToolSpec>>, Vec<String>) {
    let mut tools: Vec<Arc<ToolSpec>> = Vec::new();
    let mut problems = Vec::new();
    if raw.is_empty() {
        problems.push("declares no tools".to_string());
    }
    if raw.len() > MAX_TOOLS {
        problems.push(format!(
            "declares {} tools, more than the {MAX_TOOLS} one plugin may; split it into plugins",
            raw.len()
        ));
        return (tools, problems);
    }
    for spec in raw {
        match spec::validate(plugin, spec) {
            Ok(spec) if tools.iter().any(|t| t.name == spec.name) => {
                problems.push(format!("declares tool {:?} twice", spec.name));
            }
            Ok(mut spec) => {
                let given = icons.iter().position(|i| i.tool == spec.name);
                if let Some(given) = given.map(|at| icons.swap_remove(at)) {
                    match crate::contract::icons::check(&spec.name, given.icons) {
                        Ok(checked) => spec.icons = checked,
                        Err(mut p) => problems.append(&mut p),
                    }
                }
                tools.push(Arc::new(spec));
            }
            Err(mut p) => problems.append(&mut p),
        }
    }
    if let Some(stray) = icons.first() {
        problems.push(format!(
            "gives icons for tool {:?}, which it does not declare (or gives them twice)",
            spec::shown(&stray.tool)
        ));
    }
    (tools, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_formats() {
        assert!(sniff(b"").unwrap_err().contains("empty"));
        assert!(
            sniff(b"hello world!")
                .unwrap_err()
                .contains("not a WebAssembly file")
        );
        assert!(
            sniff(b"\0asm\x01\0\0\0")
                .unwrap_err()
                .contains("core WebAssembly module")
        );
        assert!(sniff(b"\0asm\x0d\0\x01\0").is_ok());
    }

    #[test]
    fn contract_versions() {
        let exports = |v: &str| vec![format!("toolhost:plugin/tool@{v}")];
        let loads = |v: &str| contract_version(&exports(v)).unwrap();
        assert_eq!(loads("0.1.0"), ("0.1.0".to_string(), Series::V0_1));
        assert_eq!(loads("0.2.0"), ("0.2.0".to_string(), Series::V0_2));
        assert_eq!(loads("0.2.7"), ("0.2.7".to_string(), Series::V0_2));
        for unknown in ["0.3.0", "1.0.0", "0.0.9"] {
            let refused = contract_version(&exports(unknown)).unwrap_err();
            assert!(
                refused.contains(&format!(
                    "toolhost:plugin@{unknown}, which this host does not know"
                )),
                "{refused}"
            );
            assert!(refused.contains("0.1.x and 0.2.x"), "{refused}");
        }
        assert!(
            contract_version(&[])
                .unwrap_err()
                .contains("exports nothing")
        );
    }

    #[test]
    fn a_plugin_declares_a_bounded_number_of_tools() {
        let raw = |i: usize| spec::test_spec(&format!("t{i}"));
        let plugin: Arc<str> = "p".into();
        let (tools, problems) =
            validate_manifest(&plugin, (0..MAX_TOOLS).map(raw).collect(), Vec::new());
        assert_eq!(
            (tools.len(), problems.len()),
            (MAX_TOOLS, 0),
            "{problems:?}"
        );
        let (tools, problems) =
            validate_manifest(&plugin, (0..=MAX_TOOLS).map(raw).collect(), Vec::new());
        assert!(tools.is_empty());
        assert!(problems[0].contains("declares 129 tools"), "{problems:?}");
    }
}
