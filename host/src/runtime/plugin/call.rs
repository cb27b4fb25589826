//! One call on a plugin version: in a fresh (or made-ahead) instance, or in
//! a stateful session's instance, mapped to the caller's result.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;

use super::load::no_grants;
use super::version::PluginVersion;
use crate::capability::Profile;
use crate::capability::grants::Grants;
use crate::capability::sandbox::{Identity, Sandbox};
use crate::contract::CapabilityUse;
use crate::contract::adapter::GuestOutput;
use crate::contract::bindings::GuestToolError;
use crate::contract::spec::ToolSpec;
use crate::error::{CallError, ErrorKind};
use crate::policy::Limits;
use crate::runtime::engine::Runtime;
use crate::runtime::instance::{guest_error, instantiate_tool, new_store, trap_error};
use crate::runtime::ready::Recipe;
use crate::runtime::stateful::{
    LiveInstance, MAX_SESSIONS, MAX_SESSIONS_PER_TENANT, NoSlot, guest_session_id,
};
use crate::source::declarative::Adapter;
use crate::store::memory::SessionMemory;

impl PluginVersion {
    /// Creates a fresh store and instance and drops them without calling
    /// anything: the fixed cost of every call, for benchmarks.
    #[doc(hidden)]
    pub async fn instantiate_only(
        &self,
        runtime: &Runtime,
        limits: &Limits,
    ) -> wasmtime::Result<()> {
        let identity = Identity {
            plugin: self.name.clone(),
            tool: None,
        };
        let linked = self
            .linked(runtime)
            .await
            .map_err(|e| wasmtime::Error::msg(e.message().to_string()))?;
        let mut store = new_store(
            linked.engine(runtime),
            Sandbox::new(linked.capabilities, identity, limits, no_grants()),
        );
        instantiate_tool(&linked.pre, &linked.tool_exports, &mut store).await?;
        Ok(())
    }

    /// Runs `tool` with `arguments` (JSON text) in a fresh instance with
    /// `grants`. Returns the output and the capability uses of the call.
    ///
    /// The instance is the one made ahead for this tool when there is one for
    /// the same limits and grants (never used before), otherwise it is made
    /// now. When no other call of this version overlapped this one, and its
    /// caller paused before it (see `runtime/ready`), the next instance is
    /// made in the background once the call has its result, and this call's
    /// store is dropped there.
    pub async fn call(
        &self,
        runtime: &Runtime,
        tool: &Arc<ToolSpec>,
        arguments: &str,
        limits: &Limits,
        grants: Arc<Grants>,
    ) -> (Result<GuestOutput, CallError>, Vec<CapabilityUse>) {
        let linked = match self.linked(runtime).await {
            Ok(linked) => linked,
            Err(error) => return (Err(error), Vec::new()),
        };
        let identity = || Identity {
            plugin: self.name.clone(),
            tool: Some(tool.name.as_str().into()),
        };
        // Alone when it starts (this call's own flight is counted), after a
        // pause long enough to make an instance: the caller will likely
        // pause before its next call too.
        let lone = self.flights.count() <= 1;
        let paused = lone && self.ready.worth_making(self.flights.pause());
        let (mut store, ready) = match self.ready.take(&tool.name, limits, &grants) {
            Some(ready) => (ready.store, Some(ready.guest)),
            None => {
                let sandbox = Sandbox::new(linked.capabilities, identity(), limits, grants.clone());
                (new_store(linked.engine(runtime), sandbox), None)
            }
        };
        let run = async {
            let guest = match ready {
                Some(guest) => guest,
                // Timed for a lone caller, whose pace decides on making ahead.
                None if lone => {
                    let began = Instant::now();
                    let guest =
                        instantiate_tool(&linked.pre, &linked.tool_exports, &mut store).await?;
                    self.ready.made_in(began.elapsed());
                    guest
                }
                None => instantiate_tool(&linked.pre, &linked.tool_exports, &mut store).await?,
            };
            let (name, arguments) = self.guest_call(tool, arguments);
            guest.call(&mut store, name, &arguments).await
        };
        let outcome = tokio::time::timeout(limits.timeout, run).await;
        let result = self.finish(tool, outcome, store.data(), limits);
        let uses = store.data().capability_uses();
        // Only for a lone caller (an agent calling one tool after another,
        // over stdio, one HTTP connection or the CLI): no other call of this
        // version ran when this one started or runs now. Under concurrent
        // load the next call comes at once and would wait for the background
        // work anyway, or take an instance made on another worker thread.
        if !paused || self.flights.count() > 1 {
            return (result, uses);
        }
        self.ready.make_next(
            &tool.name,
            || Recipe {
                engine: linked.engine(runtime).clone(),
                capabilities: linked.capabilities,
                pre: linked.pre.clone(),
                indices: linked.tool_exports.clone(),
                identity: identity(),
                limits: limits.clone(),
                grants,
            },
            store,
            &self.flights,
            self.flights.begun(),
        );
        (result, uses)
    }

