//! The registry's rules on real (declarative) plugin versions: a generation
//! per change, name collisions, refused replacements, removed tools.

use std::sync::Arc;

use super::*;
use crate::runtime::Runtime;
use crate::source::PluginSource;
use crate::toolsets::Catalog;

/// A declarative plugin `name` whose tools are `tools`, and `version` as a
/// description so two versions differ.
async fn plugin(name: &str, tools: &[&str], version: u32) -> Arc<PluginVersion> {
    let mut text = String::from("toolset = \"t\"\nbase_url = \"http://127.0.0.1:9\"\n");
    for tool in tools {
        text.push_str(&format!(
            "[[tools]]\nname = \"{tool}\"\ndescription = \"Version {version}.\"\nurl = \"/{tool}\"\n"
        ));
    }
    let runtime = Runtime::shared().unwrap();
    let source = PluginSource::File(format!("/plugins/{name}.toml").into());
    Arc::new(
        PluginVersion::declarative(&runtime, name, source, &text, None)
            .await
            .unwrap(),
    )
}

fn tool_names(generation: &Generation) -> Vec<String> {
    generation.specs().map(|spec| spec.name.clone()).collect()
}

#[tokio::test]
async fn each_change_is_a_new_generation_and_old_snapshots_stay_as_they_were() {
    let registry = Registry::default();
    let empty = registry.snapshot();
    let added = registry.add(plugin("p", &["a", "b"], 1).await).unwrap();
    assert!(added.replaced.is_none() && added.collisions.is_none());
    let first = registry.snapshot();
    assert_eq!(first.number(), empty.number() + 1);
    assert_eq!(tool_names(&first), ["a", "b"]);
    assert!(first.has("a") && !first.has("c"));

    let added = registry.add(plugin("p", &["a", "c"], 2).await).unwrap();
    let replaced = added.replaced.expect("the first version is replaced");
    assert_eq!(replaced.tools().len(), 2);
    let second = registry.snapshot();
    assert_eq!(second.number(), first.number() + 1);
    assert_eq!(
        tool_names(&second),
        ["a", "c"],
        "b went with the old version"
    );
    assert_eq!(tool_names(&first), ["a", "b"], "a snapshot does not change");
    assert_eq!(tool_names(&empty), Vec::<String>::new());
}

#[tokio::test]
async fn a_new_plugin_loses_only_its_tools_whose_names_are_taken() {
    let registry = Registry::default();
    registry.add(plugin("first", &["shared"], 1).await).unwrap();
    let added = registry
        .add(plugin("second", &["shared", "own"], 1).await)
        .unwrap();
    let collisions = added.collisions.expect("the taken name is reported");
    assert_eq!(collisions.plugin, "second");
    assert!(
        collisions.problems[0].contains("tool \"shared\" is already provided by plugin \"first\""),
        "{collisions:?}"
    );
    let now = registry.snapshot();
    assert_eq!(&**now.tool("shared").unwrap().plugin.name(), "first");
    assert_eq!(&**now.tool("own").unwrap().plugin.name(), "second");
}

#[tokio::test]
async fn a_replacement_that_takes_another_plugins_tool_is_refused_whole() {
    let registry = Registry::default();
    registry.add(plugin("first", &["shared"], 1).await).unwrap();
    let working = plugin("second", &["own"], 1).await;
    registry.add(working.clone()).unwrap();
    let before = registry.snapshot().number();

    let error = registry
        .add(plugin("second", &["own", "shared", "more"], 2).await)
        .unwrap_err();
    assert!(
        error.problems.last().unwrap().contains("keeps serving"),
        "{error:?}"
    );
    let now = registry.snapshot();
    assert_eq!(now.number(), before, "nothing changed");
    assert!(Arc::ptr_eq(now.plugin("second").unwrap(), &working));
    assert!(!now.has("more"));
}

#[tokio::test]
async fn a_removed_plugins_tools_are_remembered_until_a_plugin_provides_them_again() {
    let registry = Registry::default();
    registry.add(plugin("p", &["a"], 1).await).unwrap();
    assert!(registry.remove("nobody").is_none());
    let removed = registry.remove("p").expect("p was loaded");
    assert_eq!(&**removed.name(), "p");
    let now = registry.snapshot();
    assert!(now.tool("a").is_none());
    assert_eq!(now.removed("a"), Some("p"));

    registry.add(plugin("q", &["a"], 1).await).unwrap();
    let now = registry.snapshot();
    assert_eq!(now.removed("a"), None);
    assert_eq!(&**now.tool("a").unwrap().plugin.name(), "q");
}
