//! The recipe end to end: a `[profiles.P.tally]` table read by
//! `Config::parse` and checked at its key, the profile's rules reaching a
//! real store through the list's `CAPABILITIES`, the permission granting
//! the import, and every use reaching the audit.

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::Component;

use super::TALLY_USE;
use crate::capability::CAPABILITIES;
use crate::capability::grants::Grants;
use crate::capability::sandbox::{Identity, Sandbox};
use crate::config::{Config, ConfigSource};
use crate::contract::bindings::toolhost::plugin::types::ToolSpec as WitToolSpec;
use crate::contract::spec::{test_spec, validate};
use crate::policy::Limits;
use crate::runtime::Runtime;
use crate::runtime::instance::new_store;

/// A component that calls `next` three times and returns the answers.
const THRICE: &str = r#"
(component
  (import "toolhost:test/tally" (instance $tally (export "next" (func (result u32)))))
  (core func $next (canon lower (func $tally "next")))
  (core module $m
    (import "host" "next" (func $next (result i32)))
    (memory (export "memory") 1)
    (func (export "thrice") (result i32)
      (i32.store (i32.const 0) (call $next))
      (i32.store (i32.const 4) (call $next))
      (i32.store (i32.const 8) (call $next))
      (i32.const 0)))
  (core instance $i (instantiate $m (with "host" (instance (export "next" (func $next))))))
  (func (export "thrice") (result (tuple u32 u32 u32))
    (canon lift (core func $i "thrice") (memory (core memory $i "memory")))))
"#;

/// The profile `p` of a config whose `[profiles.p]` holds `table`.
fn parse(table: &str) -> Result<Config, crate::config::ConfigError> {
    let text = format!("default_profile = \"p\"\n[profiles.p]\n{table}\n");
    Config::parse(
        &text,
        ConfigSource::File("toolhost.toml".into()),
        Path::new("/"),
    )
}

/// Runs `thrice` under profile `p` of `table`, for a tool declaring
/// `declared`: its answers and the uses it recorded.
async fn run_thrice(table: &str, declared: &[&str]) -> ((u32, u32, u32), Vec<(String, bool)>) {
    let config = parse(table).unwrap();
    let profile = config.profile("p", None).unwrap();
    let runtime = Runtime::with_capabilities(CAPABILITIES).unwrap();
    let tool = WitToolSpec {
        permissions: declared.iter().map(|p| p.to_string()).collect(),
        ..test_spec("count")
    };
    let tool = validate(&"tally".into(), tool).unwrap();
    let grants = Grants::for_tools(profile, [&tool], None, "count");
    let identity = Identity {
        plugin: "tally".into(),
        tool: Some("count".into()),
    };
    let sandbox = Sandbox::new(
        runtime.capabilities(),
        identity,
        &Limits::default(),
        Arc::new(grants),
    );
    let mut store = new_store(runtime.engine(), sandbox);
    let component = Component::new(runtime.engine(), wat::parse_str(THRICE).unwrap()).unwrap();
    let instance = runtime
        .linker()
        .instantiate_async(&mut store, &component)
        .await
        .unwrap();
    let thrice = instance
        .get_typed_func::<(), ((u32, u32, u32),)>(&mut store, "thrice")
        .unwrap();
    let (answers,) = thrice.call_async(&mut store, ()).await.unwrap();
    let uses = store
        .data()
        .capability_uses()
        .into_iter()
        .map(|used| {
            assert_eq!(used.capability, "tally");
            (used.target, used.allowed)
        })
        .collect();
    (answers, uses)
}

#[tokio::test]
async fn a_capability_from_its_folder_and_one_list_entry_is_configured_linked_granted_and_audited()
{
    let granted = r#"allow = ["tally:use"]"#;
    let (answers, uses) = run_thrice(&format!("{granted}\ntally.max = 2"), &["tally:use"]).await;
    assert_eq!(
        answers,
        (1, 2, 0),
        "the count lives in the store, up to tally.max"
    );
    let next = |allowed| ("next".to_string(), allowed);
    assert_eq!(uses, [next(true), next(true), next(false)]);
    // Without tally.max, no limit.
    let (answers, _) = run_thrice(granted, &["tally:use"]).await;
    assert_eq!(answers, (1, 2, 3));
}

#[tokio::test]
async fn a_capability_refuses_without_its_permission() {
    let next = |allowed| ("next".to_string(), allowed);
    // Declared but not allowed by the profile.
    let (answers, uses) = run_thrice("", &[TALLY_USE.as_str()]).await;
    assert_eq!(answers, (0, 0, 0));
    assert_eq!(uses, [next(false), next(false), next(false)]);
    // Allowed by the profile but not declared by the tool.
    let (answers, _) = run_thrice(r#"allow = ["tally:*"]"#, &[]).await;
    assert_eq!(answers, (0, 0, 0));
    // Declared, and allowed through a pattern of the profile.
    let (answers, _) = run_thrice(r#"allow = ["tally:*"]"#, &[TALLY_USE.as_str()]).await;
    assert_eq!(answers, (1, 2, 3));
}

#[test]
fn its_table_is_checked_at_its_key() {
    let problems = parse("tally.max = 0").unwrap_err().problems;
    assert_eq!(
        problems,
        [(
            "profiles.p.tally.max".to_string(),
            "must be at least 1 (omit it for no limit)".to_string()
        )]
    );
    let problems = parse("tally.maxx = 1").unwrap_err().problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].0, "profiles.p.tally.maxx");
    assert!(
        problems[0]
            .1
            .starts_with("unknown field `maxx`, expected `max`"),
        "{problems:?}"
    );
}
