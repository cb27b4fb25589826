//! Terminal sessions: the terminal of a caller's session (an MCP session, an
//! HTTP `session`) kept between its calls. A session keeps
//! - one backend ([`backend`]): under the kernel sandbox, one sandbox built
//!   at its first command from the profile as it was then, in which every
//!   later command runs, so background processes, `/tmp` and the loopback
//!   network are shared by its commands;
//! - the working directory and exported variables the last command left
//!   ([`script`]), where the next one starts;
//! - its background processes ([`process`]).
//!
//! A session ends, with every process in it, when its caller ends it, when
//! it was idle for `session_idle`, when its profile changes (a reloaded
//! config), or with the host. A call without a session gets a session of
//! its own that ends with the call.

pub(crate) mod backend;
mod container;
pub(crate) mod launch;
pub(crate) mod process;
mod pty;
pub(crate) mod script;
mod ssh;
mod trailer;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backend::Backend;
use process::{DEFAULT_OUTPUT_BUDGET, OutputBudget, Process};
use script::ShellState;

use super::proxy::Gate;
use crate::capability::Profile;

pub(crate) use container::{
    check_engine as check_container_engine, remove_all as remove_containers,
};

/// Most terminal sessions of one host at once.
pub const MAX_TERMINAL_SESSIONS: usize = 64;

/// Most terminal sessions one tenant may hold, so that a tenant cannot take
/// every one from the others.
pub(crate) const MAX_TERMINAL_SESSIONS_PER_TENANT: usize = MAX_TERMINAL_SESSIONS / 4;

/// Most background processes of one session at once (ended ones count
/// until they are read or the session ends).
pub const MAX_PROCESSES: usize = 16;

/// The terminal sessions of one host, by session key (`tenant\0session`).
pub struct Terminals {
    sessions: Mutex<HashMap<String, Arc<TerminalSession>>>,
    /// Each tenant's (`""`: the local caller's) unread background output.
    budgets: Mutex<HashMap<String, Arc<OutputBudget>>>,
    /// `tenant_caps.background_output`.
    output_cap: Arc<AtomicUsize>,
}

impl Default for Terminals {
    fn default() -> Self {
        Self {
            sessions: Mutex::default(),
            budgets: Mutex::default(),
            output_cap: Arc::new(AtomicUsize::new(DEFAULT_OUTPUT_BUDGET)),
        }
    }
}

impl std::fmt::Debug for Terminals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminals")
            .field("sessions", &self.len())
            .finish()
    }
}

/// How many of `sessions` tenant `tenant` holds.
fn held_by<V>(sessions: &HashMap<String, V>, tenant: &str) -> usize {
    sessions
        .keys()
        .filter(|key| key.split_once('\0').is_some_and(|(t, _)| t == tenant))
        .count()
}

impl Terminals {
    /// The session `key` under `profile`: the open one, or a new one if
    /// there is none or it was opened under another profile (which ends it).
    pub(crate) fn session(
        &self,
        key: &str,
        profile: &Arc<Profile>,
    ) -> Result<Arc<TerminalSession>, String> {
        let mut sessions = self.lock();
        if let Some(session) = sessions.get(key)
            && Arc::ptr_eq(&session.profile, profile)
        {
            session.touch();
            return Ok(session.clone());
        }
        let replaced = sessions.remove(key);
        if let Some(replaced) = &replaced {
            replaced.ended();
        }
        if replaced.is_none() {
            if sessions.len() >= MAX_TERMINAL_SESSIONS {
                return Err(format!(
                    "this host holds {MAX_TERMINAL_SESSIONS} terminal sessions, the most it \
                     keeps; end one, or wait until one is idle for session_idle"
                ));
            }
            if let Some((tenant, _)) = key.split_once('\0')
                && held_by(&sessions, tenant) >= MAX_TERMINAL_SESSIONS_PER_TENANT
            {
                return Err(format!(
                    "tenant {tenant:?} holds {MAX_TERMINAL_SESSIONS_PER_TENANT} terminal \
                     sessions, its share of this host; end one, or wait until one is idle for \
                     session_idle"
                ));
            }
        }
        let tenant = key.split_once('\0').map_or("", |(tenant, _)| tenant);
        let budget = self.budget(tenant);
        let session = Arc::new(TerminalSession::new(profile.clone(), budget));
        sessions.insert(key.to_string(), session.clone());
        Ok(session)
    }

