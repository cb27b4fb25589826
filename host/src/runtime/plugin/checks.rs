//! What a component must be to load: the checks of its bytes, its contract
//! version, what a link error means, and its declared tools.

use std::sync::Arc;

use crate::contract::spec::{self, ToolSpec};

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
