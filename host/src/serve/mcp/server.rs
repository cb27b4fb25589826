//! The MCP server: `tools/list` with the caller's tools, `tools/call` through
//! the dispatcher, `notifications/tools/list_changed` after every reload, and
//! approvals asked through elicitation when the client supports it
//! (`approve`), guest logs forwarded (`logs`). Served over stdio (`stdio`)
//! and, as a tower service, over Streamable HTTP at `/mcp`.

// rmcp marks MCP logging deprecated (a later revision drops it); the
// revisions served here define it, and clients use it.
#![allow(deprecated)]

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CompleteRequestMethod, CompleteRequestParams, CompleteResult, ContentBlock, ErrorData,
    GetTaskParams, GetTaskResult, Implementation, ListPromptsRequestMethod, ListPromptsResult,
    ListResourceTemplatesRequestMethod, ListResourceTemplatesResult, ListResourcesRequestMethod,
    ListResourcesResult, ListToolsResult, LoggingLevel, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscriptionFilter, Tool,
    UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use rmcp::{Peer, ServerHandler};
use tokio_util::sync::CancellationToken;

use super::approve::{ElicitApprover, NoElicitation};
use super::handles;
use super::logs::log_forwarder;
use super::narrowing::session_narrowing;
use crate::approval::{Approvals, Approver};
use crate::caller::{Caller, SessionNarrowing};
use crate::error::ErrorKind;
use crate::hooks::BoxFuture;
use crate::host::CallRequest;
use crate::host::Host;
use crate::serve::answers::Held;
use crate::serve::progress::ProgressForward;
use crate::toolsets::Selection;
use crate::trace::Trace;

/// Tools per `tools/list` page; `nextCursor` leads to the next.
const TOOLS_PAGE: usize = 100;

/// What a call still running when shutdown stops waiting gets.
const ABANDONED: &str = "cancelled: the server is shutting down and the call did not finish \
                         within the drain timeout";

/// How long a user has to answer an approval asked through elicitation
/// when there is no config (otherwise `approvals.timeout`).
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(120);

/// One MCP session (a stdio connection, or one Streamable HTTP session).
#[derive(Clone)]
pub struct McpServer {
    host: Host,
    /// Stateful tools keep their state per MCP session.
    session: Arc<str>,
    /// The approvals of this session, created when the client is known.
    approvals: Arc<std::sync::OnceLock<Arc<Approvals>>>,
    /// The narrowing the client chose in `initialize`.
    narrowing: Arc<std::sync::OnceLock<SessionNarrowing>>,
    /// Cancelled when shutdown gives up waiting: calls still running end
    /// with an error saying so.
    abandon: CancellationToken,
    /// The least severe level of `notifications/message` the client asked
    /// for with `logging/setLevel` (none sent before it asks).
    log_level: Arc<std::sync::Mutex<Option<LoggingLevel>>>,
    /// Calls parked until the client answers a question (requests without
    /// sessions), shared by every request of the server.
    parked: Arc<super::ask::ParkedCalls>,
    /// Ends the session's terminal (and every process in it) when the last
    /// clone of this session goes.
    _terminal: Arc<TerminalOfSession>,
}

/// The terminal of an MCP session, ended with it.
struct TerminalOfSession {
    host: Host,
    session: Arc<str>,
}

impl Drop for TerminalOfSession {
    fn drop(&mut self) {
        if self.host.terminals().end_session(&self.session) {
            tracing::debug!(session = %self.session, "the MCP session's terminal ended with it");
        }
    }
}

impl McpServer {
    /// A new session on `host`.
    pub fn new(host: Host) -> Self {
        Self::with_abandon(host, CancellationToken::new())
    }

    /// A new session whose calls still running when `abandon` is cancelled
    /// end with an error saying the server is shutting down.
    pub fn with_abandon(host: Host, abandon: CancellationToken) -> Self {
        let session: Arc<str> = super::changes::session_id().into();
        Self {
            _terminal: Arc::new(TerminalOfSession {
                host: host.clone(),
                session: session.clone(),
            }),
            host,
            session,
            approvals: Arc::default(),
            narrowing: Arc::default(),
            abandon,
            log_level: Arc::default(),
            parked: Arc::default(),
        }
    }

    /// The same server, parking calls in `parked` (shared with the other
    /// requests of an HTTP endpoint, each of which gets a server of its own).
    pub(crate) fn parking(mut self, parked: Arc<super::ask::ParkedCalls>) -> Self {
        self.parked = parked;
        self
    }

