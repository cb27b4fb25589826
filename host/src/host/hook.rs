//! Tools as approval hooks (`approvals.auto = ["tool:NAME"]`): the host
//! calls the tool for a rule, with no capability and no approver.

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use serde_json::Value;

use super::{Host, Inner};
use crate::approval::Approvals;
use crate::approval::auto::{self, AutoRule, HookTools};
use crate::caller::Caller;
use crate::capability::Profile;
use crate::host::CallRequest;

/// Calls hook tools on a host it does not keep alive (the host holds the
/// rules that hold this).
struct HostTools {
    host: Weak<Inner>,
    /// What hook tools run as: a profile that grants nothing.
    caller: Caller,
}

impl HookTools for HostTools {
    fn call<'a>(&'a self, tool: &'a str, arguments: Value) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let inner = self.host.upgrade().ok_or("the host has stopped")?;
            let host = Host { inner };
            let raw = host
                .dispatch_as(&self.caller, CallRequest::new(tool, arguments))
                .await
                .map_err(|e| e.to_string())?;
            serde_json::from_str(raw.get()).map_err(|e| e.to_string())
        })
    }
}

impl Host {
    /// The rule sets named in `approvals.auto`, hook tools bound to this
    /// host.
    pub(crate) fn auto_rules(&self, names: &[String]) -> Result<Vec<Arc<dyn AutoRule>>, String> {
        let rules = auto::rules(names)?;
        self.bind_hooks(&rules);
        Ok(rules)
    }

    /// Lets the hook rules among `rules` call this host's tools.
    pub(crate) fn bind_hooks(&self, rules: &[Arc<dyn AutoRule>]) {
        // Its answer is a decision: longer ones are refused, not parsed.
        let mut profile = Profile::deny_all("approval-hook", "/");
        profile.limits.max_output = crate::approval::MAX_ANSWER;
        let tools: Arc<dyn HookTools> = Arc::new(HostTools {
            host: Arc::downgrade(&self.inner),
            caller: Caller::new(Arc::new(profile), Arc::new(Approvals::deny_all())),
        });
        for rule in rules {
            rule.bind(&tools);
        }
    }
}
