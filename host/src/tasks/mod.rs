//! Tasks: calls that run on after their request was answered, polled and
//! cancelled by id (`tk_…`, authenticated and bound to tenant and profile,
//! see [`crate::handles`]). One store serves MCP's Tasks extension and `/v1`;
//! each tenant holds at most `[tasks] max_per_tenant` tasks (one that ended
//! makes room for a new one). `cancel` ends a
//! running call through the dispatcher, which audits it as `cancelled`.

mod cancel;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::capability::Profile;
pub use crate::config::TaskSettings;
use crate::handles::Handles;
pub(crate) use cancel::{cancellable, cancelled_call};

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Running.
    Working,
    /// Waiting for an answer (`input`).
    InputRequired,
    /// Ended with a result (a tool error is a result too).
    Completed,
    /// Ended with an error of the protocol (unknown tool, shutdown).
    Failed,
    /// Cancelled by its caller.
    Cancelled,
}

impl Status {
    /// As the Tasks extension writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Whether it is over.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// What a task carries besides its status.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// Nothing (working, cancelled).
    None,
    /// A question under `key`, answered with [`Tasks::answer`].
    Asking {
        /// The question's key.
        key: String,
        /// The question, as its surface shows it.
        question: Value,
    },
    /// The result.
    Result(Value),
    /// The error.
    Error(Value),
}

/// A task as its caller sees it.
#[derive(Debug, Clone)]
pub struct TaskView {
    /// Its id (`tk_…`).
    pub id: String,
    /// The tool it calls.
    pub tool: String,
    /// Its status.
    pub status: Status,
    /// The latest progress report, or why it ended.
    pub message: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub last_updated_at: String,
    /// How long it is kept from creation.
    pub ttl: Duration,
    /// The suggested poll interval.
    pub poll: Duration,
    /// Result, error or question.
    pub payload: Payload,
}

/// Why a task was not made, or is not there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskError {
    /// The tenant holds as many tasks as it may.
    TooMany(String),
    /// No task of this caller has this id (unknown, altered, another
    /// tenant's): one error for every cause.
    NotFound,
    /// The task's time to live has passed.
    Expired,
    /// Its caller's profile changed while it waited for an answer: it was
    /// cancelled.
    ProfileChanged,
    /// The request was made under a configuration no longer running (a
    /// reload came while it was read): no task was made.
    Reloaded,
}

/// Why a task whose caller's profile changed was cancelled.
const CHANGED: &str = "the configuration changed while the task waited for its answer, so it \
                       did not go on; call the tool again, it is judged under the new \
                       configuration";

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooMany(message) => write!(f, "too_many_tasks: {message}"),
            Self::NotFound => f.write_str("Failed to retrieve task: Task not found"),
            Self::Expired => f.write_str("Failed to retrieve task: Task has expired"),
            Self::ProfileChanged => f.write_str(CHANGED),
            Self::Reloaded => f.write_str(
                "the configuration was reloaded while this request was read, and it was made \
                 under the one before; no task was made and nothing ran; send it again",
            ),
        }
    }
}

/// The owner of a forgotten task: no tenant's name (names are not empty
/// and hold no NUL).
const FORGOTTEN: &str = "\0forgotten";

/// How long a forgotten task's entry stays, for its cancelled call to end.
const FORGOTTEN_GRACE: Duration = Duration::from_secs(5);

/// What answers a task's question: it gets the caller's answer.
pub type Responder = Box<dyn FnOnce(&Value) + Send>;

struct Entry {
    tenant: String,
    /// The profile that made it: an answer under another (the configuration
    /// was reloaded) does not let its call go on.
    profile: Arc<Profile>,
    view: TaskView,
    expires: Instant,
    done_at: Option<Instant>,
    keep: Duration,
    responder: Option<Responder>,
    cancel: CancellationToken,
    /// Aborts the call's driver when the entry goes.
    driver: Option<tokio::task::AbortHandle>,
    /// Dropped with the entry (the bytes its result holds, counted).
    _guard: Option<Box<dyn Send>>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        if let Some(driver) = &self.driver {
            driver.abort();
        }
    }
}

