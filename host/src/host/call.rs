//! One tool call end to end (resolve, validate, hooks, run, normalize).

use std::sync::Arc;
use std::time::Instant;

use serde_json::value::RawValue;

use super::checks::{parse_arguments, schema_error, unknown_tool};
use super::request::{Arguments, CallRequest};
use crate::approval::{ApprovalRequest, Subject};
use crate::audit::{AuditRecord, now_rfc3339};
use crate::caller::Caller;
use crate::capability::{ApprovalScope, Grants, SessionRef};
use crate::contract::CallOutput;
use crate::contract::CapabilityUse;
use crate::contract::spec::ToolSpec;
use crate::error::{CallError, ErrorKind};
use crate::hooks::CallInfo;
use crate::host::Host;
use crate::policy::PermissionDecision;
use crate::registry::ToolEntry;
use crate::runtime::{Flight, session_key};

pub(crate) use super::batch::{Admit, Outcome};

/// The name approvals of permissions go under in the audit record.
const APPROVAL: &str = "approval";

impl Host {
    /// Calls `tool` with `arguments` in a fresh sandbox. The result is JSON:
    /// a tool's plain-text result becomes a JSON string.
    pub async fn call(
        &self,
        tool: &str,
        arguments: impl Into<Arguments>,
    ) -> Result<Box<RawValue>, CallError> {
        self.dispatch(CallRequest::new(tool, arguments)).await
    }

    /// Runs one call end to end as the default caller. Every failure, at any
    /// stage, is a [`CallError`]; nothing panics.
    pub async fn dispatch(&self, request: CallRequest) -> Result<Box<RawValue>, CallError> {
        let caller = self.caller();
        self.dispatch_as(&caller, request).await
    }

    /// Runs one call end to end as `caller`. The result is JSON: content
    /// blocks in MCP's shape (see [`CallOutput::to_json`]).
    pub async fn dispatch_as(
        &self,
        caller: &Caller,
        request: CallRequest,
    ) -> Result<Box<RawValue>, CallError> {
        self.dispatch_output_as(caller, request)
            .await
            .map(|output| match output {
                CallOutput::Json(raw) => raw,
                content => content.to_json(),
            })
    }

    /// Runs one call end to end as `caller`: resolve the tool, check it is
    /// available to the caller, parse and validate the arguments, run the
    /// hooks, obtain approvals, wait for a call slot, run the guest with the
    /// caller's grants, normalize the output, and write the audit line.
    pub async fn dispatch_output_as(
        &self,
        caller: &Caller,
        mut request: CallRequest,
    ) -> Result<CallOutput, CallError> {
        let started = Instant::now();
        let arguments = std::mem::replace(&mut request.arguments, Arguments::Text(String::new()));
        // A call the tenant's audit budget cannot take is refused, and not
        // written either (that is the budget).
        let audit_budget = self.audit_log().map(|audit| {
            let per_minute = self.tenant_caps().audit_per_minute;
            audit.admit(caller.tenant_name(), per_minute)
        });
        let over_budget = matches!(audit_budget, Some(Err(_)));
        let admitted = match audit_budget {
            Some(Err(why)) => Err(CallError::new(ErrorKind::Busy, why)),
            _ => caller.admit().and_then(|()| ids_bounded(&request)),
        };
        let resolved = match admitted {
            Ok(()) => self.resolve(caller, &request.tool).await,
            Err(error) => Err(error),
        };
        let entry = resolved.as_ref().ok().map(|(entry, _)| entry);
        let (result, uses) = match &resolved {
            Err(error) => (Err(error.clone()), Vec::new()),
            Ok((entry, _flight)) => {
                tokio::select! {
                    biased;
                    done = self.run_entry(caller, entry, &request, arguments, started) => done,
                    // A task's call ends when the task is cancelled.
                    error = crate::tasks::cancelled_call() => (Err(error), Vec::new()),
                    () = entry.plugin.cancelled() => (Err(CallError::new(
                        ErrorKind::Cancelled,
                        format!(
                            "tool {:?}: plugin {:?} was unloaded or replaced and the call ran \
                             past the drain grace period",
                            entry.spec.name, &**entry.plugin.name()
                        ),
                    )), Vec::new()),
                }
            }
        };
        let result = result.map_err(|error| with_file_refusal(error, &uses));
        if let Err(error) = &result {
            tracing::debug!(tool = %request.tool, %error, "call failed");
        }
        if let Some(audit) = self.audit_log().filter(|_| !over_budget) {
            let error_text = result.as_ref().err().map(CallError::model_text);
            let trace = crate::trace::Trace::current();
            audit.record(&AuditRecord {
                time: now_rfc3339(),
                tenant: caller.tenant_name(),
                profile: &caller.profile().name,
                tool: &request.tool,
                plugin: entry.map(|e| &**e.plugin.name()),
                plugin_hash: entry.map(|e| e.plugin.hash().to_string()),
                call_id: request.call_id.as_deref(),
                session: request.session.as_deref(),
                trace_id: trace.as_ref().map(|t| t.trace_id.as_str()),
                parent_span_id: trace.as_ref().map(|t| t.parent_id.as_str()),
                duration_ms: started.elapsed().as_secs_f64() * 1000.0,
                outcome: match &result {
                    Ok(_) => "ok",
                    Err(e) => e.kind().as_str(),
                },
                error: error_text.as_deref(),
                capabilities: &uses,
                content: &result
                    .as_ref()
                    .map(super::output::summary)
                    .unwrap_or_default(),
            });
        }
        result
    }

