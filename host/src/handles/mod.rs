//! Handles: names of a conversation's state (its stateful plugins'
//! instances, its terminal) that a client without sessions passes back with
//! each call. `codec` makes and checks their text; `registry` remembers
//! which are live and why the others were dropped.

mod codec;
mod registry;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use codec::{Claims, Codec, Nonce, Owner};
pub use codec::{PREFIX, TEXT_LEN};
use registry::{Held, Refused};

use crate::capability::Profile;
use crate::capability::terminal::Terminals;
pub use crate::config::{DEFAULT_MAX_AGE, DEFAULT_MAX_PER_TENANT, HandleSettings, KeySource};
pub(crate) use crate::policy::show_duration;

/// Why a handle was refused: `kind` (`invalid_handle`, `handle_expired`,
/// `state_lost`, `too_many_handles`) and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandleError {
    /// The error's kind.
    pub kind: &'static str,
    /// What failed and what to do.
    pub message: String,
}

impl std::fmt::Display for HandleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// What every task id starts with.
pub const TASK_PREFIX: &str = "tk_";

/// What a task id is bound to in place of a request's digest: no digest of
/// a request (a SHA-256) is all `0x7a`.
const TASK_BOUND: [u8; 32] = [0x7a; 32];

/// The handles of one host.
pub struct Handles {
    settings: HandleSettings,
    codec: OnceLock<Codec>,
    held: Mutex<HashMap<String, Held>>,
    /// `session_idle`: a handle unused this long is dropped with its state.
    idle: Duration,
    terminals: Arc<Terminals>,
    /// Ends a lost handle's sessions in the stateful plugins, by session key.
    plugins: OnceLock<SessionEnder>,
}

/// What ends a session of every stateful plugin, by its session key.
pub type SessionEnder = Box<dyn Fn(&str) + Send + Sync>;

impl std::fmt::Debug for Handles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handles")
            .field("settings", &self.settings.max_per_tenant)
            .finish_non_exhaustive()
    }
}

/// A handle with a call in flight; the call ends when it is dropped.
pub struct Claimed<'a> {
    handles: &'a Handles,
    tenant: String,
    nonce: Nonce,
    /// Its text, as the client passes it.
    pub text: String,
    /// The parts of its state so far (plugin name or `terminal`) and what
    /// made each (the plugin version's hash).
    pub parts: BTreeMap<String, String>,
    /// Made for this call, which has kept no state yet (see `settle`).
    fresh: bool,
}

impl Claimed<'_> {
    /// The session id its state is kept under (what plugins are told).
    pub fn session(&self) -> String {
        session_of(&self.nonce)
    }

    /// Notes that its state now holds `part`, made by `maker`.
    pub fn record(&self, part: &str, maker: &str) {
        self.handles
            .with_held(&self.tenant, |held| held.record(&self.nonce, part, maker));
    }

    /// Settles the handle once its call is over: `made` says whether the
    /// call kept any state. A handle made for this call that kept none is
    /// dropped unseen (a call refused before it ran takes no one's place);
    /// one that kept some now counts against the tenant's cap, whose least
    /// recently used idle handles are dropped. Whether the handle lives on,
    /// to be shown to the client.
    pub fn settle(&mut self, made: bool) -> bool {
        if !self.fresh {
            return true;
        }
        if !made {
            return false;
        }
        self.fresh = false;
        let max = self.handles.settings.max_per_tenant;
        let evicted = self
            .handles
            .with_held(&self.tenant, |held| held.establish(&self.nonce, max));
        for evicted in &evicted {
            self.handles.end_terminal(&self.tenant, evicted);
        }
        true
    }

    /// Makes room for `part` (a stateful plugin's instance, or the
    /// terminal) of this handle while `has_room` says the tenant holds as
    /// many as it may: drops the state of the tenant's least recently used
    /// handle that has that part and no call in flight (a later call with
    /// it says so), rather than refusing a new conversation for as long as
    /// older ones stay idle.
    pub fn make_room(&self, part: &str, has_room: impl Fn() -> bool) {
        while !has_room() {
            let victim = self
                .handles
                .with_held(&self.tenant, |held| held.idle_holder_of(part, &self.nonce));
            let Some(victim) = victim else {
                return;
            };
            let reason = format!(
                "its {} was ended to make room for a newer conversation of its tenant, which \
                 holds as many as it may",
                match part {
                    TERMINAL => "terminal session".to_string(),
                    plugin => format!("instance of plugin {plugin:?}"),
                }
            );
            self.handles
                .with_held(&self.tenant, |held| held.lose(&victim, reason));
            self.handles.end_terminal(&self.tenant, &victim);
        }
    }

    /// Drops its state for `reason`; the error the call gets.
    pub fn lose(&self, reason: String) -> HandleError {
        self.handles
            .drop_state(&self.tenant, &self.nonce, reason.clone());
        lost(&self.text, &reason)
    }
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        let fresh = self.fresh;
        self.handles.with_held(&self.tenant, |held| {
            held.finish(&self.nonce);
            if fresh {
                held.forget(&self.nonce);
            }
        });
        if fresh {
            // Whatever a call that ended early made under it goes too.
            self.handles.end_terminal(&self.tenant, &self.nonce);
        }
    }
}