    /// Whether a new session of `tenant` (`None`: the local caller) would
    /// fit: under the host's cap and the tenant's share.
    pub fn has_room(&self, tenant: Option<&str>) -> bool {
        let sessions = self.lock();
        if sessions.len() >= MAX_TERMINAL_SESSIONS {
            return false;
        }
        tenant.is_none_or(|tenant| held_by(&sessions, tenant) < MAX_TERMINAL_SESSIONS_PER_TENANT)
    }

    /// Sets `tenant_caps.background_output`, for every tenant at once.
    pub fn set_output_cap(&self, bytes: usize) {
        self.output_cap.store(bytes.max(1), Ordering::Relaxed);
    }

    /// The unread background output of `tenant` (`""`: the local caller).
    pub(crate) fn budget(&self, tenant: &str) -> Arc<OutputBudget> {
        let mut budgets = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
        let owner = match tenant {
            "" => "the local caller".to_string(),
            tenant => format!("tenant {tenant:?}"),
        };
        budgets
            .entry(tenant.to_string())
            .or_insert_with(|| OutputBudget::new(owner, self.output_cap.clone()))
            .clone()
    }

    /// The open session `key` under `profile`, if there is one; makes none.
    pub(crate) fn open(&self, key: &str, profile: &Arc<Profile>) -> Option<Arc<TerminalSession>> {
        self.lock()
            .get(key)
            .filter(|session| Arc::ptr_eq(&session.profile, profile))
            .cloned()
    }

    /// Whether session `key` is open, marking it used now (so it is not
    /// ended as idle right after); makes none.
    pub fn keep(&self, key: &str) -> bool {
        self.lock()
            .get(key)
            .inspect(|session| session.touch())
            .is_some()
    }

    /// Ends session `key` and every process in it, and cuts its
    /// connections; false if there was none.
    pub fn end(&self, key: &str) -> bool {
        self.lock().remove(key).inspect(|s| s.ended()).is_some()
    }

    /// Ends the terminal of session id `session` whatever its tenant;
    /// false if it had none.
    pub fn end_session(&self, session: &str) -> bool {
        let mut sessions = self.lock();
        let before = sessions.len();
        sessions.retain(|key, terminal| {
            let keep = key.rsplit('\0').next() != Some(session);
            if !keep {
                terminal.ended();
            }
            keep
        });
        sessions.len() < before
    }

    /// Ends the sessions idle for `idle` or longer; how many.
    pub fn expire_idle(&self, idle: Duration) -> usize {
        let mut sessions = self.lock();
        let before = sessions.len();
        sessions.retain(|_, session| {
            let keep = session.idle() < idle;
            if !keep {
                session.ended();
            }
            keep
        });
        before - sessions.len()
    }

    /// Ends every session.
    pub fn end_all(&self) -> usize {
        let ended = std::mem::take(&mut *self.lock());
        ended.values().for_each(|session| session.ended());
        ended.len()
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// No session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<TerminalSession>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One terminal session.
pub(crate) struct TerminalSession {
    pub(crate) profile: Arc<Profile>,
    /// Its tenant's unread background output.
    pub(crate) budget: Arc<OutputBudget>,
    /// Whether its proxy serves: closed when the profile does not allow
    /// `network:fetch`, and when the session ends.
    gate: Gate,
    backend: tokio::sync::Mutex<Option<Arc<Backend>>>,
    state: Mutex<ShellState>,
    processes: Mutex<BTreeMap<u32, Arc<Process>>>,
    next_process: AtomicU32,
    last_used: Mutex<Instant>,
}

impl TerminalSession {
    pub(crate) fn new(profile: Arc<Profile>, budget: Arc<OutputBudget>) -> Self {
        Self {
            gate: Gate::for_profile(&profile),
            profile,
            budget,
            backend: tokio::sync::Mutex::new(None),
            state: Mutex::new(ShellState::default()),
            processes: Mutex::new(BTreeMap::new()),
            next_process: AtomicU32::new(1),
            last_used: Mutex::new(Instant::now()),
        }
    }

    /// Cuts the session's connections and refuses new ones: it has ended
    /// (its processes go with the last call holding it).
    fn ended(self: &Arc<Self>) {
        const ENDED: &str = "the terminal session ended (ended by its caller, its permissions \
                             narrowed, or its profile changed); the next command starts a new one";
        self.gate.close(ENDED);
        // Its processes end now, a command in flight (which holds the
        // backend) and its background processes with them: they ran with
        // what the session may no longer do.
        let end = |backend: &mut Option<Arc<Backend>>| {
            if let Some(backend) = backend.take() {
                backend.end(ENDED);
            }
        };
        match self.backend.try_lock() {
            Ok(mut backend) => end(&mut backend),
            Err(_) => {
                let session = self.clone();
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move { end(&mut *session.backend.lock().await) });
                }
            }
        }
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// How long since its last call.
    fn idle(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }

    /// The backend, started at the first command (again if it broke).
    pub(crate) async fn backend(&self) -> Result<Arc<Backend>, String> {
        let mut backend = self.backend.lock().await;
        if let Some(running) = backend.as_ref() {
            let reason = match running.broken() {
                Some(reason) => Some(reason),
                None => running.stale().await,
            };
            match reason {
                None => return Ok(running.clone()),
                Some(reason) => {
                    // Its background processes end with it.
                    tracing::info!(%reason, "a terminal session's sandbox ended; starting another");
                }
            }
        }
        let started = Arc::new(Backend::start(&self.profile, &self.gate).await?);
        *backend = Some(started.clone());
        Ok(started)
    }

    /// The state the last command left.
    pub(crate) fn state(&self) -> ShellState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Keeps `state` for the next command.
    pub(crate) fn set_state(&self, state: ShellState) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = state;
    }