    /// The level the client set with `logging/setLevel`, if it did.
    pub fn log_level(&self) -> Option<LoggingLevel> {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The caller of a request: the tenant the HTTP layer authenticated (in
    /// the request's extensions), or the host's default caller; with this
    /// session's approvals.
    fn caller(&self, context: &RequestContext<RoleServer>) -> Caller {
        let authenticated = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>().cloned());
        let caller = authenticated.unwrap_or_else(|| self.host.caller());
        let approvals = self
            .approvals
            .get_or_init(|| Arc::new(self.session_approvals(&context.peer)))
            .clone();
        let caller = caller.with_approvals(approvals);
        // Before `initialize` there is no narrowing to read (and none kept).
        if context.peer.peer_info().is_none() {
            return caller;
        }
        self.narrowing
            .get_or_init(|| session_narrowing(&context.peer))
            .apply(&caller)
    }

    /// Approvals asked of the client through elicitation when it supports
    /// it; otherwise refused with a message saying how to allow them.
    fn session_approvals(&self, peer: &Peer<RoleServer>) -> Approvals {
        let can_elicit = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.elicitation.is_some());
        let approver: Arc<dyn Approver> = if can_elicit {
            Arc::new(ElicitApprover {
                peer: peer.clone(),
                timeout: self.approval_timeout(),
            })
        } else {
            Arc::new(NoElicitation)
        };
        self.approvals_with(approver)
    }

    /// How long a user has to answer an approval (`approvals.timeout`).
    fn approval_timeout(&self) -> Duration {
        self.host
            .config()
            .map_or(ELICITATION_TIMEOUT, |c| c.approval_timeout)
    }

    /// Approvals asked through `approver`, with the configured allowlist and
    /// automatic rules.
    fn approvals_with(&self, approver: Arc<dyn Approver>) -> Approvals {
        let config = self.host.config();
        let allowlist = config.as_ref().map(|c| c.allowlist.clone());
        let auto = config
            .as_ref()
            .and_then(|c| self.host.auto_rules(&c.approvals_auto).ok())
            .unwrap_or_default();
        Approvals::new(approver, self.approval_timeout(), allowlist)
            .with_auto(auto)
            .editing(config.map(|c| c.source.clone()))
    }

    /// The answer to a successful call: content blocks, or a JSON result as
    /// text, and for a tool that declares an output schema (and so returned
    /// an object matching it) as `structuredContent` too.
    fn tool_result(&self, tool: &str, output: &crate::contract::CallOutput) -> CallToolResult {
        let structured = self
            .host
            .snapshot()
            .tool(tool)
            .is_some_and(|entry| entry.spec.output_schema.is_some());
        crate::serve::content::mcp_result(output, structured)
    }