    /// The tool's current entry, registered as in flight on its plugin
    /// version. A version that started draining between lookup and
    /// registration is skipped for its successor.
    async fn resolve(&self, caller: &Caller, name: &str) -> Result<(ToolEntry, Flight), CallError> {
        for _ in 0..8 {
            let snapshot = self.snapshot();
            let Some(entry) = snapshot.tool(name).cloned() else {
                return Err(match snapshot.removed(name) {
                    Some(plugin) => CallError::new(
                        ErrorKind::Unavailable,
                        format!("tool {name:?} is unavailable: its plugin {plugin:?} was removed"),
                    ),
                    None => unknown_tool(name, &snapshot, caller.profile()),
                });
            };
            if let Some(flight) = entry.plugin.begin_call() {
                return Ok((entry, flight));
            }
            tokio::task::yield_now().await;
        }
        Err(CallError::new(
            ErrorKind::Unavailable,
            format!("tool {name:?} is being reloaded; retry"),
        ))
    }

    async fn run_entry(
        &self,
        caller: &Caller,
        entry: &ToolEntry,
        request: &CallRequest,
        arguments: Arguments,
        started: Instant,
    ) -> (Result<CallOutput, CallError>, Vec<CapabilityUse>) {
        if let Err(reason) = crate::availability::check(&entry.spec, caller.profile()) {
            let error = CallError::new(
                ErrorKind::Unavailable,
                format!("tool {:?} is not available: {reason}", entry.spec.name),
            );
            return (Err(error), Vec::new());
        }
        // The profile as it applies to this tool (the tool layer on top, its
        // path rules confining its files when it declares file permissions).
        let files = declares_files(&entry.spec);
        let profile = &caller.profile().for_call(&entry.spec.name, files);
        let limits = &profile.limits;
        let (arguments, text) = match parse_arguments(&entry.spec, arguments, limits.max_arguments)
        {
            Ok(parsed) => parsed,
            Err(error) => return (Err(error), Vec::new()),
        };
        if let Err(violations) = entry.spec.validate_arguments(&arguments) {
            return (Err(schema_error(&entry.spec, &violations)), Vec::new());
        }
        let rules = caller.profile().argument_rules(&entry.spec.name);
        let context = crate::policy::layers::CallContext {
            workspace: profile.workspace(),
            files,
        };
        if let Some(refusal) = rules
            .iter()
            .find_map(|rule| rule.refuses(&arguments, &context))
        {
            let error = CallError::new(
                ErrorKind::Denied,
                format!("tool {:?}: {refusal}", entry.spec.name),
            );
            return (Err(error), Vec::new());
        }
        // Restricted arguments go to the guest as they were checked, not in a
        // spelling its parser could read otherwise (a repeated key, say).
        let text = if rules.is_empty() {
            text
        } else {
            match super::checks::written_again(&entry.spec, &arguments, limits.max_arguments) {
                Ok(text) => text,
                Err(error) => return (Err(error), Vec::new()),
            }
        };
        let info = CallInfo {
            tool: &entry.spec,
            plugin: &entry.plugin,
            arguments: &arguments,
            session: request.session.as_deref(),
            call_id: request.call_id.as_deref(),
            tenant: caller.tenant_name(),
            profile: &profile.name,
        };
        for hook in self.hooks() {
            if let Err(message) = hook.before_call(&info).await {
                let error = CallError::new(ErrorKind::Blocked, message);
                self.after_call(&info, Err(&error), started);
                return (Err(error), Vec::new());
            }
        }
        // Where approvals given "for the session" apply; built only when used.
        let scope = || {
            format!(
                "{}/{}",
                caller.tenant_name().unwrap_or("-"),
                request.session.as_deref().unwrap_or("-")
            )
        };
        let mut approved = Vec::new();
        if let Err(error) = self
            .approve_permissions(caller, profile, &entry.spec, request, &scope, &mut approved)
            .await
        {
            self.after_call(&info, Err(&error), started);
            return (Err(error), approved);
        }
        let _slot = match caller.slot(limits.timeout).await {
            Ok(slot) => slot,
            Err(error) => {
                self.after_call(&info, Err(&error), started);
                return (Err(error), Vec::new());
            }
        };
        // Approved and given a slot: the configuration it was made under
        // must still be the running one.
        if let Err(error) = self
            .still_current(caller.profile())
            .and_then(|()| caller.still_in_force())
        {
            self.after_call(&info, Err(&error), started);
            return (Err(error), Vec::new());
        }
        // What an approval asked during the call checks once answered.
        let in_force = {
            let host = Arc::downgrade(&self.inner);
            let caller = caller.clone();
            crate::capability::InForce::new(move || {
                if let Some(inner) = host.upgrade() {
                    Host { inner }
                        .still_current(caller.profile())
                        .map_err(|e| e.message().to_string())?;
                }
                caller.still_in_force().map_err(|e| e.message().to_string())
            })
        };
        let approvals = || {
            Some(ApprovalScope {
                approvals: caller.approvals().clone(),
                scope: scope(),
                tenant: caller.tenant_name().map(String::from),
                in_force: Some(in_force.clone()),
            })
        };
        let stateful_session = request
            .session
            .as_deref()
            .filter(|_| entry.plugin.is_stateful());
        let (output, uses) = match stateful_session {
            Some(session) => {
                // One instance serves every tool of the plugin in the
                // session; its grants only matter when it is started.
                let grants = || {
                    let mut grants = Grants::for_tools(
                        profile.clone(),
                        entry.plugin.tools().iter().map(|t| &**t),
                        approvals(),
                        entry.plugin.name(),
                    );
                    grants.session = Some(SessionRef {
                        key: session_key(caller.tenant_name(), session),
                        store: self.terminals().clone(),
                    });
                    Arc::new(grants)
                };
                let key = session_key(caller.tenant_name(), session);
                let plugin = &entry.plugin;
                let (spec, memory) = (&entry.spec, self.sessions_memory());
                let made_under = (caller.profile(), grants);
                plugin
                    .call_or_resume_session(
                        self.runtime(),
                        spec,
                        &text,
                        limits,
                        &key,
                        memory,
                        made_under,
                        request.resume,
                    )
                    .await
            }
            None => {
                let mut grants = Grants::for_tools(
                    profile.clone(),
                    [&*entry.spec],
                    approvals(),
                    &entry.spec.name,
                );
                grants.session = request.session.as_deref().map(|session| SessionRef {
                    key: session_key(caller.tenant_name(), session),
                    store: self.terminals().clone(),
                });
                entry
                    .plugin
                    .call(self.runtime(), &entry.spec, &text, limits, Arc::new(grants))
                    .await
            }
        };
        let mime_types = || {
            self.config()
                .map_or_else(Default::default, |config| config.mime_types.clone())
        };
        let result =
            output.and_then(|output| super::output::normalize(&entry.spec, output, mime_types));
        if !self.hooks().is_empty() {
            let json = result.as_ref().map(super::output::as_json);
            self.after_call(&info, json.as_deref().map_err(|e| *e), started);
        }
        approved.extend(uses);
        (result, approved)
    }

