//! What the toolkit's tools declare.

use toolhost::Host;

#[tokio::test]
async fn toolkit_tools_declare_their_toolsets_permissions_and_hints() {
    let host = Host::builder().bundled(true).build().await.unwrap();
    let specs = host.tools();
    let spec = |name: &str| {
        specs
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no tool {name}"))
            .clone()
    };
    for (name, toolset, permissions, read_only, destructive) in [
        ("read_file", "file", &["file:read"][..], true, false),
        (
            "write_file",
            "file",
            &["file:read", "file:write"],
            false,
            true,
        ),
        (
            "edit_file",
            "file",
            &["file:read", "file:write"],
            false,
            true,
        ),
        ("list_dir", "file", &["file:read"], true, false),
        ("search_files", "file", &["file:read"], true, false),
        ("file_diff", "file", &["file:read"], true, false),
        ("http_request", "web", &["network:fetch"], false, true),
        ("web_extract", "web", &["network:fetch"], true, false),
        (
            "run_command",
            "terminal",
            &["terminal:execute"],
            false,
            true,
        ),
        ("json_query", "data", &["file:read"], true, false),
        ("csv_query", "data", &["file:read"], true, false),
    ] {
        let tool = spec(name);
        assert_eq!(tool.toolset, toolset, "{name}");
        assert_eq!(tool.permissions, permissions, "{name}");
        assert_eq!(
            (tool.read_only, tool.destructive),
            (read_only, destructive),
            "{name}"
        );
        assert_eq!(tool.plugin.as_ref(), toolset, "{name}");
        assert!(tool.description.len() < 900, "{name}: {}", tool.description);
    }
}
