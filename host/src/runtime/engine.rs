//! The one wasmtime `Engine` of the process (pooling allocator, epoch
//! interruption) and the `Linker` that gives guests the host's imports.

use std::sync::{Arc, OnceLock};

use anyhow::{Context as _, Result};
use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::capability::CAPABILITIES;
use crate::capability::sandbox::{CapabilityInfo, Linked, Sandbox};
use crate::policy::MAX_MEMORY;
use crate::store::epoch::start_epoch_ticker;

/// Sizes of the instance pool: how many instances may be alive at once.
const POOL_INSTANCES: u32 = 1000;

/// The compiled-code engine and the linker shared by every plugin and call.
pub struct Runtime {
    engine: Engine,
    linker: Linker<Sandbox>,
    capabilities: &'static [Linked],
    pooling: bool,
    /// The declarative tools' wrapper plugin, compiled on first use.
    wrapper: tokio::sync::OnceCell<wasmtime::component::Component>,
    /// The first tier, made on first use (see [`Runtime::first_tier`]).
    first_tier: OnceLock<Arc<Runtime>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("pooling", &self.pooling)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// The process-wide runtime, created on first use.
    pub fn shared() -> Result<Arc<Runtime>> {
        static SHARED: OnceLock<Arc<Runtime>> = OnceLock::new();
        if let Some(runtime) = SHARED.get() {
            return Ok(runtime.clone());
        }
        let runtime = Arc::new(Runtime::new()?);
        Ok(SHARED.get_or_init(|| runtime).clone())
    }

    fn new() -> Result<Runtime> {
        Self::with_capabilities(CAPABILITIES)
    }

    /// A runtime whose guests may be given `capabilities` (the host's are
    /// [`CAPABILITIES`]).
    pub(crate) fn with_capabilities(capabilities: &'static [Linked]) -> Result<Runtime> {
        let (engine, pooling) = match Engine::new(&config(true)) {
            Ok(engine) => (engine, true),
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "the pooling instance allocator is unavailable (address space limits?); \
                     falling back to on-demand allocation, which is slower per call"
                );
                (Engine::new(&config(false))?, false)
            }
        };
        start_epoch_ticker(&engine);
        let linker = linker(&engine, capabilities)?;
        Ok(Runtime {
            engine,
            linker,
            capabilities,
            pooling,
            wrapper: tokio::sync::OnceCell::new(),
            first_tier: OnceLock::new(),
        })
    }

    /// A runtime whose engine compiles up to three times faster (Cranelift
    /// without optimisation, single-pass register allocation) and allocates
    /// instances on demand: its code serves a bundled plugin's first calls
    /// while this runtime's engine compiles the plugin in the background.
    pub(crate) fn first_tier(&self) -> Result<Arc<Runtime>> {
        if let Some(runtime) = self.first_tier.get() {
            return Ok(runtime.clone());
        }
        let mut config = config(false);
        config
            .cranelift_opt_level(wasmtime::OptLevel::None)
            .cranelift_regalloc_algorithm(wasmtime::RegallocAlgorithm::SinglePass);
        let engine = Engine::new(&config)?;
        start_epoch_ticker(&engine);
        let linker = linker(&engine, self.capabilities)?;
        let runtime = Arc::new(Runtime {
            engine,
            linker,
            capabilities: self.capabilities,
            pooling: false,
            wrapper: tokio::sync::OnceCell::new(),
            first_tier: OnceLock::new(),
        });
        Ok(self.first_tier.get_or_init(|| runtime).clone())
    }

    /// The compiled wrapper plugin that runs declarative tools (compiled
    /// once, through `cache` when there is one).
    pub(crate) async fn declarative_wrapper(
        self: &Arc<Self>,
        cache: Option<&super::ArtifactCache>,
    ) -> Result<wasmtime::component::Component, String> {
        let runtime = self.clone();
        let cache = cache.cloned();
        let compile = async move {
            tokio::task::spawn_blocking(move || {
                let bytes = crate::bundled::DECLARATIVE_WRAPPER;
                match cache {
                    Some(cache) => cache
                        .load_or_compile(
                            runtime.engine(),
                            &crate::contract::ContentHash::of(bytes),
                            bytes,
                        )
                        .map(|(component, _)| component),
                    None => wasmtime::component::Component::new(runtime.engine(), bytes),
                }
            })
            .await
            .map_err(|e| format!("compiling the declarative wrapper was interrupted: {e}"))?
            .map_err(|e| format!("the declarative wrapper does not compile: {e:#}"))
        };
        self.wrapper.get_or_try_init(|| compile).await.cloned()
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) fn linker(&self) -> &Linker<Sandbox> {
        &self.linker
    }

    /// The capabilities guests may be given, in the order they are linked.
    pub(crate) fn capabilities(&self) -> &'static [Linked] {
        self.capabilities
    }

    /// What each capability guests may be given is.
    pub fn capability_infos(&self) -> impl Iterator<Item = &'static CapabilityInfo> {
        self.capabilities.iter().map(|linked| &linked.info)
    }

    /// Whether instances come from the pooling allocator.
    pub fn is_pooling(&self) -> bool {
        self.pooling
    }
}

fn config(pooling: bool) -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.wasm_component_model(true);
    // Plugins are synchronous WASI 0.2 components; the component-model-async
    // machinery would only add work to every store.
    config.concurrency_support(false);
    config.max_wasm_stack(1 << 20);
    config.async_stack_size(2 << 20);
    if pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(POOL_INSTANCES)
            .total_core_instances(POOL_INSTANCES * 4)
            .total_memories(POOL_INSTANCES * 2)
            .total_tables(POOL_INSTANCES * 4)
            .total_stacks(POOL_INSTANCES)
            .max_memory_size(MAX_MEMORY)
            .max_core_instance_size(1 << 20)
            .max_component_instance_size(1 << 20)
            // Reset only the pages a call dirtied (found with PAGEMAP_SCAN
            // where the kernel has it) and keep them mapped, so the next
            // instance in the slot does not page-fault them in again.
            .pagemap_scan(wasmtime::Enabled::Auto)
            .linear_memory_keep_resident(4 << 20)
            .table_keep_resident(1 << 16);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

/// WASI, then each capability's imports. A capability may replace a WASI
/// interface only when it says it does.
fn linker(engine: &Engine, capabilities: &[Linked]) -> Result<Linker<Sandbox>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)
        .map_err(anyhow::Error::from)
        .context("linking WASI")?;
    for linked in capabilities {
        linker.allow_shadowing(linked.replaces_wasi);
        (linked.add_to_linker)(&mut linker)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("linking the {} capability", linked.info.name))?;
    }
    linker.allow_shadowing(false);
    Ok(linker)
}
