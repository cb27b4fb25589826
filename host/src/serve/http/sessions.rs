//! MCP sessions kept to the tenant that opened them, each tenant holding at
//! most `tenant_caps.mcp_sessions` of them, and at most `tenant_caps.mcp_streams`
//! `/mcp` responses open (streams until they end), within its share of the
//! server's connections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::Value;

use crate::host::Host;
use crate::serve::api::error_response;
use crate::serve::connections::held_with_body;
use crate::serve::jsonrpc::{INVALID_REQUEST, Refusal};
use crate::serve::mcp::streamable::{MCP_SESSION, McpEndpoint, refusal_response};

/// Who opened each MCP session, and the sessions being opened now.
pub(in crate::serve) struct SessionOwners {
    host: Host,
    mcp: Arc<McpEndpoint>,
    /// The server's `--max-connections`, shared by the tenants.
    max_connections: usize,
    table: Mutex<Owners>,
}

#[derive(Default)]
struct Owners {
    /// The tenant (`None`: the local caller) of each session id.
    opened: HashMap<String, Option<String>>,
    /// Requests that may open a session, by tenant, still running.
    opening: HashMap<Option<String>, usize>,
    /// `/mcp` responses open, by tenant, until their body ends.
    open: HashMap<Option<String>, usize>,
}

impl Owners {
    fn held(&self, tenant: &Option<String>) -> usize {
        let opened = self.opened.values().filter(|t| *t == tenant).count();
        opened + self.opening.get(tenant).copied().unwrap_or(0)
    }
}

/// A place among a tenant's sessions, held while a request that may open
/// one runs.
struct Opening<'a> {
    owners: &'a SessionOwners,
    tenant: Option<String>,
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        let mut table = self.owners.lock();
        if let Some(opening) = table.opening.get_mut(&self.tenant) {
            *opening -= 1;
            if *opening == 0 {
                table.opening.remove(&self.tenant);
            }
        }
    }
}

/// One open `/mcp` response of a tenant, counted until its body is done
/// or dropped.
struct Responding {
    owners: Arc<SessionOwners>,
    tenant: Option<String>,
}

impl Drop for Responding {
    fn drop(&mut self) {
        let mut table = self.owners.lock();
        if let Some(open) = table.open.get_mut(&self.tenant) {
            *open -= 1;
            if *open == 0 {
                table.open.remove(&self.tenant);
            }
        }
    }
}

impl SessionOwners {
    pub(in crate::serve) fn new(host: Host, mcp: Arc<McpEndpoint>, max_connections: usize) -> Self {
        Self {
            host,
            mcp,
            max_connections,
            table: Mutex::default(),
        }
    }

    /// A place for one more open `/mcp` response of `tenant`, or why there
    /// is none: at most `tenant_caps.mcp_streams`, and at most an even share
    /// of the connections with the local caller counted as one more tenant,
    /// so that no tenant's open streams can hold the slots another needs.
    fn respond(self: &Arc<Self>, tenant: &Option<String>) -> Result<Responding, String> {
        let tenants = self.host.config().map_or(0, |config| config.tenants.len());
        let cap = self.host.tenant_caps().mcp_streams;
        let share = (self.max_connections / (tenants + 1)).max(1);
        let max = cap.min(share);
        let mut table = self.lock();
        let open = table.open.entry(tenant.clone()).or_default();
        if *open >= max {
            let whose = match tenant {
                Some(tenant) => format!("tenant {tenant:?}"),
                None => "the local caller".into(),
            };
            let limit = if cap <= share {
                format!("its cap of tenant_caps.mcp_streams = {cap}")
            } else {
                format!(
                    "its share of --max-connections = {} among {} tenants and the local caller",
                    self.max_connections, tenants
                )
            };
            return Err(format!(
                "{whose} holds {max} /mcp responses open (streams such as subscriptions/listen \
                 included), {limit}; close one of its streams first"
            ));
        }
        *open += 1;
        Ok(Responding {
            owners: self.clone(),
            tenant: tenant.clone(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Owners> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for one more session of `tenant`, or why there is none.
    /// Sessions the server no longer holds (ended when idle) are let go
    /// first when the tenant is at its cap.
    async fn reserve(&self, tenant: &Option<String>) -> Result<Opening<'_>, String> {
        let max = self.host.tenant_caps().mcp_sessions;
        let theirs: Vec<String> = {
            let table = self.lock();
            if table.held(tenant) < max {
                Vec::new()
            } else {
                let theirs = table.opened.iter().filter(|(_, t)| *t == tenant);
                theirs.map(|(id, _)| id.clone()).collect()
            }
        };
        let mut gone = Vec::new();
        for id in theirs {
            if !self.mcp.holds(&id).await {
                gone.push(id);
            }
        }
        let mut table = self.lock();
        for id in &gone {
            table.opened.remove(id);
        }
        let held = table.held(tenant);
        if held >= max {
            let whose = match tenant {
                Some(tenant) => format!("tenant {tenant:?}"),
                None => "the local caller".into(),
            };
            return Err(format!(
                "{whose} holds {held} MCP sessions, its cap of tenant_caps.mcp_sessions = {max}; \
                 close one (DELETE /mcp with its Mcp-Session-Id) or wait until one ends when idle"
            ));
        }
        *table.opening.entry(tenant.clone()).or_default() += 1;
        Ok(Opening {
            owners: self,
            tenant: tenant.clone(),
        })
    }
}

/// An MCP session belongs to the tenant that opened it: to any other caller
/// its id is unknown (404), so no one can post into, listen to or close
/// another tenant's session. A request that may open a session is refused
/// (429) when the tenant holds its cap of them.
pub(in crate::serve) async fn keep_sessions_to_their_tenant(
    State(owners): State<Arc<SessionOwners>>,
    request: Request,
    next: Next,
) -> Response {
    let tenant = request
        .extensions()
        .get::<crate::Caller>()
        .and_then(|caller| caller.tenant_name().map(str::to_owned));
    let session = request
        .headers()
        .get(MCP_SESSION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let owned_by_another = session.as_ref().is_some_and(|id| {
        let table = owners.lock();
        table.opened.get(id).is_some_and(|owner| *owner != tenant)
    });
    if owned_by_another {
        return error_response(StatusCode::NOT_FOUND, "no such MCP session");
    }
    let opening = if session.is_none() && request.method() == Method::POST {
        match owners.reserve(&tenant).await {
            Ok(opening) => Some(opening),
            Err(message) => {
                let refusal = Refusal::new(Value::Null, INVALID_REQUEST, message);
                return refusal_response(StatusCode::TOO_MANY_REQUESTS, &refusal);
            }
        }
    } else {
        None
    };
    let responding = match owners.respond(&tenant) {
        Ok(responding) => responding,
        Err(message) => {
            let refusal = Refusal::new(Value::Null, INVALID_REQUEST, message);
            return refusal_response(StatusCode::TOO_MANY_REQUESTS, &refusal);
        }
    };
    let closing = request.method() == Method::DELETE;
    let response = next.run(request).await;
    {
        let mut table = owners.lock();
        if let Some(opened) = response
            .headers()
            .get(MCP_SESSION)
            .and_then(|value| value.to_str().ok())
        {
            table.opened.entry(opened.to_owned()).or_insert(tenant);
        }
        if closing
            && response.status().is_success()
            && let Some(id) = session
        {
            table.opened.remove(&id);
        }
    }
    drop(opening);
    held_with_body(response, responding)
}
