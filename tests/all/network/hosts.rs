//! Which hosts a profile reaches: `network.allow_hosts`, wildcards, ports,
//! and names that resolve to loopback.

use toolhost::Host;

use super::{allowing, error, get, host, server};

#[tokio::test]
async fn a_wildcard_does_not_open_loopback_addresses() {
    let (addr, log) = server().await;
    let host = host(&allowing("\"*\"")).await;
    let message = error(&get(&host, &format!("http://{addr}/hello")).await, "denied");
    assert!(message.contains("127.0.0.1"), "{message}");
    assert!(message.contains("is loopback"), "{message}");
    assert!(message.contains("network.allow_hosts"), "{message}");
    // Other spellings of loopback, and the metadata address, are refused too.
    for url in [
        format!("http://2130706433:{}/hello", addr.port()),
        format!("http://0x7f.0.0.1:{}/hello", addr.port()),
        format!("http://[::ffff:127.0.0.1]:{}/hello", addr.port()),
        format!("http://[::1]:{}/hello", addr.port()),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.0.0.1/".to_owned(),
    ] {
        let message = error(&get(&host, &url).await, "denied");
        assert!(message.contains("network.allow_hosts"), "{url}: {message}");
    }
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn without_allowed_hosts_nothing_is_reachable() {
    let (addr, log) = server().await;
    let host = host(&allowing("")).await;
    let message = error(&get(&host, &format!("http://{addr}/hello")).await, "denied");
    assert!(
        message.contains("host \"127.0.0.1\" is not in the profile's network.allow_hosts"),
        "{message}"
    );
    // An entry for another port does not open this one.
    let other_port = host_with_port_entry(addr.port().wrapping_add(1)).await;
    let message = error(
        &get(&other_port, &format!("http://{addr}/hello")).await,
        "denied",
    );
    assert!(
        message.contains(&format!("port {}", addr.port())),
        "{message}"
    );
    assert!(log.lock().unwrap().is_empty());
}

async fn host_with_port_entry(port: u16) -> Host {
    host(&allowing(&format!("\"127.0.0.1:{port}\""))).await
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_unless_its_address_is_listed() {
    let (addr, log) = server().await;
    let url = format!("http://localhost:{}/hello", addr.port());

    let by_name = host(&allowing("\"localhost\"")).await;
    let message = error(&get(&by_name, &url).await, "denied");
    assert!(message.contains("of host \"localhost\""), "{message}");
    assert!(message.contains("is loopback"), "{message}");
    assert!(log.lock().unwrap().is_empty());

    // With the addresses listed, the name is resolved once, checked, and the
    // connection goes to those addresses.
    let listed = host(&allowing("\"localhost\", \"127.0.0.1\", \"::1\"")).await;
    let outcome = get(&listed, &url).await;
    assert_eq!(outcome["status"], 200, "{outcome}");
    assert_eq!(log.lock().unwrap().len(), 1);
}