    /// Runs one `tools/call` as `caller`.
    async fn run(
        self,
        caller: Caller,
        request: CallToolRequestParams,
        cx: CallContext,
    ) -> Result<CallToolResult, ErrorData> {
        let mut arguments = request.arguments.unwrap_or_default();
        // Without sessions, a tool that keeps state keeps it under the
        // handle the call names (or a new one); with them, under the session.
        let handle = match handles::stateless(&cx.meta) {
            true => match handles::take(&self.host, &caller, &request.name, &mut arguments) {
                Ok(handle) => handle,
                Err(refused) => {
                    let text = ContentBlock::text(refused.to_string());
                    return Ok(CallToolResult::error(vec![text]));
                }
            },
            false => None,
        };
        let mut call = CallRequest::new(
            request.name.to_string(),
            serde_json::Value::Object(arguments),
        );
        call.session = Some(match &handle {
            Some(handle) => handle.session(),
            None => self.session.to_string(),
        });
        call.resume = handle.as_ref().is_some_and(|handle| handle.resumes());
        call.call_id = Some(cx.id);
        // Guest log lines at or above the client's level go to it as
        // `notifications/message`, before the answer: with a session, the
        // level it set (`info` until it sets one); without, the level the
        // request names in `_meta`, and none when it names none.
        let floor = match handles::stateless(&cx.meta) {
            true => cx.meta.log_level(),
            false => Some(self.log_level().unwrap_or(LoggingLevel::Info)),
        };
        let (sink, forwarded) = log_forwarder(floor, cx.peer.clone(), cx.held.clone());
        let tool = call.tool.clone();
        // Boxed as it is made: the dispatch future is several KiB, and held
        // here (even once moved on, its place stays in this future) it would
        // be copied whole with this future, into its box and its task.
        let dispatch: BoxFuture<'_, _> = Box::pin(crate::capability::log::with_log_sink(
            sink,
            self.host.dispatch_output_as(&caller, call),
        ));
        // Progress reports go as `notifications/progress` to a client that
        // asked for them with a token (over HTTP, on the request's stream).
        let progress = cx
            .meta
            .get_progress_token()
            .map(|token| ProgressForward::start(token, cx.peer.clone()));
        let dispatch = match &progress {
            Some((sink, _)) => Box::pin(crate::capability::progress::with_progress_sink(
                sink.clone(),
                dispatch,
            )),
            None => dispatch,
        };
        // The trace the request names goes on into the call.
        let dispatch = match Trace::parse(cx.meta.get_traceparent(), cx.meta.get_tracestate()) {
            Some(trace) => Box::pin(trace.scoped(dispatch)),
            None => dispatch,
        };
        let dispatched = tokio::select! {
            result = dispatch => result,
            () = cx.ct.cancelled() => {
                return Err(ErrorData::internal_error("the call was cancelled by the client", None));
            }
            () = self.abandon.cancelled() => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(ABANDONED)]));
            }
        };
        forwarded.finish().await;
        if let Some((_, reports)) = progress {
            reports.finish().await;
        }
        let mut result = match dispatched {
            Ok(result) => self.tool_result(&tool, &result),
            Err(error) if error.kind() == ErrorKind::UnknownTool => {
                return Err(ErrorData::invalid_params(error.model_text(), None));
            }
            Err(error) if error.kind() == ErrorKind::StateLost && handle.is_some() => {
                let lost = handle.map(|handle| handle.lost(error.message()));
                let text = lost.map_or_else(|| error.model_text(), |lost| lost.to_string());
                return Ok(CallToolResult::error(vec![ContentBlock::text(text)]));
            }
            Err(error) => CallToolResult::error(vec![ContentBlock::text(error.model_text())]),
        };
        if let Some(handle) = handle {
            handle.finish(&mut result);
        }
        Ok(result)
    }

    /// What starts `request` as `caller`, asking approvals of the approver it gets.
    fn starter(
        &self,
        caller: Caller,
        request: CallToolRequestParams,
        cx: CallContext,
    ) -> impl FnOnce(
        super::ask::AskTheRequest,
    ) -> BoxFuture<'static, Result<CallToolResult, ErrorData>>
    + use<> {
        let server = self.clone();
        move |ask| {
            let approvals = Arc::new(server.approvals_with(Arc::new(ask)));
            Box::pin(server.run(caller.with_approvals(approvals), request, cx))
        }
    }
}

/// `result`, or an error result in its place when keeping it until it is
/// sent would pass the caller's `answers_held` (over HTTP).
fn counted(held: Option<&Held>, result: CallToolResult) -> CallToolResult {
    match held.map(|held| held.keep_serialized(&result)) {
        Some(Err(refused)) => CallToolResult::error(vec![ContentBlock::text(refused.model_text())]),
        _ => result,
    }
}