    /// Asks for approval of each permission the profile marks
    /// `approval_required`.
    /// Refuses a call made under a profile of a configuration that has
    /// been replaced since (it waited for an approval or a slot across a
    /// reload): what it would run was decided by rules no longer in force.
    fn still_current(&self, profile: &crate::capability::Profile) -> Result<(), CallError> {
        // A host without a configuration (built with a profile) never
        // reloads one.
        let settings = self.inner.settings.load();
        let Some(running) = settings.config.as_ref().map(|config| config.generation) else {
            return Ok(());
        };
        if profile.generation == 0 || profile.generation == running {
            return Ok(());
        }
        Err(CallError::new(
            ErrorKind::Denied,
            "the configuration was reloaded while this call waited for an approval or a free \
             slot, and the call was made under the one before; nothing ran; call again",
        ))
    }

    async fn approve_permissions(
        &self,
        caller: &Caller,
        profile: &crate::capability::Profile,
        spec: &ToolSpec,
        request: &CallRequest,
        scope: &(dyn Fn() -> String + Sync),
        audit: &mut Vec<CapabilityUse>,
    ) -> Result<(), CallError> {
        for permission in &spec.permissions {
            let PermissionDecision::NeedsApproval { pattern } =
                profile.permissions.decide(permission)
            else {
                continue;
            };
            let table = crate::config::approval_table(
                self.config().as_deref(),
                &profile.name,
                &spec.name,
                &pattern.to_string(),
            );
            let question = ApprovalRequest {
                tool: spec.name.clone(),
                profile: profile.name.clone(),
                tenant: caller.tenant_name().map(String::from),
                session: request.session.clone(),
                subject: Subject::Permission(permission.clone()),
                config_change: Some(format!(
                    "remove \"{pattern}\" from approval_required under {table}"
                )),
            };
            match caller.approvals().check(&scope(), &question).await {
                Ok(None) => audit.push(CapabilityUse::allowed(APPROVAL, permission.clone())),
                Ok(Some(rule)) => {
                    audit.push(CapabilityUse::allowed(
                        APPROVAL,
                        format!("{permission} ({rule})"),
                    ));
                }
                Err(message) => {
                    audit.push(CapabilityUse::refused(
                        APPROVAL,
                        permission.clone(),
                        &message,
                    ));
                    return Err(CallError::new(ErrorKind::Denied, message));
                }
            }
        }
        Ok(())
    }