    /// A new process id, if the session has room for another process.
    pub(crate) fn reserve(&self) -> Result<u32, String> {
        let mut processes = self.processes.lock().unwrap_or_else(|e| e.into_inner());
        if processes.len() >= MAX_PROCESSES {
            // Ended processes whose output was read make room.
            processes.retain(|_, p| p.end().is_none());
        }
        if processes.len() >= MAX_PROCESSES {
            return Err(format!(
                "the session has {MAX_PROCESSES} background processes, the most it keeps; \
                 kill one (ended ones are let go once their output is read)"
            ));
        }
        Ok(self.next_process.fetch_add(1, Ordering::Relaxed))
    }

    /// Keeps a started background process.
    pub(crate) fn add(&self, process: Process) -> Arc<Process> {
        let process = Arc::new(process);
        self.processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(process.id, process.clone());
        process
    }

    /// Background process `id`.
    pub(crate) fn process(&self, id: u32) -> Result<Arc<Process>, String> {
        self.touch();
        self.processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "no background process {id} in this session (processes end with their \
                     session; process_list shows those it has)"
                )
            })
    }

    /// Lets go of process `id` once it has ended and its output was read.
    pub(crate) fn forget_if_done(&self, id: u32) {
        let mut processes = self.processes.lock().unwrap_or_else(|e| e.into_inner());
        if processes.get(&id).is_some_and(|p| p.end().is_some()) {
            processes.remove(&id);
        }
    }

    /// Every background process, by id.
    pub(crate) fn processes(&self) -> Vec<Arc<Process>> {
        self.touch();
        self.processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_holds_at_most_its_share_and_the_local_caller_the_rest() {
        let terminals = Terminals::default();
        let profile = Arc::new(Profile::deny_all("p", "/w"));
        for n in 0..MAX_TERMINAL_SESSIONS_PER_TENANT {
            terminals.session(&format!("a\0s{n}"), &profile).unwrap();
        }
        let refused = terminals.session("a\0one-more", &profile).err().unwrap();
        assert!(refused.contains("tenant \"a\""), "{refused}");
        // Another tenant, and an open session of the same tenant, are served.
        terminals.session("b\0s0", &profile).unwrap();
        terminals.session("a\0s0", &profile).unwrap();
        for n in 0..MAX_TERMINAL_SESSIONS - MAX_TERMINAL_SESSIONS_PER_TENANT - 1 {
            terminals.session(&format!("local-{n}"), &profile).unwrap();
        }
        let full = terminals.session("local-last", &profile).err().unwrap();
        assert!(full.contains("the most it keeps"), "{full}");
        assert!(terminals.end_session("s0"));
        assert_eq!(terminals.len(), MAX_TERMINAL_SESSIONS - 2);
    }

    #[test]
    fn a_session_opened_under_another_profile_starts_afresh() {
        let terminals = Terminals::default();
        let first = Arc::new(Profile::deny_all("p", "/w"));
        let old = terminals.session("s", &first).unwrap();
        old.set_state(ShellState {
            dir: Some("/w".into()),
            env: None,
        });
        assert_eq!(terminals.session("s", &first).unwrap().state(), old.state());
        let second = Arc::new(Profile::deny_all("p", "/w"));
        assert_eq!(
            terminals.session("s", &second).unwrap().state(),
            ShellState::default()
        );
    }
}
