//! Unit tests of `runtime/plugin/load`.

use wasmtime::component::Component;

use super::needs_host;
use crate::runtime::engine::Runtime;

fn needs(wat: &str) -> bool {
    let runtime = Runtime::shared().unwrap();
    let component = Component::new(runtime.engine(), wat::parse_str(wat).unwrap()).unwrap();
    needs_host(runtime.engine(), &component.component_type())
}

#[test]
fn only_a_component_that_imports_no_function_goes_without_wasi_and_capabilities() {
    // Imports nothing, or only types (a lean plugin imports the contract's
    // types): nothing it runs can reach the host.
    assert!(!needs("(component)"));
    assert!(!needs(
        r#"(component
             (import "toolhost:plugin/types@0.2.2" (instance
               (type $kind (enum "a" "b"))
               (export "kind" (type (eq $kind))))))"#
    ));
    // A function, directly or in an instance, or a resource: it can.
    assert!(needs(r#"(component (import "f" (func)))"#));
    assert!(needs(
        r#"(component
             (import "wasi:cli/environment@0.2.0" (instance
               (type $kind (enum "a" "b"))
               (export "kind" (type (eq $kind)))
               (export "get-environment" (func (result (list (tuple string string))))))))"#
    ));
    assert!(needs(
        r#"(component
             (import "wasi:io/streams@0.2.0" (instance
               (export "output-stream" (type (sub resource))))))"#
    ));
    assert!(needs(
        r#"(component
             (import "outer" (instance
               (export "inner" (instance (export "f" (func)))))))"#
    ));
}
