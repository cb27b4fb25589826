//! A guest store with the host's limits and epoch accounting, and a tool
//! instance in it.

use wasmtime::component::InstancePre;
use wasmtime::{CallHook, Store, Trap};

use crate::capability::sandbox::Sandbox;
use crate::contract::adapter::{ToolExports, ToolGuest};
use crate::contract::bindings::GuestToolError;
use crate::error::{CallError, ErrorKind, bounded};
use crate::store::epoch::Running;

pub(crate) fn new_store(engine: &wasmtime::Engine, sandbox: Sandbox) -> Store<Sandbox> {
    let mut store = Store::new(engine, sandbox);
    store.limiter(|s| &mut s.limiter);
    yield_fairly(&mut store);
    // The epoch ticks only while some store runs guest code (host imports,
    // however long they wait, are not guest code).
    store.call_hook(|mut store, hook| {
        let sandbox = store.data_mut();
        match hook {
            CallHook::CallingWasm | CallHook::ReturningFromHost => {
                if sandbox.running.is_none() {
                    sandbox.running = Some(Running::enter());
                }
            }
            CallHook::ReturningFromWasm | CallHook::CallingHost => {
                sandbox.running = None;
                // Waiting on the host is not running: the turn goes on.
                sandbox.turn.give_back();
            }
        }
        Ok(())
    });
    store
}

/// Makes `store`'s guest give way at each epoch tick and run on only with
/// a turn of the process's [`crate::store::cpu::CpuGate`] (the tenant its call's grants name).
/// Set again on a reused store, whose deadline this restarts.
pub(crate) fn yield_fairly(store: &mut Store<Sandbox>) {
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut context| {
        let sandbox = context.data_mut();
        sandbox.turn.give_back();
        let slot = sandbox.turn.clone();
        let tenant: std::sync::Arc<str> =
            std::sync::Arc::from(sandbox.tenant().unwrap_or_default());
        Ok(wasmtime::UpdateDeadline::YieldCustom(
            1,
            Box::pin(async move {
                tokio::task::yield_now().await;
                let turn = crate::store::cpu::CpuGate::shared().turn(tenant).await;
                slot.hold(turn);
            }),
        ))
    });
}

/// Instantiates `pre` in `store` and finds the instance's `tool` export.
pub(crate) async fn instantiate_tool(
    pre: &InstancePre<Sandbox>,
    exports: &ToolExports,
    store: &mut Store<Sandbox>,
) -> wasmtime::Result<ToolGuest> {
    let instance = pre.instantiate_async(&mut *store).await?;
    Ok(exports.load(&instance))
}

pub(crate) fn guest_error(what: &str, error: GuestToolError) -> CallError {
    match error {
        GuestToolError::InvalidArguments(m) => {
            CallError::new(ErrorKind::InvalidArguments, format!("{what}: {m}"))
        }
        GuestToolError::Denied(m) => CallError::new(ErrorKind::Denied, format!("{what}: {m}")),
        GuestToolError::Failed(m) => CallError::new(ErrorKind::ToolFailed, format!("{what}: {m}")),
    }
}

/// Turns a trap into the error the caller sees: a memory error when the
/// limiter refused growth, otherwise the trap with the guest's last words on
/// stderr (a Rust panic message lands there).
pub(crate) fn trap_error(what: &str, error: &wasmtime::Error, sandbox: &Sandbox) -> CallError {
    if let (Some((desired, shortage)), Some(charge)) =
        (sandbox.limiter.over_budget, &sandbox.limiter.session)
    {
        let budget = charge.budget();
        if shortage == crate::store::memory::Shortage::Tenant {
            let who = match charge.tenant() {
                "" => "the local caller".to_string(),
                tenant => format!("tenant {tenant:?}"),
            };
            return CallError::new(
                ErrorKind::Memory,
                format!(
                    "{what} could not grow its memory to {}: the stateful sessions of {who} \
                     hold {}, its cap of tenant_caps.sessions_memory = {}; end sessions (or \
                     wait for session_idle)",
                    crate::policy::human_bytes(desired),
                    crate::policy::human_bytes(budget.used_by(charge.tenant())),
                    crate::policy::human_bytes(budget.share())
                ),
            );
        }
        return CallError::new(
            ErrorKind::Memory,
            format!(
                "{what} could not grow its memory to {}: the stateful sessions of this host \
                 hold {} of sessions_memory = {}; end sessions (or wait for session_idle) or \
                 raise sessions_memory",
                crate::policy::human_bytes(desired),
                crate::policy::human_bytes(budget.used()),
                crate::policy::human_bytes(budget.limit())
            ),
        );
    }
    if let Some(desired) = sandbox.limiter.exceeded {
        return CallError::new(
            ErrorKind::Memory,
            format!(
                "{what} exceeded its memory limit of {} (tried to grow to {})",
                crate::policy::human_bytes(sandbox.limiter.limit()),
                crate::policy::human_bytes(desired)
            ),
        );
    }
    let cause = match error.downcast_ref::<Trap>() {
        Some(trap) => format!("crashed ({trap})"),
        None => format!("failed in the host: {error:#}"),
    };
    let stderr = sandbox.stderr.text();
    let last_words = stderr.trim();
    if last_words.is_empty() {
        CallError::new(ErrorKind::Trap, format!("{what} {cause}"))
    } else {
        CallError::new(
            ErrorKind::Trap,
            format!("{what} {cause}; stderr: {}", bounded(last_words, 1024)),
        )
    }
}