    fn after_call(
        &self,
        info: &CallInfo<'_>,
        result: Result<&RawValue, &CallError>,
        started: Instant,
    ) {
        let elapsed = started.elapsed();
        for hook in self.hooks() {
            hook.after_call(info, result, elapsed);
        }
    }
}

/// Whether `spec` declares a permission to read or write files.
fn declares_files(spec: &ToolSpec) -> bool {
    spec.permissions.iter().any(|declared| {
        crate::policy::PermissionPattern::parse(declared).is_ok_and(|p| {
            p.matches(crate::capability::file::FILE_READ.as_str())
                || p.matches(crate::capability::file::FILE_WRITE.as_str())
        })
    })
}

/// Refuses a call or session id longer than [`crate::audit::MAX_ID`]
/// bytes, as `POST /v1/sessions` refuses such a session id: ids are kept
/// and written with every call.
fn ids_bounded(request: &CallRequest) -> Result<(), CallError> {
    let max = crate::audit::MAX_ID;
    for (what, id) in [
        ("call id", request.call_id.as_deref()),
        ("session id", request.session.as_deref()),
    ] {
        if let Some(id) = id.filter(|id| id.len() > max) {
            return Err(CallError::new(
                ErrorKind::InvalidRequest,
                format!(
                    "the {what} is {} bytes, more than the limit of {max}; use a shorter one",
                    id.len()
                ),
            ));
        }
    }
    Ok(())
}

/// `error` with why toolhost refused the call's last file operation, when
/// one was refused: a guest sees only an errno (`EACCES`), so its message
/// cannot say which rule refused or what to change; the model and the
/// author can, from this.
fn with_file_refusal(error: CallError, uses: &[CapabilityUse]) -> CallError {
    let Some((target, reason)) = uses.iter().rev().find_map(|used| {
        use crate::capability::sandbox::Capability as _;
        let file = crate::capability::file::FileAccess::INFO.name;
        (used.capability == file && !used.allowed)
            .then_some(())
            .and(used.reason.as_ref().map(|reason| (&used.target, reason)))
    }) else {
        return error;
    };
    CallError::new(
        error.kind(),
        format!("{}; toolhost refused {target}: {reason}", error.message()),
    )
}
