//! Request heads as the proxy reads them: tunnels, plain requests
//! rewritten to origin form, and the `Host` a request may name.

use super::*;

#[test]
fn tunnels_name_host_and_port() {
    let asked = parse(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n").unwrap();
    assert!(asked.tunnel);
    assert_eq!((asked.host.as_str(), asked.port), ("example.com", 443));
    let v6 = parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!((v6.host.as_str(), v6.port), ("[::1]", 8443));
    for bad in [
        &b"CONNECT example.com HTTP/1.1\r\n\r\n"[..],
        b"CONNECT ::1:80 HTTP/1.1\r\n\r\n",
        b"CONNECT :80 HTTP/1.1\r\n\r\n",
        b"CONNECT example.com:99999 HTTP/1.1\r\n\r\n",
    ] {
        assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn plain_requests_are_rewritten_to_origin_form() {
    let asked = parse(
        b"GET http://example.com:8080/a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\n\
          Proxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n\
          Connection: keep-alive\r\nAccept: */*\r\n\r\n",
    )
    .unwrap();
    assert!(!asked.tunnel);
    assert_eq!((asked.host.as_str(), asked.port), ("example.com", 8080));
    assert_eq!(
        String::from_utf8(asked.upstream_head).unwrap(),
        "GET /a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\n\
         Connection: close\r\n\r\n"
    );
    assert_eq!(asked.foreign_host, None);
}

#[test]
fn the_host_header_must_name_the_checked_host() {
    for same in ["example.com", "EXAMPLE.com.", "example.com:80"] {
        let head = format!("GET http://example.com/ HTTP/1.1\r\nHost: {same}\r\n\r\n");
        let asked = parse(head.as_bytes()).unwrap();
        assert_eq!(asked.foreign_host, None, "{same}");
    }
    for other in [
        "admin.internal",
        "example.com:81",
        "x@example.com",
        "example.com/x",
    ] {
        let head = format!("GET http://example.com/ HTTP/1.1\r\nHost: {other}\r\n\r\n");
        let asked = parse(head.as_bytes()).unwrap();
        assert!(asked.foreign_host.is_some(), "{other}");
    }
    let chunked = b"POST http://example.com/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert!(parse(chunked).is_err());
    let sized = parse(b"POST http://example.com/ HTTP/1.1\r\nContent-Length: 5\r\n\r\n").unwrap();
    assert_eq!(sized.body, 5);
}

#[test]
fn only_absolute_http_urls_are_forwarded() {
    for bad in [
        &b"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"GET https://example.com/ HTTP/1.1\r\n\r\n",
        b"GET file:///etc/passwd HTTP/1.1\r\n\r\n",
        b"garbage\r\n\r\n",
    ] {
        assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
    }
}