/// What a call needs of its request, owned so that it can outlive it.
struct CallContext {
    id: String,
    meta: rmcp::model::RequestMetaObject,
    peer: Peer<RoleServer>,
    ct: CancellationToken,
    /// Over HTTP, the request's share of its tenant's `answers_held`.
    held: Option<Held>,
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_tasks()
            .build();
        let mut info = ServerConfig::new(capabilities);
        info.server_info = Implementation::new("toolhost", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "Tools served by toolhost: each call runs in a fresh WebAssembly sandbox under this \
             connection's permission profile."
                .into(),
        );
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::LATEST))
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        super::changes::notify_changes(&self.host, context.peer);
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // Plugins compile in the background after start; the first listing
        // waits for them.
        self.host.loaded().await;
        let caller = self.caller(&context);
        let mut tools = super::tools_list_for(&self.host, &caller, &Selection::all())
            .map_err(|e| ErrorData::internal_error(e, None))?;
        // Without sessions, tools that keep state take a handle.
        if let (true, Some(listed)) = (handles::stateless(&context.meta), tools.as_array_mut()) {
            handles::list(&self.host, listed);
        }
        let mut tools: Vec<Tool> = serde_json::from_value(tools)
            .map_err(|e| ErrorData::internal_error(format!("tool definitions: {e}"), None))?;
        let total = tools.len();
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|&start| start <= total)
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!(
                            "unknown cursor {cursor:?}: pass the nextCursor of the previous \
                             page, or none for the first"
                        ),
                        None,
                    )
                })?,
        };
        let end = total.min(start + TOOLS_PAGE);
        tools.truncate(end);
        let mut result = ListToolsResult::with_all_items(tools.split_off(start));
        result.next_cursor = (end < total).then(|| end.to_string());
        // Without sessions: fresh for `[mcp] tools_ttl`, for this caller only.
        if handles::stateless(&context.meta) {
            let ttl = self.host.config().map(|c| c.tools_ttl).unwrap_or_default();
            result.ttl_ms = Some(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
            result.cache_scope = Some(rmcp::model::CacheScope::Private);
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.host.loaded().await;
        let caller = self.caller(&context);
        let mut cx = CallContext {
            id: super::client_id(&context).to_string(),
            meta: context.meta.clone(),
            peer: context.peer.clone(),
            ct: context.ct.clone(),
            held: None,
        };
        // A trace named by the HTTP header when `_meta` names none.
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let header = parts.and_then(|p| Trace::of_headers(&p.headers));
        if let (None, Some(trace)) = (cx.meta.get_traceparent(), header) {
            cx.meta.set_traceparent(trace.to_string());
            if let Some(state) = trace.state() {
                cx.meta.set_tracestate(state);
            }
        }
        // Over HTTP a result counts in answers_held until sent (or kept).
        let held = parts.and_then(|parts| parts.extensions.get::<Held>().cloned());
        cx.held = held.clone();
        let stateless = handles::stateless(&context.meta);
        // A client without sessions that declared tasks gets one for a call
        // still running after `[tasks] after`: no log lines or progress (a
        // task has no request stream), approvals through `tasks/update`.
        if stateless && super::tasks::declared(&context.meta) {
            cx.ct = CancellationToken::new();
            cx.meta.remove("progressToken");
            cx.meta.remove("io.modelcontextprotocol/logLevel");
            let (timeout, tool) = (self.approval_timeout(), request.name.to_string());
            let start = self.starter(caller.clone(), request, cx);
            let (host, cancelled) = (&self.host, context.ct.clone());
            return Box::pin(super::tasks::call(
                host, &caller, &tool, held, timeout, cancelled, start,
            ))
            .await;
        }
        // A client without sessions that can answer questions is asked for
        // approvals through `input_required`; the call runs on in a task of
        // its own between the requests (its log lines and progress go to
        // the first request's stream while it is open).
        if stateless && super::ask::can_ask(&context.meta) {
            cx.ct = CancellationToken::new();
            let timeout = self.approval_timeout();
            let start = self.starter(caller.clone(), request.clone(), cx);
            let cancelled = context.ct.clone();
            let response = Box::pin(super::ask::call(
                &self.parked,
                &self.host,
                &caller,
                &request,
                timeout,
                cancelled,
                start,
            ))
            .await?;
            return Ok(match response {
                CallToolResponse::Complete(result) => counted(held.as_ref(), result).into(),
                asked => asked,
            });
        }
        // Each way of running the call is boxed: inline, the largest of them
        // (several KiB) would be the size of this handler's future and of
        // rmcp's, copied whole whenever they move (into a task, out of it).
        let result = Box::pin(self.clone().run(caller, request, cx)).await?;
        Ok(counted(held.as_ref(), result).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let got = super::tasks::get(&self.host, &self.caller(&context), &request.task_id)?;
        // The answer, a copy of the result, counts in answers_held until
        // it is sent (over HTTP), as a call's result does.
        let parts = context.extensions.get::<axum::http::request::Parts>();
        match parts.and_then(|parts| parts.extensions.get::<Held>()) {
            Some(held) => match held.keep_serialized(&got) {
                Ok(()) => Ok(got),
                Err(refusal) => Err(ErrorData::internal_error(refusal.model_text(), None)),
            },
            None => Ok(got),
        }
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&context);
        super::tasks::update(
            &self.host,
            &caller,
            &request.task_id,
            &request.input_responses,
        )
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        super::tasks::cancel(&self.host, &self.caller(&context), &request.task_id)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.level);
        Ok(())
    }

    // Prompts, resources and completions are not served (nor advertised):
    // their methods are not found, rather than answered as empty lists.

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Err(ErrorData::method_not_found::<ListPromptsRequestMethod>())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Err(ErrorData::method_not_found::<ListResourcesRequestMethod>())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Err(ErrorData::method_not_found::<
            ListResourceTemplatesRequestMethod,
        >())
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        Err(ErrorData::method_not_found::<CompleteRequestMethod>())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let caller = self.caller(context.request_context());
        super::listen::serve(&self.host, &caller, context).await;
        Ok(())
    }
}
