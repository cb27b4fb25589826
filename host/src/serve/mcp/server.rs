//! The MCP server: `tools/list` with the caller's tools, `tools/call` through
//! the dispatcher, `notifications/tools/list_changed` after every reload, and
//! approvals asked through elicitation when the client supports it. Served
//! over stdio and, as a tower service, over Streamable HTTP at `/mcp`.

// rmcp marks MCP logging deprecated (a later revision drops it); the
// revisions served here define it, and clients use it.
#![allow(deprecated)]

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestMethod,
    CompleteRequestParams, CompleteResult, ContentBlock, ErrorData, Implementation,
    ListPromptsRequestMethod, ListPromptsResult, ListResourceTemplatesRequestMethod,
    ListResourceTemplatesResult, ListResourcesRequestMethod, ListResourcesResult, ListToolsResult,
    LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscriptionFilter, Tool,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use rmcp::{Peer, ServerHandler, ServiceExt};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::super::progress::ProgressForward;
use crate::approval::{Approval, ApprovalRequest, Approvals, Approver, DenyApprover};
use crate::caller::Caller;
use crate::dispatch::CallRequest;
use crate::error::ErrorKind;
use crate::hooks::BoxFuture;
use crate::host::Host;
use crate::toolsets::Selection;

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
    /// Cancelled when shutdown gives up waiting: calls still running end
    /// with an error saying so.
    abandon: CancellationToken,
    /// The least severe level of `notifications/message` the client asked
    /// for with `logging/setLevel` (none sent before it asks).
    log_level: Arc<std::sync::Mutex<Option<LoggingLevel>>>,
}

impl McpServer {
    /// A new session on `host`.
    pub fn new(host: Host) -> Self {
        Self::with_abandon(host, CancellationToken::new())
    }

    /// A new session whose calls still running when `abandon` is cancelled
    /// end with an error saying the server is shutting down.
    pub fn with_abandon(host: Host, abandon: CancellationToken) -> Self {
        Self {
            host,
            session: session_id().into(),
            approvals: Arc::default(),
            abandon,
            log_level: Arc::default(),
        }
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
            .get_or_init(|| Arc::new(self.session_approvals(&context.peer, &caller)))
            .clone();
        caller.with_approvals(approvals)
    }

    /// Approvals asked of the client through elicitation when it supports
    /// it; otherwise refused with a message saying how to allow them.
    fn session_approvals(&self, peer: &Peer<RoleServer>, caller: &Caller) -> Approvals {
        let can_elicit = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.elicitation.is_some());
        let config = self.host.config();
        let timeout = config
            .as_ref()
            .map_or(ELICITATION_TIMEOUT, |c| c.approval_timeout);
        let approver: Arc<dyn Approver> = if can_elicit {
            Arc::new(ElicitApprover {
                peer: peer.clone(),
                timeout,
            })
        } else {
            Arc::new(NoElicitation)
        };
        let allowlist = config.map(|c| c.allowlist.clone());
        let _ = caller;
        Approvals::new(approver, timeout, allowlist)
    }

    /// The answer to a successful call: the result as text, and for a tool
    /// that declares an output schema (and so returned an object matching
    /// it) as `structuredContent` too.
    fn tool_result(&self, tool: &str, result: &serde_json::value::RawValue) -> CallToolResult {
        let mut answer = CallToolResult::success(vec![ContentBlock::text(result.get())]);
        let structured = self
            .host
            .snapshot()
            .tool(tool)
            .is_some_and(|entry| entry.spec.output_schema.is_some());
        if structured {
            answer.structured_content = serde_json::from_str(result.get())
                .ok()
                .filter(serde_json::Value::is_object);
        }
        answer
    }

    /// Sends `notifications/tools/list_changed` to `peer` after each reload,
    /// until the client goes away.
    fn notify_changes(&self, peer: Peer<RoleServer>) {
        let mut events = self.host.events();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) if event.changes_tools() => {
                        if peer.is_transport_closed()
                            || peer.notify_tool_list_changed().await.is_err()
                        {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if peer.notify_tool_list_changed().await.is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
        });
    }
}

