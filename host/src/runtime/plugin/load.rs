//! Loading a plugin version: compiling (or taking from the cache) its
//! component, linking it, and asking it to describe its tools.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, types};

use super::checks::*;
use super::version::{Linked, PluginVersion};
use crate::capability::grants::Grants;
use crate::capability::sandbox::{Identity, Sandbox};
use crate::contract::ContentHash;
use crate::contract::adapter::{
    Described, LIFECYCLE_INTERFACE, LifecycleExports, RICH_INTERFACE, ToolExports, contract_version,
};
use crate::contract::spec::ToolSpec;
use crate::policy::Limits;
use crate::runtime::cache::{ArtifactCache, Compiled};
use crate::runtime::engine::Runtime;
use crate::runtime::instance::{instantiate_tool, new_store, trap_error};
use crate::runtime::stateful::Sessions;
use crate::source::{LoadError, PluginSource, declarative};
use declarative::Declared;

/// Limits of the one-off instance that runs `describe` at load time.
const DESCRIBE_LIMITS: Limits = Limits {
    memory: 256 << 20,
    timeout: Duration::from_secs(10),
    max_output: 0,
    max_arguments: 0,
    concurrency: 1,
};

/// Grants of instances that run without a call: `describe`, benchmarks.
pub(super) fn no_grants() -> Arc<Grants> {
    static NONE: std::sync::OnceLock<Arc<Grants>> = std::sync::OnceLock::new();
    NONE.get_or_init(|| {
        Arc::new(Grants::none(Arc::new(
            crate::capability::Profile::deny_all("none", "/"),
        )))
    })
    .clone()
}

impl PluginVersion {
    /// Loads a plugin: checks the bytes are a component of our world, compiles
    /// it on a blocking thread (or takes it from `cache`), asks it to describe
    /// itself and validates the answer.
    pub async fn load(
        runtime: &Arc<Runtime>,
        name: &str,
        source: PluginSource,
        bytes: Arc<[u8]>,
        cache: Option<&ArtifactCache>,
    ) -> Result<PluginVersion, LoadError> {
        let fail = |problem: String| LoadError::new(name, &source, problem);
        sniff(&bytes).map_err(fail)?;
        let hash = ContentHash::of(&bytes);
        let size = bytes.len();
        let (component, compiled) = {
            let runtime = runtime.clone();
            let cache = cache.cloned();
            tokio::task::spawn_blocking(move || match cache {
                Some(cache) => cache.load_or_compile(runtime.engine(), &hash, &bytes),
                None => Component::new(runtime.engine(), &*bytes).map(|c| (c, Compiled::Fresh)),
            })
            .await
            .map_err(|e| fail(format!("compilation was interrupted: {e}")))?
            .map_err(|e| fail(format!("is not a valid WebAssembly component: {e:#}")))?
        };
        Self::assemble(
            runtime,
            name,
            source,
            hash,
            size,
            (component, compiled),
            None,
        )
        .await
    }

    /// A declarative tool file's version: the tools it declares, run by the
    /// bundled wrapper plugin (see [`crate::source::declarative`]).
    pub(crate) async fn declarative(
        runtime: &Arc<Runtime>,
        name: &str,
        source: PluginSource,
        text: &str,
        cache: Option<&ArtifactCache>,
    ) -> Result<PluginVersion, LoadError> {
        let syntax = match &source {
            PluginSource::File(path) => declarative::Syntax::of(path),
            _ => declarative::Syntax::Toml,
        };
        let declared = declarative::parse(name, text, syntax).map_err(|problems| LoadError {
            plugin: name.to_string(),
            source: source.clone(),
            problems,
        })?;
        // Compiled once per process, and only once a file is valid.
        let wrapper = runtime
            .declarative_wrapper(cache)
            .await
            .map_err(|problem| LoadError::new(name, &source, problem))?;
        let hash = ContentHash::of(text.as_bytes());
        Self::assemble(
            runtime,
            name,
            source,
            hash,
            text.len(),
            (wrapper, Compiled::Fresh),
            Some(declared),
        )
        .await
    }

