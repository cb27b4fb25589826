//! A capability added the way the README's recipe says: one module (here,
//! `counter` below) and one entry in a list. The runtime links it, each store
//! gets its state, its permission grants it, and its uses reach the audit.

use std::sync::Arc;

use wasmtime::component::{Component, Linker};
use wasmtime_wasi::WasiCtxBuilder;

use super::CAPABILITIES;
use crate::capability::Profile;
use crate::capability::grants::Grants;
use crate::capability::sandbox::{
    Capability, CapabilityInfo, Identity, InRoom, Linked, Room, Sandbox,
};
use crate::contract::Permission;
use crate::contract::bindings::toolhost::plugin::types::ToolSpec as WitToolSpec;
use crate::contract::spec::{test_spec, validate};
use crate::policy::Limits;
use crate::policy::PermissionRules;
use crate::runtime::Runtime;
use crate::runtime::instance::new_store;

/// The capability's module.
mod counter {
    use super::*;

    wasmtime::component::bindgen!({
        inline: "
            package toolhost:test;
            interface counter { next: func() -> u32; }
            world counted { import counter; }
        ",
        imports: { default: async | trappable },
    });

    use self::toolhost::test::counter::{self as wit, Host};

    /// The permission that grants it.
    pub(super) const PERMISSION: Permission = Permission::new("counter:use");

    /// A number that goes up by one at each `next`, per store.
    pub(super) struct Counter;

    impl Capability for Counter {
        const INFO: CapabilityInfo = CapabilityInfo {
            name: "counter",
            permissions: &[PERMISSION],
            section: None,
            description: "a number that goes up",
            each: &[],
        };
        type State = u32;

        fn state(_: &Grants, _: &mut WasiCtxBuilder) -> u32 {
            0
        }

        fn add_to_linker(linker: &mut Linker<Sandbox>) -> wasmtime::Result<()> {
            wit::add_to_linker::<_, InRoom<Self>>(linker, Sandbox::room::<Self>)
        }
    }

    impl Host for Room<'_, Counter> {
        async fn next(&mut self) -> wasmtime::Result<u32> {
            if !self.granted() {
                self.refused("next", format!("{PERMISSION} is not granted"));
                return Ok(0);
            }
            *self.state += 1;
            self.allowed("next");
            Ok(*self.state)
        }
    }
}

/// The list: the host's capabilities are untouched, this one is added.
static WITH_COUNTER: &[Linked] = &[Linked::of::<counter::Counter>()];

/// A component that calls `next` twice and returns the second answer.
const TWICE: &str = r#"
(component
  (import "toolhost:test/counter" (instance $counter (export "next" (func (result u32)))))
  (core func $next (canon lower (func $counter "next")))
  (core module $m
    (import "host" "next" (func $next (result i32)))
    (func (export "twice") (result i32) (drop (call $next)) (call $next)))
  (core instance $i (instantiate $m (with "host" (instance (export "next" (func $next))))))
  (func (export "twice") (result u32) (canon lift (core func $i "twice"))))
"#;

/// Runs `twice` under a profile that allows `allowed` for a tool declaring
/// `declared`: its answer and the uses it recorded.
async fn run_twice(allowed: &[&str], declared: &[&str]) -> (u32, Vec<(String, bool)>) {
    let runtime = Runtime::with_capabilities(WITH_COUNTER).unwrap();
    let mut profile = Profile::deny_all("test", "/");
    profile.permissions = PermissionRules::parse(allowed, &[], &[]).unwrap();
    let tool = WitToolSpec {
        permissions: declared.iter().map(|p| p.to_string()).collect(),
        ..test_spec("count")
    };
    let tool = validate(&"counter".into(), tool).unwrap();
    let grants = Grants::for_tools(Arc::new(profile), [&tool], None, "count");
    let identity = Identity {
        plugin: "counter".into(),
        tool: Some("count".into()),
    };
    let sandbox = Sandbox::new(
        runtime.capabilities(),
        identity,
        &Limits::default(),
        Arc::new(grants),
    );
    let mut store = new_store(runtime.engine(), sandbox);
    let component = Component::new(runtime.engine(), wat::parse_str(TWICE).unwrap()).unwrap();
    let instance = runtime
        .linker()
        .instantiate_async(&mut store, &component)
        .await
        .unwrap();
    let twice = instance
        .get_typed_func::<(), (u32,)>(&mut store, "twice")
        .unwrap();
    let (answer,) = twice.call_async(&mut store, ()).await.unwrap();
    let uses = store
        .data()
        .capability_uses()
        .into_iter()
        .map(|used| {
            assert_eq!(used.capability, "counter");
            (used.target, used.allowed)
        })
        .collect();
    (answer, uses)
}

#[tokio::test]
async fn a_capability_from_one_module_and_one_list_entry_is_linked_granted_and_audited() {
    let runtime = Runtime::with_capabilities(WITH_COUNTER).unwrap();
    let names: Vec<_> = runtime.capability_infos().map(|info| info.name).collect();
    assert_eq!(names, ["counter"]);

    let (answer, uses) = run_twice(
        &[counter::PERMISSION.as_str()],
        &[counter::PERMISSION.as_str()],
    )
    .await;
    assert_eq!(answer, 2, "the state lives in the store and goes up");
    assert_eq!(uses, [("next".into(), true), ("next".into(), true)]);
}

#[tokio::test]
async fn a_capability_refuses_without_its_permission() {
    // Declared but not allowed by the profile.
    let (answer, uses) = run_twice(&[], &[counter::PERMISSION.as_str()]).await;
    assert_eq!(answer, 0);
    assert_eq!(uses, [("next".into(), false), ("next".into(), false)]);
    // Allowed by the profile but not declared by the tool.
    let (answer, _) = run_twice(&["counter:*"], &[]).await;
    assert_eq!(answer, 0);
    // Declared, and allowed through a pattern of the profile.
    let (answer, _) = run_twice(&["counter:*"], &[counter::PERMISSION.as_str()]).await;
    assert_eq!(answer, 2);
}

#[test]
fn a_capability_is_described_by_the_permissions_declared() {
    let file = CAPABILITIES
        .iter()
        .find(|c| c.info.name == "file")
        .expect("the file capability is linked");
    let read = file.info.describe(&["file:read"]);
    // Only what file:read gives: reading (in file.write grants too).
    assert_eq!(read, file.info.each[0]);
    assert!(
        read.starts_with("read in") && !read.contains("; write"),
        "{read}"
    );
    let both = file.info.describe(&["file:read", "file:write"]);
    assert!(both.contains("; write in"), "{both}");
    // One permission, one description.
    for linked in CAPABILITIES {
        if linked.info.each.is_empty() {
            let all: Vec<&str> = linked.info.permissions.iter().map(|p| p.as_str()).collect();
            assert_eq!(linked.info.describe(&all), linked.info.description);
        } else {
            assert_eq!(linked.info.each.len(), linked.info.permissions.len());
        }
    }
}