/// The name of the terminal among a handle's parts.
pub const TERMINAL: &str = "terminal";

impl Handles {
    /// Handles under `settings`, dropped after `idle` without a call; a
    /// dropped handle's terminal session in `terminals` ends with it.
    pub fn new(settings: HandleSettings, idle: Duration, terminals: Arc<Terminals>) -> Self {
        Self {
            settings,
            codec: OnceLock::new(),
            held: Mutex::default(),
            idle,
            terminals,
            plugins: OnceLock::new(),
        }
    }

    /// Sets what ends a lost handle's plugin sessions (once).
    pub fn end_plugin_sessions_with(&self, ender: SessionEnder) {
        let _ = self.plugins.set(ender);
    }

    /// The settings.
    pub fn settings(&self) -> &HandleSettings {
        &self.settings
    }

    /// A new handle of `tenant` (`None`: the local caller) under `profile`,
    /// with no state yet.
    pub fn mint(
        &self,
        tenant: Option<&str>,
        profile: &Arc<Profile>,
    ) -> Result<Claimed<'_>, HandleError> {
        let nonce: Nonce = random();
        let expires = expiry(self.settings.max_age);
        let claims = Claims {
            replica: self.settings.replica,
            expires,
            nonce,
        };
        let text = self.codec().seal(&claims, owner(tenant, profile));
        let key = tenant.unwrap_or_default();
        let max = self.settings.max_per_tenant;
        let inserted = self.with_held(key, |held| {
            held.insert(nonce, profile, max)?;
            held.begin(&nonce, profile)
        });
        match inserted {
            Ok(parts) => Ok(Claimed {
                handles: self,
                tenant: key.to_string(),
                nonce,
                text,
                parts,
                fresh: true,
            }),
            Err(Refused::Full(max)) => Err(HandleError {
                kind: "too_many_handles",
                message: format!(
                    "{} has {max} new conversations whose first call is still running, the \
                     most it may ([state] max_handles_per_tenant); wait for one to finish, or \
                     pass the handle of a conversation you have",
                    match tenant {
                        Some(tenant) => format!("tenant {tenant:?}"),
                        None => "the local caller".to_string(),
                    }
                ),
            }),
            Err(Refused::Lost(reason)) => Err(lost(&text, &reason)),
        }
    }

    /// Handle `text` of `tenant` under `profile`, for a call: refused when
    /// it was not made for this caller or was altered (`invalid_handle`, one
    /// error for every cause), expired (`handle_expired`), or its state was
    /// dropped (`state_lost`, with why).
    pub fn claim(
        &self,
        text: &str,
        tenant: Option<&str>,
        profile: &Arc<Profile>,
    ) -> Result<Claimed<'_>, HandleError> {
        let Some(claims) = self.codec().open(text, owner(tenant, profile)) else {
            return Err(invalid(text));
        };
        let now = unix_now();
        if u64::from(claims.expires) <= now {
            return Err(HandleError {
                kind: "handle_expired",
                message: format!(
                    "the handle {} expired {} ago (a handle lives at most {}, [state] \
                     handle_max_age); omit it to start new state",
                    shown(text),
                    show_duration(Duration::from_secs(now - u64::from(claims.expires))),
                    show_duration(self.settings.max_age)
                ),
            });
        }
        if claims.replica != self.settings.replica {
            return Err(HandleError {
                kind: "wrong_replica",
                message: format!(
                    "the handle {} belongs to replica {}, and this is replica {}; send the call \
                     to that replica",
                    shown(text),
                    claims.replica,
                    self.settings.replica
                ),
            });
        }
        let key = tenant.unwrap_or_default();
        let begun = self.with_held(key, |held| held.begin(&claims.nonce, profile));
        match begun {
            Ok(parts) => Ok(Claimed {
                handles: self,
                tenant: key.to_string(),
                nonce: claims.nonce,
                text: text.to_string(),
                parts,
                fresh: false,
            }),
            Err(Refused::Lost(reason)) => {
                self.end_terminal(key, &claims.nonce);
                Err(lost(text, &reason))
            }
            Err(Refused::Full(_)) => unreachable!("begin never refuses for room"),
        }
    }

    /// A request state naming parked call `id` for `ttl`, bound to the
    /// caller (`tenant`, `profile`) and to `bound`, a digest of the request
    /// it answers.
    pub fn seal_request(
        &self,
        id: &[u8; 16],
        ttl: Duration,
        tenant: Option<&str>,
        profile: &Profile,
        bound: &[u8; 32],
    ) -> String {
        let expires = expiry(ttl.max(Duration::from_secs(1)));
        self.codec()
            .seal_state(id, expires, owner(tenant, profile), bound)
    }

    /// The parked call request state `text` names, if it was sealed for this
    /// caller and request and has not expired.
    pub fn open_request(
        &self,
        text: &str,
        tenant: Option<&str>,
        profile: &Profile,
        bound: &[u8; 32],
    ) -> Option<[u8; 16]> {
        let (id, expires) = self
            .codec()
            .open_state(text, owner(tenant, profile), bound)?;
        (u64::from(expires) > unix_now()).then_some(id)
    }

    /// The id of task `id` of `tenant` under `profile`, until `ttl` from
    /// now: `tk_` and a request state's body, sealed for no request (so
    /// neither opens as the other).
    pub fn seal_task(
        &self,
        id: &[u8; 16],
        ttl: Duration,
        tenant: Option<&str>,
        profile: &Profile,
    ) -> String {
        let sealed = self.codec().seal_state(
            id,
            expiry(ttl.max(Duration::from_secs(1))),
            owner(tenant, profile),
            &TASK_BOUND,
        );
        format!("{TASK_PREFIX}{}", &sealed[codec::STATE_PREFIX.len()..])
    }

    /// The task and expiry (unix seconds) of id `text` if it was made for
    /// this caller; `None` for anything else (altered, of another tenant or
    /// profile), all alike.
    pub fn open_task(
        &self,
        text: &str,
        tenant: Option<&str>,
        profile: &Profile,
    ) -> Option<([u8; 16], u64)> {
        let body = text.strip_prefix(TASK_PREFIX)?;
        let state = format!("{}{body}", codec::STATE_PREFIX);
        let (id, expires) = self
            .codec()
            .open_state(&state, owner(tenant, profile), &TASK_BOUND)?;
        Some((id, u64::from(expires)))
    }

    /// 128 random bits.
    pub fn random_id() -> [u8; 16] {
        random()
    }

    /// How many live handles `tenant` holds.
    pub fn held(&self, tenant: Option<&str>) -> usize {
        self.with_held(tenant.unwrap_or_default(), |held| held.len())
    }

    fn codec(&self) -> &Codec {
        self.codec.get_or_init(|| {
            let key = match &self.settings.key {
                KeySource::Key(key) => *key,
                KeySource::File(path) => match crate::runtime::load_key(path) {
                    Ok(key) => key,
                    Err(e) => {
                        tracing::warn!(
                            "handles use a key of this process only, so a restart makes every \
                             handle invalid: {e}"
                        );
                        random()
                    }
                },
                KeySource::Random => random(),
            };
            Codec::new(&key)
        })
    }

    /// Runs `f` on `tenant`'s handles, after dropping those idle too long
    /// (and their terminals).
    fn with_held<T>(&self, tenant: &str, f: impl FnOnce(&mut Held) -> T) -> T {
        let (result, idle) = {
            let mut all = self.held.lock().unwrap_or_else(|e| e.into_inner());
            let held = all.entry(tenant.to_string()).or_default();
            let reason = format!(
                "it was idle for {}, the session_idle limit",
                show_duration(self.idle)
            );
            let idle = held.expire_idle(self.idle, &reason);
            (f(held), idle)
        };
        for nonce in idle {
            self.end_terminal(tenant, &nonce);
        }
        result
    }

    fn drop_state(&self, tenant: &str, nonce: &Nonce, reason: String) {
        self.with_held(tenant, |held| held.lose(nonce, reason));
        self.end_terminal(tenant, nonce);
    }

    /// Ends everything of a lost handle: its terminal and its instance in
    /// every stateful plugin, so their slots are free at once.
    fn end_terminal(&self, tenant: &str, nonce: &Nonce) {
        let tenant = Some(tenant).filter(|t| !t.is_empty());
        let key = crate::runtime::session_key(tenant, &session_of(nonce));
        self.terminals.end(&key);
        if let Some(end) = self.plugins.get() {
            end(&key);
        }
    }
}