/// A new task: its key in the store, its id and what cancels its call.
pub struct Created {
    /// The store's key.
    pub key: [u8; 16],
    /// The id callers use.
    pub id: String,
    /// Cancelled by [`Tasks::cancel`]; run the call under [`cancellable`].
    pub cancel: CancellationToken,
}

/// The tasks of one host.
#[derive(Default)]
pub struct Tasks {
    entries: Mutex<HashMap<[u8; 16], Entry>>,
    /// The id of each task whose status changed, for those who listen.
    changes: std::sync::OnceLock<tokio::sync::broadcast::Sender<Arc<str>>>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks").finish_non_exhaustive()
    }
}

impl Tasks {
    /// The ids of tasks as their status changes (a receiver that falls
    /// behind is told it lagged).
    pub fn changes(&self) -> tokio::sync::broadcast::Receiver<Arc<str>> {
        self.sender().subscribe()
    }

    fn sender(&self) -> &tokio::sync::broadcast::Sender<Arc<str>> {
        self.changes
            .get_or_init(|| tokio::sync::broadcast::channel(256).0)
    }

    /// Tells those who listen that task `id`'s status changed.
    fn changed(&self, id: Option<String>) {
        if let Some(id) = id {
            let _ = self.sender().send(Arc::from(id));
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<[u8; 16], Entry>) -> T) -> T {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        // Finished tasks go after `keep`; every task after its ttl once it
        // finished (a running one is ended by its own time limits).
        let gone: Vec<Entry> = {
            let keys: Vec<[u8; 16]> = entries
                .iter()
                .filter(|(_, e)| {
                    e.done_at
                        .is_some_and(|done| done + e.keep <= now || e.expires <= now)
                })
                .map(|(key, _)| *key)
                .collect();
            keys.iter().filter_map(|key| entries.remove(key)).collect()
        };
        let result = f(&mut entries);
        drop(entries);
        drop(gone);
        result
    }

    /// A new task of `tenant` under `profile` calling `tool`, or why not
    /// (the tenant holds `settings.max_per_tenant` already; `profile` is
    /// not of the configuration `running` names, by its generation, when
    /// the task would be made: a tenant re-keyed or removed meanwhile has
    /// its tasks forgotten once the new configuration runs, and a request
    /// of its old token read across the reload must not add one after).
    pub fn create(
        &self,
        handles: &Handles,
        settings: &TaskSettings,
        tenant: Option<&str>,
        profile: &Arc<Profile>,
        tool: &str,
        running: &dyn Fn() -> Option<u64>,
    ) -> Result<Created, TaskError> {
        let key = Handles::random_id();
        let id = handles.seal_task(&key, settings.ttl, tenant, profile);
        let owner = tenant.unwrap_or_default().to_string();
        let cancel = CancellationToken::new();
        let now = crate::audit::now_rfc3339();
        self.with(|entries| {
            if profile.generation != 0
                && running().is_some_and(|running| running != profile.generation)
            {
                return Err(TaskError::Reloaded);
            }
            let held = entries.values().filter(|e| e.tenant == owner).count();
            // Past the cap, the tenant's task that ended first makes room.
            let oldest_done = entries
                .iter()
                .filter(|(_, e)| e.tenant == owner)
                .filter_map(|(key, e)| e.done_at.map(|done| (done, *key)))
                .min();
            if held >= settings.max_per_tenant
                && let Some((_, key)) = oldest_done
            {
                entries.remove(&key);
            } else if held >= settings.max_per_tenant {
                let who = match tenant {
                    Some(tenant) => format!("tenant {tenant:?}"),
                    None => "the local caller".to_string(),
                };
                return Err(TaskError::TooMany(format!(
                    "{who} has {held} tasks running, the most it may ([tasks] max_per_tenant = \
                     {}); wait for one to finish, or cancel one, then call again",
                    settings.max_per_tenant
                )));
            }
            entries.insert(
                key,
                Entry {
                    tenant: owner,
                    profile: profile.clone(),
                    view: TaskView {
                        id: id.clone(),
                        // No tool has a longer name: a task keeps no more
                        // of whatever a caller sent.
                        tool: tool
                            .chars()
                            .take(crate::contract::spec::MAX_TOOL_NAME)
                            .collect(),
                        status: Status::Working,
                        message: None,
                        created_at: now.clone(),
                        last_updated_at: now,
                        ttl: settings.ttl,
                        poll: settings.poll,
                        payload: Payload::None,
                    },
                    expires: Instant::now() + settings.ttl,
                    done_at: None,
                    keep: settings.keep,
                    responder: None,
                    cancel: cancel.clone(),
                    driver: None,
                    _guard: None,
                },
            );
            Ok(Created {
                key,
                id: id.clone(),
                cancel: cancel.clone(),
            })
        })
    }

