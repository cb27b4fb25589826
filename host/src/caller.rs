//! Who is calling: a tenant (or the local user) with a permission profile,
//! an approver, and a bound on concurrent calls.

use std::sync::Arc;
use std::time::Duration;

use crate::approval::Approvals;
use crate::capability::{InForce, Profile};
use crate::error::{CallError, ErrorKind};
use crate::policy::Narrowing;

/// The identity a call runs as. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Caller {
    tenant: Option<Arc<str>>,
    profile: Arc<Profile>,
    approvals: Arc<Approvals>,
    slots: Arc<tokio::sync::Semaphore>,
    /// A tenant's HTTP requests being read or run, as many as its
    /// concurrency (see [`Caller::request_permit`]).
    requests: Arc<tokio::sync::Semaphore>,
    concurrency: usize,
    rate: Option<Arc<RateLimit>>,
    /// Whether what narrowed this caller is still what narrows its session
    /// (see [`Caller::in_force_while`]).
    in_force: Option<InForce>,
}

/// A calls-per-minute limit: a token bucket that refills continuously.
#[derive(Debug)]
struct RateLimit {
    per_minute: u32,
    state: std::sync::Mutex<(f64, std::time::Instant)>,
}

impl RateLimit {
    fn admit(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, last) = *state;
        let now = std::time::Instant::now();
        let capacity = f64::from(self.per_minute);
        let refilled =
            (tokens + now.duration_since(last).as_secs_f64() * capacity / 60.0).min(capacity);
        if refilled >= 1.0 {
            *state = (refilled - 1.0, now);
            true
        } else {
            *state = (refilled, now);
            false
        }
    }
}

impl Caller {
    /// A caller under `profile`, allowed `profile.limits.concurrency` calls at once.
    pub fn new(profile: Arc<Profile>, approvals: Arc<Approvals>) -> Self {
        let concurrency = profile.limits.concurrency.max(1);
        Self {
            tenant: None,
            slots: Arc::new(tokio::sync::Semaphore::new(concurrency)),
            requests: Arc::new(tokio::sync::Semaphore::new(concurrency)),
            concurrency,
            profile,
            approvals,
            rate: None,
            in_force: None,
        }
    }

    /// The same caller, valid only while `check` holds: a call that waited
    /// (for a slot, an approval) is refused when it starts if its session
    /// was narrowed or forgotten meanwhile.
    pub(crate) fn in_force_while(
        mut self,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.in_force = Some(InForce::new(check));
        self
    }

    /// Whether this caller is still the one its session gives (see
    /// [`Caller::in_force_while`]).
    pub(crate) fn still_in_force(&self) -> Result<(), CallError> {
        match &self.in_force {
            Some(in_force) => in_force
                .check()
                .map_err(|why| CallError::new(ErrorKind::Denied, why)),
            None => Ok(()),
        }
    }

    /// The same caller asking `approvals` (an MCP session asks its client).
    pub fn with_approvals(mut self, approvals: Arc<Approvals>) -> Self {
        self.approvals = approvals;
        self
    }

    /// Also limits the caller to `per_minute` calls per minute.
    pub fn rate_limited(mut self, per_minute: u32) -> Self {
        self.rate = Some(Arc::new(RateLimit {
            per_minute: per_minute.max(1),
            state: std::sync::Mutex::new((f64::from(per_minute.max(1)), std::time::Instant::now())),
        }));
        self
    }

    /// Counts a call against the rate limit; refuses it when none is left.
    pub(crate) fn admit(&self) -> Result<(), CallError> {
        match &self.rate {
            Some(rate) if !rate.admit() => Err(CallError::new(
                ErrorKind::Busy,
                format!(
                    "{} is limited to {} calls per minute; retry later",
                    self.who(),
                    rate.per_minute
                ),
            )),
            _ => Ok(()),
        }
    }

    fn who(&self) -> String {
        match &self.tenant {
            Some(t) => format!("tenant {t:?}"),
            None => format!("profile {:?}", self.profile.name),
        }
    }

    /// The same caller as tenant `name`, with its own bound of `concurrency`.
    pub fn tenant(mut self, name: &str, concurrency: usize) -> Self {
        self.tenant = Some(name.into());
        self.concurrency = concurrency.max(1);
        self.slots = Arc::new(tokio::sync::Semaphore::new(self.concurrency));
        self.requests = Arc::new(tokio::sync::Semaphore::new(self.concurrency));
        self
    }

