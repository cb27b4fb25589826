//! A tenant's approvals webhook: each pending approval is POSTed as JSON,
//! signed with HMAC-SHA256 over the body (`X-Toolhost-Signature:
//! sha256=<hex>`) with a secret from the environment, retried with backoff.
//! A `2xx` answer with `{"decision": ...}` answers the approval; any other
//! `2xx` only acknowledges it (the answer then comes through the API), and
//! so does one longer than [`MAX_ANSWER`], which is not read past it.

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::request::{Approval, MAX_ANSWER, parse_answer};

/// Header carrying the body's signature.
pub const SIGNATURE_HEADER: &str = "x-toolhost-signature";

/// Where a tenant's approvals are sent.
#[derive(Clone)]
pub struct Webhook {
    url: String,
    secret: Vec<u8>,
    client: reqwest::Client,
    attempts: u32,
    backoff: Duration,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Webhook {
    /// Posts to `url`, signing with `secret`; tries up to 5 times, waiting
    /// 250 ms, then twice as long each time.
    /// Fails when the URL is `https` and the system's root certificates
    /// cannot be loaded.
    pub fn new(url: impl Into<String>, secret: impl Into<Vec<u8>>) -> Result<Self, String> {
        let url = url.into();
        let tls = crate::tls::tls_config(url.starts_with("https://"))?;
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("approvals webhook {url}: {e}"))?;
        Ok(Self {
            url,
            secret: secret.into(),
            client,
            attempts: 5,
            backoff: Duration::from_millis(250),
        })
    }

    /// `sha256=<hex>` of `body` under the secret.
    pub fn sign(&self, body: &[u8]) -> String {
        signature(&self.secret, body)
    }

    /// Delivers `approval`; `Some` when the receiver answered it.
    pub async fn deliver(&self, approval: &Value) -> Option<Approval> {
        let body = serde_json::to_vec(approval).unwrap_or_default();
        let signature = self.sign(&body);
        let mut wait = self.backoff;
        for attempt in 1..=self.attempts {
            let sent = self
                .client
                .post(&self.url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header(SIGNATURE_HEADER, &signature)
                .body(body.clone())
                .send()
                .await;
            match sent {
                Ok(response) if response.status().is_success() => {
                    let bytes = match read_capped(response, MAX_ANSWER).await {
                        Ok(bytes) => bytes,
                        Err(why) => {
                            tracing::warn!(
                                url = %self.url, "the approvals webhook's answer was not read: {why}; \
                                 the approval is left to the approvals API"
                            );
                            return None;
                        }
                    };
                    let answer: Option<Value> = serde_json::from_slice(&bytes).ok();
                    return answer
                        .as_ref()
                        .and_then(|a| a.get("decision"))
                        .and_then(Value::as_str)
                        .map(parse_answer);
                }
                Ok(response) => tracing::warn!(
                    url = %self.url, status = %response.status(), attempt,
                    "the approvals webhook refused a delivery"
                ),
                Err(error) => tracing::warn!(
                    url = %self.url, %error, attempt, "the approvals webhook could not be reached"
                ),
            }
            if attempt < self.attempts {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
        None
    }
}

/// The body of `response`, read chunk by chunk and given up as soon as it
/// would pass `max` bytes: a longer answer is never held.
async fn read_capped(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let too_long = || format!("it is longer than the limit of {max} bytes for an answer");
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_long());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > max {
            return Err(too_long());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `sha256=<hex>` of HMAC-SHA256(`secret`, `body`).
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_rfc_4231_hmac_sha256() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