    /// Ties the task's call driver to it: aborted when the task goes.
    pub fn drive(&self, key: &[u8; 16], driver: tokio::task::AbortHandle) {
        self.with(|entries| match entries.get_mut(key) {
            Some(entry) => entry.driver = Some(driver),
            None => driver.abort(),
        });
    }

    /// Forgets task `key` (its call answered at once, as a plain result).
    pub fn remove(&self, key: &[u8; 16]) {
        let entry = self.with(|entries| entries.remove(key));
        if let Some(mut entry) = entry {
            // The driver handed its result over; it is not aborted.
            entry.driver = None;
        }
    }

    /// Task `key` asks `question` under `question_key`; `responder` gets the
    /// answer.
    pub fn ask(&self, key: &[u8; 16], question_key: String, question: Value, responder: Responder) {
        let changed = self.update(key, |entry| {
            entry.view.status = Status::InputRequired;
            entry.view.payload = Payload::Asking {
                key: question_key,
                question,
            };
            entry.responder = Some(responder);
        });
        self.changed(changed);
    }

    /// Task `key`'s latest progress report.
    pub fn report(&self, key: &[u8; 16], message: String) {
        let _ = self.update(key, |entry| entry.view.message = Some(message));
    }

    /// Task `key` ended with `payload` (a result or an error), its bytes
    /// kept counted by `guard`; a cancelled task stays cancelled.
    pub fn finish(&self, key: &[u8; 16], payload: Payload, guard: Option<Box<dyn Send>>) {
        let changed = self.update(key, |entry| {
            entry.view.status = match payload {
                Payload::Error(_) => Status::Failed,
                _ => Status::Completed,
            };
            entry.view.payload = payload;
            entry.responder = None;
            entry.done_at = Some(Instant::now());
            entry.driver = None;
            entry._guard = guard;
        });
        self.changed(changed);
    }

    /// Runs `f` on task `key` while it is not over; its id if it did.
    fn update(&self, key: &[u8; 16], f: impl FnOnce(&mut Entry)) -> Option<String> {
        self.with(|entries| {
            let entry = entries.get_mut(key)?;
            if entry.view.status.is_terminal() {
                return None;
            }
            f(entry);
            entry.view.last_updated_at = crate::audit::now_rfc3339();
            Some(entry.view.id.clone())
        })
    }

    /// The key of task id `id` if it is this caller's and still kept.
    fn find(
        &self,
        handles: &Handles,
        id: &str,
        tenant: Option<&str>,
        profile: &Profile,
    ) -> Result<[u8; 16], TaskError> {
        let (key, expires) = handles
            .open_task(id, tenant, profile)
            .ok_or(TaskError::NotFound)?;
        let owner = tenant.unwrap_or_default();
        let kept = self.with(|entries| entries.get(&key).is_some_and(|e| e.tenant == owner));
        match kept {
            true => Ok(key),
            false if expires <= unix_now() => Err(TaskError::Expired),
            false => Err(TaskError::NotFound),
        }
    }

    /// Task `id` of this caller.
    pub fn get(
        &self,
        handles: &Handles,
        id: &str,
        tenant: Option<&str>,
        profile: &Profile,
    ) -> Result<TaskView, TaskError> {
        let key = self.find(handles, id, tenant, profile)?;
        self.with(|entries| entries.get(&key).map(|e| e.view.clone()))
            .ok_or(TaskError::NotFound)
    }