    /// The tenant's name, if the caller is one.
    pub fn tenant_name(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// The profile.
    pub fn profile(&self) -> &Arc<Profile> {
        &self.profile
    }

    /// The approvals.
    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.approvals
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> usize {
        self.concurrency - self.slots.available_permits()
    }

    /// Waits up to `wait` for the room to read one more HTTP request body
    /// of this tenant (none for the local caller): a tenant reads at most
    /// its concurrency of bodies at once, so bodies sent slowly, or sent
    /// faster than its calls run, hold at most that many bodies' memory, and
    /// the rest wait unread. The permit is held for as long as the body (or
    /// what is built from it) is.
    pub(crate) async fn request_permit(
        &self,
        wait: Duration,
    ) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, String> {
        if self.tenant.is_none() {
            return Ok(None);
        }
        match tokio::time::timeout(wait, self.requests.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Some(permit)),
            _ => Err(format!(
                "{} has {} requests being read or run, as many as its concurrency, and none \
                 finished within {wait:?}; retry later, or send fewer requests at once",
                self.who(),
                self.concurrency
            )),
        }
    }

    /// Waits up to `wait` for one of the caller's call slots.
    pub(crate) async fn slot(
        &self,
        wait: Duration,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, CallError> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        match tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(CallError::new(
                ErrorKind::Busy,
                format!(
                    "{} is at its limit of {} concurrent call{} and no call finished within {wait:?}; \
                     retry later",
                    self.who(),
                    self.concurrency,
                    if self.concurrency == 1 { "" } else { "s" }
                ),
            )),
        }
    }
}

/// Most patterns (`allow` and `deny`, every narrowing together) of one
/// session's narrowings.
pub(crate) const MAX_PATTERNS: usize = 256;

/// Most bytes of pattern text of one session's narrowings.
pub(crate) const MAX_PATTERN_BYTES: usize = 16 << 10;

/// Why narrowings of `patterns` patterns and `bytes` bytes are too large
/// for one session, if they are.
pub(crate) fn too_large(patterns: usize, bytes: usize) -> Option<String> {
    if patterns > MAX_PATTERNS {
        return Some(format!(
            "the session's narrowings would hold {patterns} patterns, more than the limit of \
             {MAX_PATTERNS} per session; narrow with fewer patterns (a `*` pattern covers many \
             permissions)"
        ));
    }
    (bytes > MAX_PATTERN_BYTES).then(|| {
        format!(
            "the session's narrowings would hold {bytes} bytes of patterns, more than the limit \
             of {MAX_PATTERN_BYTES} bytes per session; narrow with shorter patterns"
        )
    })
}

/// A session's narrowings of its caller's profile (never wider). The
/// narrowed profile is made once per session, in one pass over all the
/// narrowings and outside any lock but its own, and remembered with the
/// profile it was made from, not made again for every call.
#[derive(Debug, Default)]
pub(crate) struct SessionNarrowing {
    narrowings: Vec<Arc<Narrowing>>,
    made: std::sync::Mutex<Option<(Arc<Profile>, Arc<Profile>)>>,
}

impl SessionNarrowing {
    /// Narrows by `narrowing` too.
    pub(crate) fn push(&mut self, narrowing: Narrowing) {
        self.narrowings.push(Arc::new(narrowing));
        *self.made.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// These narrowings with `narrowing` after them, as a new value (the
    /// narrowings are shared, not copied).
    pub(crate) fn and(&self, narrowing: Narrowing) -> Self {
        let mut narrowings = self.narrowings.clone();
        narrowings.push(Arc::new(narrowing));
        Self {
            narrowings,
            made: Default::default(),
        }
    }

    /// How many patterns the narrowings hold together, and their bytes.
    pub(crate) fn size(&self) -> (usize, usize) {
        let patterns = self.narrowings.iter().map(|n| n.patterns()).sum();
        (patterns, self.narrowings.iter().map(|n| n.bytes()).sum())
    }

    /// `caller` (same slots and rate) with its profile narrowed.
    pub(crate) fn apply(&self, caller: &Caller) -> Caller {
        if self.narrowings.is_empty() {
            return caller.clone();
        }
        let made = self
            .made
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|(base, _)| Arc::ptr_eq(base, &caller.profile))
            .map(|(_, narrowed)| narrowed.clone());
        let narrowed = made.unwrap_or_else(|| {
            let narrowed = Arc::new(caller.profile.narrowed_by(&self.narrowings));
            *self.made.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((caller.profile.clone(), narrowed.clone()));
            narrowed
        });
        let mut caller = caller.clone();
        caller.profile = narrowed;
        caller
    }
}