fn session_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("mcp-{now:x}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
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
        self.notify_changes(context.peer);
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
        let tools = self
            .host
            .mcp_tools_for(&caller, &Selection::all())
            .map_err(|e| ErrorData::internal_error(e, None))?;
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
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.host.loaded().await;
        let caller = self.caller(&context);
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let mut call = CallRequest::new(request.name.to_string(), arguments);
        call.session = Some(self.session.to_string());
        call.call_id = Some(context.id.to_string());
        // Guest log lines at or above the client's level (`info` until it
        // sets one) go to it as `notifications/message`, before the answer.
        let floor = self.log_level().unwrap_or(LoggingLevel::Info);
        let (sink, forwarded) = log_forwarder(floor, context.peer.clone());
        let tool = call.tool.clone();
        let dispatch = crate::runtime::with_log_sink(sink, self.host.dispatch_as(&caller, call));
        // Progress reports go as `notifications/progress` to a client that
        // asked for them with a token (over HTTP, on the request's stream).
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| ProgressForward::start(token, context.peer.clone()));
        // Boxed: rmcp moves every request's handler future into a task of its
        // own, and the dispatch future (several KiB) would make that copy
        // larger for every request, `ping` included.
        let dispatch: BoxFuture<'_, _> = match &progress {
            Some((sink, _)) => Box::pin(crate::runtime::with_progress_sink(sink.clone(), dispatch)),
            None => Box::pin(dispatch),
        };
        let dispatched = tokio::select! {
            result = dispatch => result,
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("the call was cancelled by the client", None));
            }
            () = self.abandon.cancelled() => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(ABANDONED)]).into());
            }
        };
        forwarded.finish().await;
        if let Some((_, reports)) = progress {
            reports.finish().await;
        }
        match dispatched {
            Ok(result) => Ok(self.tool_result(&tool, &result).into()),
            Err(error) if error.kind() == ErrorKind::UnknownTool => {
                Err(ErrorData::invalid_params(error.model_text(), None))
            }
            Err(error) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(error.model_text())]).into())
            }
        }
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
        let mut events = self.host.events();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                event = events.recv() => match event {
                    Ok(event) if !event.changes_tools() => {}
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if context.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(_) => return Ok(()),
                },
            }
        }
    }
}

/// The answer a client gives to an approval question.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct ApprovalAnswer {
    /// once: allow this call; session: allow for this session; always: allow
    /// from now on; deny: refuse.
    decision: Decision,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
enum Decision {
    Once,
    Session,
    Always,
    Deny,
}

rmcp::elicit_safe!(ApprovalAnswer);

/// Asks the MCP client's user through elicitation.
struct ElicitApprover {
    peer: Peer<RoleServer>,
    /// How long the user has to answer (`approvals.timeout`).
    timeout: Duration,
}

impl Approver for ElicitApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            let message = format!("Approval needed: {request}");
            match self
                .peer
                .elicit_with_timeout::<ApprovalAnswer>(message, Some(self.timeout))
                .await
            {
                Ok(Some(answer)) => match answer.decision {
                    Decision::Once => Approval::Once,
                    Decision::Session => Approval::Session,
                    Decision::Always => Approval::Always,
                    Decision::Deny => Approval::Deny,
                },
                Ok(None) => Approval::Deny,
                Err(error) => {
                    tracing::warn!(%error, "approval through elicitation failed");
                    Approval::Deny
                }
            }
        })
    }

    fn how_to_allow(&self) -> &str {
        "the user declined or did not answer"
    }
}

/// For clients that cannot be asked.
struct NoElicitation;

impl Approver for NoElicitation {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        DenyApprover.approve(request)
    }

    fn how_to_allow(&self) -> &str {
        "this MCP client does not support elicitation, so no one can be asked; add the entry to \
         the approvals allowlist file, remove the permission from approval_required, or set \
         terminal.dangerous in the profile"
    }
}

