//! A tool interface's `call` export, found once per plugin version and
//! type-checked in the version's first instance: each call's fresh instance
//! then reaches it by index, without looking up and checking its type again
//! (which cost more than a percent of a call).

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wasmtime::AsContextMut;
use wasmtime::component::{
    ComponentExportIndex, ComponentNamedList, Instance, InstancePre, Lift, TypedFunc,
};

/// `call: func(name: string, arguments: string) -> R` of one interface of
/// one component.
pub(crate) struct CallExport<R> {
    index: ComponentExportIndex,
    /// Whether the export's type was found to be `R`'s, in an instance of
    /// the component (shared by the clones).
    checked: Arc<AtomicBool>,
    returns: PhantomData<fn() -> R>,
}

impl<R> Clone for CallExport<R> {
    fn clone(&self) -> Self {
        Self {
            index: self.index,
            checked: self.checked.clone(),
            returns: PhantomData,
        }
    }
}

impl<R> CallExport<R>
where
    R: ComponentNamedList + Lift + Send + Sync + 'static,
{
    /// The `call` of `interface` in the component of `pre`.
    pub(crate) fn new<T>(pre: &InstancePre<T>, interface: &str) -> wasmtime::Result<Self> {
        let component = pre.component();
        let index = component
            .get_export_index(None, interface)
            .and_then(|exported| component.get_export_index(Some(&exported), "call"))
            .ok_or_else(|| wasmtime::format_err!("no exported function `call` in `{interface}`"))?;
        Ok(Self {
            index,
            checked: Arc::default(),
            returns: PhantomData,
        })
    }

    /// Calls it in `instance`, which must be an instance of the component
    /// (no other has this export). Its type is checked at the first call
    /// only.
    pub(crate) async fn call<S>(
        &self,
        mut store: S,
        instance: &Instance,
        name: &str,
        arguments: &str,
    ) -> wasmtime::Result<R>
    where
        S: AsContextMut,
        S::Data: Send,
    {
        let func = instance
            .get_func(&mut store, self.index)
            .ok_or_else(|| wasmtime::format_err!("the instance has no exported function `call`"))?;
        if !self.checked.load(Ordering::Acquire) {
            func.typed::<(&str, &str), R>(&store)?;
            self.checked.store(true, Ordering::Release);
        }
        // SAFETY: `func` is the export `index` names in the component (the
        // index belongs to it: `get_func` finds nothing in an instance of
        // another), and its type was checked against these parameters and
        // `R` in an instance of that component. A function's type is the
        // component's, the same in each of its instances: the contract's
        // `call` types are strings, records and variants, no resource
        // handles whose types an instance could define anew.
        let typed = unsafe { TypedFunc::<(&str, &str), R>::new_unchecked(func) };
        typed.call_async(store, (name, arguments)).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use wasmtime::Store;
    use wasmtime::component::{Component, InstancePre};

    use super::CallExport;
    use crate::capability::grants::Grants;
    use crate::capability::sandbox::{Identity, Sandbox};
    use crate::capability::{CAPABILITIES, Profile};
    use crate::policy::Limits;
    use crate::runtime::Runtime;
    use crate::runtime::instance::new_store;

    /// Exports `good` with a `call` of the contract's shape (answering
    /// "ok") and `bad` with a `call` of another.
    const CALLS: &str = r#"
(component
  (core module $m
    (memory (export "memory") 1)
    (data (i32.const 16) "ok")
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 64))
    (func (export "call") (param i32 i32 i32 i32) (result i32)
      (i32.store (i32.const 0) (i32.const 16))
      (i32.store (i32.const 4) (i32.const 2))
      (i32.const 0))
    (func (export "other") (result i32) (i32.const 7)))
  (core instance $i (instantiate $m))
  (func $call (param "name" string) (param "arguments" string) (result string)
    (canon lift (core func $i "call") (memory (core memory $i "memory"))
      (realloc (core func $i "realloc"))))
  (func $other (result u32) (canon lift (core func $i "other")))
  (instance $good (export "call" (func $call)))
  (instance $bad (export "call" (func $other)))
  (export "good" (instance $good))
  (export "bad" (instance $bad)))
"#;

    fn pre(runtime: &Runtime) -> InstancePre<Sandbox> {
        let component = Component::new(runtime.engine(), wat::parse_str(CALLS).unwrap()).unwrap();
        runtime.linker().instantiate_pre(&component).unwrap()
    }

    fn store(runtime: &Runtime) -> Store<Sandbox> {
        let identity = Identity {
            plugin: "calls".into(),
            tool: None,
        };
        let profile = Profile::deny_all("none", "/");
        let grants = Arc::new(Grants::none(Arc::new(profile)));
        let sandbox = Sandbox::new(runtime.capabilities(), identity, &Limits::default(), grants);
        new_store(runtime.engine(), sandbox)
    }

    /// Calls `export` of `pre` in a fresh instance.
    async fn call_fresh(
        runtime: &Runtime,
        pre: &InstancePre<Sandbox>,
        export: &CallExport<(String,)>,
    ) -> wasmtime::Result<String> {
        let mut store = store(runtime);
        let instance = pre.instantiate_async(&mut store).await?;
        Ok(export.call(&mut store, &instance, "t", "{}").await?.0)
    }

    #[tokio::test]
    async fn a_call_export_is_type_checked_until_it_passes() {
        let runtime = Runtime::with_capabilities(CAPABILITIES).unwrap();
        let pre = pre(&runtime);
        let good = CallExport::<(String,)>::new(&pre, "good").unwrap();
        for _ in 0..2 {
            assert_eq!(call_fresh(&runtime, &pre, &good).await.unwrap(), "ok");
        }
        // A `call` of another type is refused at every call, not only the
        // first: no instance reaches it unchecked.
        let bad = CallExport::<(String,)>::new(&pre, "bad").unwrap();
        for _ in 0..2 {
            let refused = call_fresh(&runtime, &pre, &bad).await.unwrap_err();
            assert!(
                format!("{refused:#}").contains("type mismatch"),
                "{refused:#}"
            );
        }
        assert!(CallExport::<(String,)>::new(&pre, "missing").is_err());
    }

    #[tokio::test]
    async fn a_call_export_is_not_found_in_another_components_instance() {
        let runtime = Runtime::with_capabilities(CAPABILITIES).unwrap();
        let (pre, other) = (pre(&runtime), pre(&runtime));
        let good = CallExport::<(String,)>::new(&pre, "good").unwrap();
        assert_eq!(call_fresh(&runtime, &pre, &good).await.unwrap(), "ok");
        // Checked already, yet an instance of another component (even of the
        // same bytes) does not reach it through this export's index.
        let refused = call_fresh(&runtime, &other, &good).await.unwrap_err();
        assert!(
            refused.to_string().contains("no exported function"),
            "{refused:#}"
        );
    }
}
