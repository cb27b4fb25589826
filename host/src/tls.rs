//! The TLS settings of toolhost's own HTTPS clients (the network
//! capability's requests, approval webhooks): ring and the platform's
//! certificate verifier, loaded once.

use std::sync::{Arc, LazyLock};

/// The TLS settings of every client: ring, the platform's certificate
/// verifier, ALPN for HTTP/2 and HTTP/1.1. Loaded once; loading the system's
/// root certificates is too slow to repeat per request.
static VERIFIED_TLS: LazyLock<Result<rustls::ClientConfig, String>> = LazyLock::new(|| {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
        .map_err(|e| format!("cannot load the system's root certificates: {e}"))?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up tls: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
});

/// TLS settings for a client. Without usable root certificates, https
/// requests fail with the reason, and plain http ones still work (their
/// client gets settings that trust nothing).
pub(crate) fn tls_config(https: bool) -> Result<rustls::ClientConfig, String> {
    match &*VERIFIED_TLS {
        Ok(config) => Ok(config.clone()),
        Err(problem) if https => Err(format!("https is unavailable on this host: {problem}")),
        Err(_) => {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            Ok(rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("cannot set up tls: {e}"))?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_never_needs_root_certificates() {
        assert!(tls_config(false).is_ok());
        if let Err(problem) = tls_config(true) {
            assert!(problem.contains("https is unavailable"), "{problem}");
        }
    }
}