/// The session id of the state named `nonce`.
fn session_of(nonce: &Nonce) -> String {
    let hex: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}{hex}", crate::runtime::HANDLE_SESSION)
}

fn owner<'a>(tenant: Option<&'a str>, profile: &'a Profile) -> Owner<'a> {
    Owner {
        tenant,
        profile: &profile.name,
    }
}

/// The error of a handle this caller was not given, or that was altered:
/// one for every cause, so it tells nothing about other callers' handles.
pub fn invalid(text: &str) -> HandleError {
    HandleError {
        kind: "invalid_handle",
        message: format!(
            "the handle {} was not issued to this caller or was altered; pass a handle exactly \
             as a result returned it, or omit it to start new state",
            shown(text)
        ),
    }
}

fn lost(text: &str, reason: &str) -> HandleError {
    HandleError {
        kind: "state_lost",
        message: format!(
            "the state of handle {} was dropped: {reason}; nothing ran; omit the handle to start \
             new state",
            shown(text)
        ),
    }
}

/// A handle as errors show it: its start, quoted (it may be anything the
/// client sent).
fn shown(text: &str) -> String {
    let start: String = text.chars().take(10).collect();
    if start.len() < text.len() {
        format!("{:?}", format!("{start}…"))
    } else {
        format!("{start:?}")
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// `N` bytes from the kernel's CSPRNG.
fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    let mut filled = 0;
    while filled < N {
        // SAFETY: the pointer and length describe the unfilled rest of `bytes`.
        let got = unsafe { libc::getrandom(bytes[filled..].as_mut_ptr().cast(), N - filled, 0) };
        if got > 0 {
            filled += got as usize;
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            panic!(
                "getrandom failed: {}; handles cannot be made without the kernel's random numbers",
                std::io::Error::last_os_error()
            );
        }
    }
    bytes
}

#[cfg(test)]
mod tests;

/// The expiry `ttl` from now, in seconds since 1970, capped to the 4-byte
/// field rather than wrapped.
fn expiry(ttl: Duration) -> u32 {
    u32::try_from(unix_now().saturating_add(ttl.as_secs())).unwrap_or(u32::MAX)
}
