//! The network capability's imports: the WIT interface `http` (and contract
//! 0.1's name for it), each request checked against the profile before it
//! is sent, redirects followed here.

use reqwest::header::{self, HeaderMap};
use wasmtime::component::Linker;
use wasmtime_wasi::WasiCtxBuilder;

use super::connect::{Destination, Unreachable, describe};
use super::request::{self, Outgoing, unparsed_target};
use super::{NETWORK_FETCH, Network, NetworkRules};
use crate::capability::Profile;
use crate::capability::grants::Grants;
use crate::capability::sandbox::{Capability, CapabilityInfo, InRoom, Room, Sandbox};
use crate::contract::bindings::toolhost::plugin::http::{
    self as wit, Host, HttpError, Request, Response,
};
use crate::policy::PermissionRules;

impl Capability for Network {
    const INFO: CapabilityInfo = CapabilityInfo {
        name: "http",
        permissions: &[NETWORK_FETCH],
        section: Some("network"),
        description: "HTTP requests to the hosts the profile's network.allow_hosts allows, \
                      each hop and address checked, capped in time and size",
        each: &[],
    };
    type State = ();

    fn state(_: &Grants, _: &mut WasiCtxBuilder) {}

    fn add_to_linker(linker: &mut Linker<Sandbox>) -> wasmtime::Result<()> {
        wit::add_to_linker::<_, InRoom<Self>>(linker, Sandbox::room::<Self>)?;
        // The same functions under contract 0.1's name.
        crate::contract::adapter::v0_1::add_http_to_linker::<_, InRoom<Self>>(
            linker,
            Sandbox::room::<Self>,
        )
    }
}

/// Initial capacity of a response body buffer at most (it grows as data comes).
const BODY_PREALLOCATION: u64 = 1 << 20;

impl Host for Room<'_, Network> {
    async fn fetch(&mut self, request: Request) -> wasmtime::Result<Result<Response, HttpError>> {
        let attempted = unparsed_target(&request);
        if !self.granted() {
            let reason = self.missing_permission();
            self.refuse(attempted, &reason);
            return Ok(Err(HttpError::Denied(reason)));
        }
        let mut outgoing = match Outgoing::from_guest(request) {
            Ok(outgoing) => outgoing,
            Err(problem) => {
                self.refuse(attempted, &problem);
                return Ok(Err(HttpError::InvalidRequest(problem)));
            }
        };
        // The caller's trace goes on, as a span of this request.
        crate::trace::Trace::continue_into(&mut outgoing.headers);
        let profile = self.call.grants.profile.clone();
        let limits = &profile.network;
        let time_limit = outgoing
            .timeout
            .map_or(limits.timeout, |asked| asked.min(limits.timeout));
        let first = outgoing.target();
        let outcome = tokio::time::timeout(time_limit, self.exchange(&profile, outgoing)).await;
        let result = outcome.unwrap_or(Err(HttpError::Timeout));
        match &result {
            Ok(response) => tracing::debug!(
                plugin = %self.call.identity.plugin,
                tool = self.call.identity.tool_name(),
                request = %first,
                status = response.status,
                bytes = response.body.len(),
                "http request done"
            ),
            Err(error) => tracing::debug!(
                plugin = %self.call.identity.plugin,
                tool = self.call.identity.tool_name(),
                request = %first,
                error = ?error,
                time_limit = ?time_limit,
                "http request failed"
            ),
        }
        Ok(result)
    }
}