    async fn assemble(
        runtime: &Arc<Runtime>,
        name: &str,
        source: PluginSource,
        hash: ContentHash,
        size: usize,
        (component, compiled): (Component, Compiled),
        declared: Option<Declared>,
    ) -> Result<PluginVersion, LoadError> {
        let fail = |problem: String| LoadError::new(name, &source, problem);
        let (linked, interfaces) = link(runtime, component, compiled).map_err(fail)?;
        let name: Arc<str> = name.into();
        let (tools, stateful, adapter) = match declared {
            Some(declared) => {
                let (tools, problems) = validate_manifest(&name, declared.specs, Vec::new());
                if !problems.is_empty() {
                    return Err(LoadError {
                        plugin: name.to_string(),
                        source,
                        problems,
                    });
                }
                (tools, false, Some(Arc::new(declared.definitions)))
            }
            None => {
                let (tools, stateful) =
                    described(runtime, &name, &linked)
                        .await
                        .map_err(|problems| LoadError {
                            plugin: name.to_string(),
                            source: source.clone(),
                            problems,
                        })?;
                (tools, stateful, None)
            }
        };
        Ok(PluginVersion {
            name,
            source,
            hash,
            size,
            has_lifecycle: linked.lifecycle.is_some(),
            code: tokio::sync::OnceCell::new_with(Some(Ok(linked))),
            upgraded: Arc::default(),
            deferred: None,
            tools,
            stateful,
            imports: interfaces.imports,
            contract: interfaces.contract,
            sessions: Sessions::default(),
            ready: Arc::default(),
            flights: Arc::default(),
            adapter,
        })
    }
}

/// The interfaces a component imports and the contract it exports.
pub(super) struct Interfaces {
    pub(super) imports: Vec<String>,
    pub(super) contract: String,
}

/// Links a compiled component with the host's imports and finds its exports.
pub(super) fn link(
    runtime: &Runtime,
    component: Component,
    compiled: Compiled,
) -> Result<(Linked, Interfaces), String> {
    let engine = runtime.engine();
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let (contract, series) = contract_version(&exports)?;
    let pre = runtime
        .linker()
        .instantiate_pre(&component)
        .map_err(|e| describe_link_error(&e, &imports))?;
    let rich = exports.iter().any(|e| e.starts_with(RICH_INTERFACE));
    let tool_exports = ToolExports::new(&pre, series, rich).map_err(|e| {
        format!(
            "exports {} with the wrong signature (built against another contract \
             version?): {e:#}",
            series.tool_interface()
        )
    })?;
    let lifecycle = if exports.iter().any(|e| e.starts_with(LIFECYCLE_INTERFACE)) {
        Some(LifecycleExports::new(&pre, series).map_err(|e| {
            format!("exports {LIFECYCLE_INTERFACE} with the wrong signature: {e:#}")
        })?)
    } else {
        None
    };
    let capabilities = if needs_host(engine, &ty) {
        runtime.capabilities()
    } else {
        &[]
    };
    let linked = Linked {
        pre,
        tool_exports,
        lifecycle,
        compiled,
        capabilities,
        tier: None,
    };
    Ok((linked, Interfaces { imports, contract }))
}

/// Whether a component imports anything but types. One that imports no
/// function (a lean plugin, built without WASI) can reach neither WASI nor
/// a capability, so its stores set up neither: making each call's sandbox
/// is then a few allocations.
fn needs_host(engine: &wasmtime::Engine, ty: &types::Component) -> bool {
    fn reaches(engine: &wasmtime::Engine, item: &types::ComponentItem) -> bool {
        match item {
            types::ComponentItem::Type(_) => false,
            types::ComponentItem::ComponentInstance(instance) => instance
                .exports(engine)
                .any(|(_, item)| reaches(engine, &item.ty)),
            _ => true,
        }
    }
    ty.imports(engine)
        .any(|(_, item)| reaches(engine, &item.ty))
}

/// Asks a linked component to describe its tools and validates the answer:
/// the tools, and whether the plugin is stateful.
pub(super) async fn described(
    runtime: &Runtime,
    name: &Arc<str>,
    linked: &Linked,
) -> Result<(Vec<Arc<ToolSpec>>, bool), Vec<String>> {
    let Described { manifest, icons } = describe(runtime, name, linked)
        .await
        .map_err(|e| vec![format!("`describe` failed: {e}")])?;
    let (tools, problems) = validate_manifest(name, manifest.tools, icons);
    if problems.is_empty() {
        Ok((tools, manifest.stateful))
    } else {
        Err(problems)
    }
}

async fn describe(
    runtime: &Runtime,
    plugin: &Arc<str>,
    linked: &Linked,
) -> Result<Described, String> {
    let identity = Identity {
        plugin: plugin.clone(),
        tool: None,
    };
    let mut store = new_store(
        linked.engine(runtime),
        Sandbox::new(linked.capabilities, identity, &DESCRIBE_LIMITS, no_grants()),
    );
    let run = async {
        let guest = instantiate_tool(&linked.pre, &linked.tool_exports, &mut store).await?;
        guest.describe(&mut store).await
    };
    let outcome = tokio::time::timeout(DESCRIBE_LIMITS.timeout, run).await;
    store.data().flush_output();
    match outcome {
        Err(_) => Err(format!(
            "it did not finish within {:?}",
            DESCRIBE_LIMITS.timeout
        )),
        Ok(Err(trap)) => Err(trap_error("describe", &trap, store.data())
            .message()
            .to_string()),
        Ok(Ok(described)) => Ok(described),
    }
}

#[cfg(test)]
mod tests;