/// Serves MCP on stdin and stdout until the client disconnects or `stop` is
/// cancelled. Logs go to stderr; nothing but protocol messages is written to
/// stdout.
///
/// When `stop` is cancelled, stdin is no longer read; the requests already
/// read are answered, those still running after `drain_timeout` with an
/// error saying the server is shutting down, and then this returns.
///
/// When both are pipes (as MCP clients start servers) they are read and
/// written on the runtime's IO driver, through descriptors of their own in
/// non-blocking mode; otherwise (a terminal, a file) through Tokio's blocking
/// stdio, which hands every read and write to another thread.
pub async fn serve_stdio(
    host: Host,
    stop: CancellationToken,
    drain_timeout: Duration,
) -> Result<()> {
    let abandon = CancellationToken::new();
    let server = McpServer::with_abandon(host, abandon.clone());
    let (read, write) = rmcp::transport::stdio_pipes();
    let transport = super::super::stdio::StdioTransport::new(
        read,
        write,
        super::super::stdio::MAX_PENDING,
        stop.clone(),
    );
    let running = match server.serve(transport).await {
        Ok(running) => running,
        // Stopped before the client initialized the session.
        Err(_) if stop.is_cancelled() => return Ok(()),
        Err(e) => return Err(e).context("starting the MCP server on stdio"),
    };
    let mut waiting = std::pin::pin!(running.waiting());
    let gave_up = async {
        stop.cancelled().await;
        tracing::info!("shutting down: answering the requests in flight");
        tokio::time::sleep(drain_timeout).await;
    };
    tokio::select! {
        served = &mut waiting => {
            served.context("serving MCP on stdio")?;
            return Ok(());
        }
        () = gave_up => {}
    }
    tracing::warn!(
        "calls still running after the drain timeout of {drain_timeout:?}; answering them \
         with an error"
    );
    abandon.cancel();
    match tokio::time::timeout(ABANDON_GRACE, waiting).await {
        Ok(served) => {
            served.context("serving MCP on stdio")?;
        }
        Err(_) => tracing::warn!("the MCP session did not end in time; exiting anyway"),
    }
    Ok(())
}

/// How long the answers of abandoned calls have to be written.
const ABANDON_GRACE: Duration = Duration::from_secs(2);

/// Polls `fd` until it is readable (or closed) or `budget` has passed,
/// without sleeping. `toolhost serve` on stdio runs this each time its
/// thread is about to sleep with nothing to do, so a client that sends its
/// next message within the budget does not also pay for waking the thread
/// (tens of microseconds on a virtual machine, more than the rest of a
/// round trip). The CPU spent is bounded by the budget per idle period.
pub fn poll_readable(fd: std::os::fd::BorrowedFd<'_>, budget: Duration) {
    use std::os::fd::AsRawFd as _;
    let started = std::time::Instant::now();
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd for a descriptor borrowed for this call; a zero
    // timeout never blocks.
    while unsafe { libc::poll(&mut poll, 1, 0) } == 0 && started.elapsed() < budget {
        std::hint::spin_loop();
    }
}

/// The guest log lines of one call on their way to the client: a task that
/// sends them in order, started by the first line (most calls log nothing
/// and pay nothing).
struct LogForward {
    floor: LoggingLevel,
    peer: Peer<RoleServer>,
    #[allow(clippy::type_complexity)]
    started: std::sync::Mutex<
        Option<(
            tokio::sync::mpsc::UnboundedSender<LoggingMessageNotificationParam>,
            tokio::task::JoinHandle<()>,
        )>,
    >,
}

impl LogForward {
    fn send(&self, line: LoggingMessageNotificationParam) {
        let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        let (sender, _) = started.get_or_insert_with(|| {
            let (sender, mut lines) = tokio::sync::mpsc::unbounded_channel();
            let peer = self.peer.clone();
            let task = tokio::spawn(async move {
                while let Some(line) = lines.recv().await {
                    if peer.notify_logging_message(line).await.is_err() {
                        return;
                    }
                }
            });
            (sender, task)
        });
        let _ = sender.send(line);
    }

    /// Waits until every line sent so far has gone to the client.
    async fn finish(&self) {
        let started = self
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((sender, task)) = started {
            drop(sender);
            let _ = task.await;
        }
    }
}

/// A log sink sending guest log lines at or above `floor` to `peer` as
/// `notifications/message`, and the forwarding to finish before answering.
fn log_forwarder(
    floor: LoggingLevel,
    peer: Peer<RoleServer>,
) -> (crate::runtime::LogSink, Arc<LogForward>) {
    let forward = Arc::new(LogForward {
        floor,
        peer,
        started: std::sync::Mutex::new(None),
    });
    let lines = forward.clone();
    let sink: crate::runtime::LogSink = Arc::new(move |level, plugin, tool, message| {
        let level = match level {
            "error" => LoggingLevel::Error,
            "warn" => LoggingLevel::Warning,
            "info" => LoggingLevel::Info,
            _ => LoggingLevel::Debug,
        };
        if severity(level) < severity(lines.floor) {
            return;
        }
        let data = serde_json::json!({ "plugin": plugin, "tool": tool, "message": message });
        // `-`: outside a tool (a stateful plugin's session setup).
        let logger = match tool {
            "-" => plugin.to_string(),
            tool => format!("{plugin}/{tool}"),
        };
        lines.send(LoggingMessageNotificationParam::new(level, data).with_logger(logger));
    });
    (sink, forward)
}

/// The order of MCP log levels, least severe first.
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

#[cfg(test)]
mod tests;