    /// Runs `tool` in the instance kept for `session` (created on first use
    /// with `grants`, which should cover every tool of the plugin), for
    /// stateful plugins. A trap or timeout discards the instance; the
    /// session's next call starts a fresh one.
    #[allow(clippy::too_many_arguments)]
    pub async fn call_in_session(
        &self,
        runtime: &Runtime,
        tool: &Arc<ToolSpec>,
        arguments: &str,
        limits: &Limits,
        session: &str,
        memory: &Arc<SessionMemory>,
        grants: (&Arc<Profile>, impl FnOnce() -> Arc<Grants>),
    ) -> (Result<GuestOutput, CallError>, Vec<CapabilityUse>) {
        self.call_or_resume_session(
            runtime, tool, arguments, limits, session, memory, grants, false,
        )
        .await
    }

    /// [`PluginVersion::call_in_session`], or with `resume` in a session
    /// that must hold a live instance made under this profile already: one
    /// that does not (never made, torn down, discarded after a trap, made
    /// under another profile, of another version) fails the call with
    /// `state_lost` instead of starting afresh, and nothing runs.
    #[allow(clippy::too_many_arguments)]
    pub async fn call_or_resume_session(
        &self,
        runtime: &Runtime,
        tool: &Arc<ToolSpec>,
        arguments: &str,
        limits: &Limits,
        session: &str,
        memory: &Arc<SessionMemory>,
        grants: (&Arc<Profile>, impl FnOnce() -> Arc<Grants>),
        resume: bool,
    ) -> (Result<GuestOutput, CallError>, Vec<CapabilityUse>) {
        match self
            .session_call(
                runtime, tool, arguments, limits, session, memory, grants, resume,
            )
            .await
        {
            Ok(done) => done,
            Err(error) => (Err(error), Vec::new()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn session_call(
        &self,
        runtime: &Runtime,
        tool: &Arc<ToolSpec>,
        arguments: &str,
        limits: &Limits,
        session: &str,
        memory: &Arc<SessionMemory>,
        (made_under, grants): (&Arc<Profile>, impl FnOnce() -> Arc<Grants>),
        resume: bool,
    ) -> Result<(Result<GuestOutput, CallError>, Vec<CapabilityUse>), CallError> {
        // Compiled (at a bundled plugin's first call) outside the deadline.
        self.linked(runtime).await?;
        let lost = || {
            CallError::new(
                ErrorKind::StateLost,
                format!(
                    "plugin {:?} no longer holds the instance of this state (torn down, \
                     discarded after a crash, or of another version)",
                    &*self.name
                ),
            )
        };
        let unloaded = || {
            CallError::new(
                ErrorKind::Unavailable,
                format!(
                    "tool {:?}: this version of plugin {:?} was unloaded",
                    tool.name, &*self.name
                ),
            )
        };
        let slot = match self.sessions.slot_if(session, !resume) {
            Ok(Some(slot)) => slot,
            Ok(None) => return Err(lost()),
            Err(NoSlot::Closed) => return Err(unloaded()),
            Err(NoSlot::Full) => {
                return Err(CallError::new(
                    ErrorKind::Busy,
                    format!(
                        "plugin {:?} already keeps {MAX_SESSIONS} sessions; retry when some expire",
                        &*self.name
                    ),
                ));
            }
            Err(NoSlot::TenantFull) => {
                return Err(CallError::new(
                    ErrorKind::Busy,
                    format!(
                        "plugin {:?} already keeps {MAX_SESSIONS_PER_TENANT} sessions of this \
                         caller, the most one tenant may hold; end some or retry when they expire",
                        &*self.name
                    ),
                ));
            }
        };
        let mut slot = slot.lock().await;
        if slot.closed {
            return Err(unloaded());
        }
        let kept = slot.live.is_some()
            && slot
                .made_under
                .as_ref()
                .is_some_and(|profile| Arc::ptr_eq(profile, made_under));
        if resume && !kept {
            return Err(lost());
        }
        // An instance made under another profile of the caller (a session
        // narrowed since, a reloaded config) holds grants it no longer has.
        if slot
            .made_under
            .as_ref()
            .is_some_and(|profile| !Arc::ptr_eq(profile, made_under))
            && let Some(live) = slot.live.take()
        {
            live.teardown().await;
        }
        // One deadline for starting the instance (if needed) and the call.
        let deadline = tokio::time::Instant::now() + limits.timeout;
        if slot.live.is_none() {
            let live = tokio::time::timeout_at(
                deadline,
                self.start_session(runtime, session, limits, memory, grants()),
            )
            .await
            .map_err(|_| {
                CallError::new(
                    ErrorKind::Timeout,
                    format!(
                        "plugin {:?} did not start session {session:?} within {:?}",
                        &*self.name, limits.timeout
                    ),
                )
            })??;
            slot.live = Some(live);
            slot.made_under = Some(made_under.clone());
        }
        let live = slot.live.as_mut().expect("just started");
        live.store.data_mut().begin_call(&tool.name);
        let (name, arguments) = self.guest_call(tool, arguments);
        let _turn = live.store.data().turn.until_dropped();
        let outcome =
            tokio::time::timeout_at(deadline, live.tool.call(&mut live.store, name, &arguments))
                .await;
        let crashed = !matches!(outcome, Ok(Ok(_)));
        let result = self.finish(tool, outcome, live.store.data(), limits);
        let uses = live.store.data().capability_uses();
        if crashed {
            // The instance stopped mid-call; its state cannot be trusted.
            slot.live = None;
        }
        slot.last_used = Instant::now();
        Ok((result, uses))
    }

    async fn start_session(
        &self,
        runtime: &Runtime,
        session: &str,
        limits: &Limits,
        memory: &Arc<SessionMemory>,
        grants: Arc<Grants>,
    ) -> Result<LiveInstance, CallError> {
        let linked = self.linked(runtime).await?;
        let identity = Identity {
            plugin: self.name.clone(),
            tool: None,
        };
        let mut sandbox = Sandbox::new(linked.capabilities, identity, limits, grants);
        let tenant = session.split_once('\u{0}').map_or("", |(tenant, _)| tenant);
        sandbox.limiter.session = Some(memory.account(tenant));
        let mut store = new_store(linked.engine(runtime), sandbox);
        let fail = |e: wasmtime::Error, store: &Store<Sandbox>| {
            trap_error(
                &format!("plugin {:?} session start", &*self.name),
                &e,
                store.data(),
            )
        };
        let instance = match linked.pre.instantiate_async(&mut store).await {
            Ok(instance) => instance,
            Err(e) => return Err(fail(e, &store)),
        };
        let tool = linked.tool_exports.load(&instance);
        let lifecycle = match &linked.lifecycle {
            Some(indices) => Some(
                indices
                    .load(&mut store, &instance)
                    .map_err(|e| fail(e, &store))?,
            ),
            None => None,
        };
        if let Some(lifecycle) = &lifecycle {
            match lifecycle.setup(&mut store, guest_session_id(session)).await {
                Ok(Ok(())) => {}
                Ok(Err(message)) => {
                    return Err(CallError::new(
                        ErrorKind::ToolFailed,
                        format!(
                            "plugin {:?} refused to start session {session:?}: {message}",
                            &*self.name
                        ),
                    ));
                }
                Err(e) => return Err(fail(e, &store)),
            }
        }
        Ok(LiveInstance {
            store,
            tool,
            lifecycle,
        })
    }

    /// The guest tool and arguments that run `tool`: itself, or for a
    /// declarative tool the wrapper's `invoke` with the tool's definition.
    fn guest_call<'a>(&self, tool: &'a ToolSpec, arguments: &'a str) -> (&'a str, Cow<'a, str>) {
        match &self.adapter {
            Some(adapter) => (
                Adapter::TOOL,
                Cow::Owned(adapter.arguments(&tool.name, arguments)),
            ),
            None => (&tool.name, Cow::Borrowed(arguments)),
        }
    }

    /// Maps the outcome of a guest call to the caller's result.
    fn finish(
        &self,
        tool: &ToolSpec,
        outcome: Result<
            wasmtime::Result<Result<GuestOutput, GuestToolError>>,
            tokio::time::error::Elapsed,
        >,
        sandbox: &Sandbox,
        limits: &Limits,
    ) -> Result<GuestOutput, CallError> {
        sandbox.flush_output();
        let what = || format!("tool {:?} (plugin {:?})", tool.name, &*self.name);
        match outcome {
            Err(_elapsed) => Err(CallError::new(
                ErrorKind::Timeout,
                format!("{} exceeded its time limit of {:?}", what(), limits.timeout),
            )),
            Ok(Err(trap)) => Err(trap_error(&what(), &trap, sandbox)),
            Ok(Ok(Err(tool_error))) => Err(guest_error(&what(), tool_error)),
            Ok(Ok(Ok(output))) => {
                let size = output.encoded_size();
                if size > limits.max_output {
                    let counted = if output.is_content() {
                        " (binary data counted as base64, text as JSON)"
                    } else {
                        " (as sent inside a JSON string, escaped)"
                    };
                    return Err(CallError::new(
                        ErrorKind::OutputTooLarge,
                        format!(
                            "{} returned {size} bytes{counted}, more than the limit of {} bytes",
                            what(),
                            limits.max_output
                        ),
                    ));
                }
                Ok(output)
            }
        }
    }
}
