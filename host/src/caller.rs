//! Who is calling: a tenant (or the local user) with a permission profile,
//! an approver, and a bound on concurrent calls.

use std::sync::Arc;
use std::time::Duration;

use crate::approval::Approvals;
use crate::error::{CallError, ErrorKind};
use crate::policy::Profile;

/// The identity a call runs as. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Caller {
    tenant: Option<Arc<str>>,
    profile: Arc<Profile>,
    approvals: Arc<Approvals>,
    slots: Arc<tokio::sync::Semaphore>,
    concurrency: usize,
}

impl Caller {
    /// A caller under `profile`, allowed `profile.limits.concurrency` calls at once.
    pub fn new(profile: Arc<Profile>, approvals: Arc<Approvals>) -> Self {
        let concurrency = profile.limits.concurrency.max(1);
        Self {
            tenant: None,
            slots: Arc::new(tokio::sync::Semaphore::new(concurrency)),
            concurrency,
            profile,
            approvals,
        }
    }

    /// The same caller as tenant `name`, with its own bound of `concurrency`.
    pub fn tenant(mut self, name: &str, concurrency: usize) -> Self {
        self.tenant = Some(name.into());
        self.concurrency = concurrency.max(1);
        self.slots = Arc::new(tokio::sync::Semaphore::new(self.concurrency));
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

    /// Waits up to `wait` for one of the caller's call slots.
    pub(crate) async fn slot(
        &self,
        wait: Duration,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, CallError> {
        match tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(CallError::new(
                ErrorKind::Busy,
                format!(
                    "{} is at its limit of {} concurrent call{} and no call finished within {wait:?}; \
                     retry later",
                    match &self.tenant {
                        Some(t) => format!("tenant {t:?}"),
                        None => format!("profile {:?}", self.profile.name),
                    },
                    self.concurrency,
                    if self.concurrency == 1 { "" } else { "s" }
                ),
            )),
        }
    }
}