impl Room<'_, Network> {
    /// Sends `outgoing`, following redirects, each hop checked and recorded.
    async fn exchange(
        &mut self,
        profile: &Profile,
        mut outgoing: Outgoing,
    ) -> Result<Response, HttpError> {
        let limits = &profile.network;
        let mut redirects = 0;
        loop {
            let response = self.send(profile, &outgoing).await?;
            let location = response.headers().get(header::LOCATION);
            let next = outgoing
                .redirect(response.status(), location)
                .map_err(HttpError::Failed)?;
            let Some(next) = next else {
                return read(response, limits).await;
            };
            if redirects >= limits.max_redirects {
                return Err(HttpError::Failed(format!(
                    "too many redirects: {} answered {} after {redirects} redirects, \
                     and the profile's network.max_redirects is {}",
                    request::redacted(&outgoing.url),
                    response.status(),
                    limits.max_redirects
                )));
            }
            redirects += 1;
            tracing::debug!(
                from = %outgoing.target(),
                to = %next.target(),
                status = %response.status(),
                "following a redirect"
            );
            outgoing = next;
        }
    }

    /// One hop: checks the host and its addresses, then sends to them only.
    async fn send(
        &mut self,
        profile: &Profile,
        outgoing: &Outgoing,
    ) -> Result<reqwest::Response, HttpError> {
        let target = outgoing.target();
        let broken = profile
            .network
            .url_rules
            .iter()
            .find_map(|rule| rule.refuses(outgoing.url.as_str()));
        if let Some(reason) = broken {
            self.refuse(target, &reason);
            return Err(HttpError::Denied(reason));
        }
        let destination = match Destination::check(&profile.network.hosts, &outgoing.url).await {
            Ok(destination) => destination,
            Err(Unreachable::Refused(reason)) => {
                let reason = format!("{target} refused: {reason}");
                self.refuse(target, &reason);
                return Err(HttpError::Denied(reason));
            }
            Err(Unreachable::Unresolved(problem)) => {
                self.allowed(target);
                return Err(HttpError::Failed(problem));
            }
        };
        self.allowed(target.clone());
        tracing::debug!(
            plugin = %self.call.identity.plugin,
            tool = self.call.identity.tool_name(),
            request = %target,
            addresses = ?destination.addrs(),
            "http request allowed"
        );
        let client = destination
            .client(outgoing.url.scheme() == "https")
            .map_err(HttpError::Failed)?;
        let mut request = reqwest::Request::new(outgoing.method.clone(), outgoing.url.clone());
        *request.headers_mut() = outgoing.headers.clone();
        if let Some(body) = &outgoing.body {
            *request.body_mut() = Some(body.clone().into());
        }
        client.execute(request).await.map_err(|e| {
            if e.is_timeout() {
                HttpError::Timeout
            } else {
                HttpError::Failed(format!("{target}: {}", describe(e)))
            }
        })
    }

    /// Why this call may not fetch at all: the tool did not declare
    /// `network:fetch`, or the profile does not allow it.
    fn missing_permission(&self) -> String {
        let who = self.call.identity.describe();
        let profile = &self.call.grants.profile;
        match profile_refusal(&profile.permissions) {
            Some(refusal) => format!(
                "{who} may not make http requests: profile {:?} does not allow it ({refusal})",
                profile.name
            ),
            None => format!(
                "{who} may not make http requests: the tool does not declare the permission \
                 {NETWORK_FETCH:?}; add it to the tool's permissions"
            ),
        }
    }

    /// Records a refused request, and logs it.
    fn refuse(&mut self, target: String, reason: &str) {
        tracing::debug!(
            plugin = %self.call.identity.plugin,
            tool = self.call.identity.tool_name(),
            request = %target,
            reason,
            "http request refused"
        );
        self.refused(target, reason);
    }
}

/// Why the profile refuses `network:fetch`, if it does.
fn profile_refusal(permissions: &PermissionRules) -> Option<String> {
    permissions
        .check_all(&[NETWORK_FETCH])
        .err()
        .map(|refusal| refusal.to_string())
}

/// Reads the final response, refusing a body larger than the profile allows
/// (before reading it when the length is announced, else as soon as it grows
/// past the limit).
async fn read(
    mut response: reqwest::Response,
    limits: &NetworkRules,
) -> Result<Response, HttpError> {
    let limit = limits.max_response;
    if response
        .content_length()
        .is_some_and(|length| length > limit)
    {
        return Err(HttpError::TooLarge(limit));
    }
    let status = response.status().as_u16();
    let headers = pairs(response.headers());
    let capacity = response
        .content_length()
        .unwrap_or(0)
        .min(limit)
        .min(BODY_PREALLOCATION);
    let mut body = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
    loop {
        let chunk = response.chunk().await.map_err(|e| {
            if e.is_timeout() {
                HttpError::Timeout
            } else {
                HttpError::Failed(format!("reading the response body: {}", describe(e)))
            }
        })?;
        let Some(chunk) = chunk else { break };
        if (body.len() as u64).saturating_add(chunk.len() as u64) > limit {
            return Err(HttpError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// Header name/value pairs, names in lower case, values lossily decoded.
fn pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}