    /// Gives the answers in `responses` to task `id`'s question; answers to
    /// other keys are ignored. Under another profile than the task's (the
    /// configuration changed), the task is cancelled instead.
    pub fn answer(
        &self,
        handles: &Handles,
        id: &str,
        tenant: Option<&str>,
        profile: &Arc<Profile>,
        responses: &serde_json::Map<String, Value>,
    ) -> Result<(), TaskError> {
        let key = self.find(handles, id, tenant, profile)?;
        let mut changed = false;
        let responder = self.with(|entries| {
            let entry = entries.get_mut(&key)?;
            if !Arc::ptr_eq(&entry.profile, profile) && !entry.view.status.is_terminal() {
                changed = true;
                entry.view.status = Status::Cancelled;
                entry.view.payload = Payload::None;
                entry.view.message = Some(CHANGED.into());
                entry.view.last_updated_at = crate::audit::now_rfc3339();
                entry.done_at = Some(Instant::now());
                entry.responder = None;
                entry.cancel.cancel();
                return None;
            }
            let Payload::Asking { key: asked, .. } = &entry.view.payload else {
                return None;
            };
            let answer = responses.get(asked)?.clone();
            entry.view.status = Status::Working;
            entry.view.payload = Payload::None;
            entry.view.last_updated_at = crate::audit::now_rfc3339();
            Some((entry.responder.take()?, answer))
        });
        if changed || responder.is_some() {
            self.changed(Some(id.to_string()));
        }
        if let Some((responder, answer)) = responder {
            responder(&answer);
        }
        match changed {
            true => Err(TaskError::ProfileChanged),
            false => Ok(()),
        }
    }

    /// Cancels task `id` of this caller: its call is ended (its command
    /// killed, its guest dropped) and it reads `cancelled`. A task that is
    /// over stays as it is.
    pub fn cancel(
        &self,
        handles: &Handles,
        id: &str,
        tenant: Option<&str>,
        profile: &Profile,
    ) -> Result<(), TaskError> {
        let key = self.find(handles, id, tenant, profile)?;
        let changed = self.with(|entries| {
            let entry = entries.get_mut(&key)?;
            if entry.view.status.is_terminal() {
                return None;
            }
            entry.view.status = Status::Cancelled;
            entry.view.payload = Payload::None;
            entry.view.message = Some("cancelled by the client".into());
            entry.view.last_updated_at = crate::audit::now_rfc3339();
            entry.done_at = Some(Instant::now());
            entry.responder = None;
            entry.cancel.cancel();
            Some(entry.view.id.clone())
        });
        self.changed(changed);
        Ok(())
    }

    /// Ends and forgets every task of a tenant `kept` refuses (one the
    /// configuration no longer has, or whose token changed: whoever holds
    /// that name now is not who made them). A running call is cancelled
    /// and audited as such; no caller finds any of them again.
    pub fn forget_tenants(&self, kept: impl Fn(&str) -> bool) {
        self.with(|entries| {
            for entry in entries.values_mut().filter(|e| !kept(&e.tenant)) {
                // Owned by nobody: no tenant name is empty but the local
                // caller's, which is always kept.
                entry.tenant = FORGOTTEN.to_string();
                if !entry.view.status.is_terminal() {
                    entry.view.status = Status::Cancelled;
                    entry.view.message = Some(
                        "cancelled: its tenant was removed from the configuration or its token \
                         changed"
                            .into(),
                    );
                    entry.cancel.cancel();
                }
                entry.view.payload = Payload::None;
                entry.responder = None;
                // Its call is given a moment to end and be audited.
                entry.done_at = Some(Instant::now());
                entry.keep = entry.keep.min(FORGOTTEN_GRACE);
            }
        });
    }

    /// The tasks of `tenant` under `profile`, oldest first.
    pub fn list(&self, tenant: Option<&str>, profile: &Profile) -> Vec<TaskView> {
        let owner = tenant.unwrap_or_default();
        let mut views: Vec<TaskView> = self.with(|entries| {
            entries
                .values()
                .filter(|e| e.tenant == owner && e.profile.name == profile.name)
                .map(|e| e.view.clone())
                .collect()
        });
        views.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        views
    }
}

/// A progress report as a task's status message: `50/100: Completed step
/// 50 of 100`, `7`, ...
pub fn progress_text(progress: f64, total: Option<f64>, message: Option<&str>) -> String {
    let done = match total {
        Some(total) => format!("{progress}/{total}"),
        None => format!("{progress}"),
    };
    match message {
        Some(message) => format!("{done}: {message}"),
        None => done,
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

#[cfg(test)]
mod tests;
