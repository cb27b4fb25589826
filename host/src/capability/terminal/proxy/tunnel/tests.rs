//! The ClientHello reader and the judgement of a tunnel's server name, on
//! hellos cut and split every way, and on random bytes.

use proptest::prelude::*;

use super::*;

/// A ClientHello with `extensions` (type, data), in one handshake message.
fn hello_message(extensions: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend([9u8; 32]);
    body.extend([0, 0, 2, 0x13, 0x01, 1, 0]);
    let mut all = Vec::new();
    for (kind, data) in extensions {
        all.extend(kind.to_be_bytes());
        all.extend(u16::try_from(data.len()).unwrap().to_be_bytes());
        all.extend(data);
    }
    body.extend(u16::try_from(all.len()).unwrap().to_be_bytes());
    body.extend(all);
    let n = u32::try_from(body.len()).unwrap().to_be_bytes();
    let mut message = vec![1, n[1], n[2], n[3]];
    message.extend(body);
    message
}

fn sni(name: &str) -> (u16, Vec<u8>) {
    let n = u16::try_from(name.len()).unwrap();
    let mut data = (n + 3).to_be_bytes().to_vec();
    data.push(0);
    data.extend(n.to_be_bytes());
    data.extend(name.as_bytes());
    (0, data)
}

/// `message` in records of at most `size` bytes each.
fn records(message: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for fragment in message.chunks(size) {
        out.extend([0x16, 3, 1]);
        out.extend(u16::try_from(fragment.len()).unwrap().to_be_bytes());
        out.extend(fragment);
    }
    out
}

fn named(name: Option<&str>) -> Hello {
    Hello {
        server_name: name.map(String::from),
        ech: false,
    }
}

#[test]
fn a_hello_is_read_whole_however_it_is_cut() {
    let message = hello_message(&[(10, vec![0, 2, 0, 29]), sni("example.com")]);
    for size in [1, 7, 64, message.len()] {
        let bytes = records(&message, size);
        for cut in 0..bytes.len() {
            assert_eq!(parse_hello(&bytes[..cut]), Parsed::More, "{size} {cut}");
        }
        assert_eq!(
            parse_hello(&bytes),
            Parsed::Hello(named(Some("example.com")))
        );
    }
    assert_eq!(
        parse_hello(&records(&hello_message(&[]), 100)),
        Parsed::Hello(named(None))
    );
}

#[test]
fn what_is_not_one_clear_hello_is_told_apart() {
    assert_eq!(parse_hello(b"GET / HTTP/1.1\r\n"), Parsed::NotTls);
    assert_eq!(parse_hello(b"SSH-2.0-x\r\n"), Parsed::NotTls);
    for extensions in [
        vec![sni("a.example"), sni("b.example")],
        vec![(0, vec![0, 4, 1, 0, 1, b'a'])],
    ] {
        let bytes = records(&hello_message(&extensions), 1000);
        assert!(
            matches!(parse_hello(&bytes), Parsed::Malformed(_)),
            "{extensions:?}"
        );
    }
    let mut server_hello = records(&hello_message(&[]), 1000);
    server_hello[5] = 2;
    assert!(matches!(parse_hello(&server_hello), Parsed::Malformed(_)));
    let ech = records(&hello_message(&[sni("example.com"), (ECH, vec![0])]), 1000);
    let Parsed::Hello(hello) = parse_hello(&ech) else {
        panic!("not read");
    };
    assert!(hello.ech);
    assert!(judge("example.com", &hello).is_err());
}

#[test]
fn the_server_name_must_be_the_tunnels_host() {
    for (host, name, allowed) in [
        ("example.com", Some("example.com"), true),
        ("Example.COM", Some("example.com."), true),
        ("example.com", Some("admin.example.com"), false),
        ("example.com", Some("example.com.evil"), false),
        ("example.com", None, false),
        ("192.0.2.1", None, true),
        ("[2001:db8::1]", None, true),
        ("192.0.2.1", Some("admin.internal"), false),
        ("192.0.2.1", Some("192.0.2.1"), false),
    ] {
        assert_eq!(
            judge(host, &named(name)).is_ok(),
            allowed,
            "{host} {name:?}"
        );
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic_and_never_pass_as_another_name(
        tail in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut bytes = vec![0x16, 3, 1];
        bytes.extend(tail);
        if let Parsed::Hello(hello) = parse_hello(&bytes) {
            let allowed = judge("example.com", &hello).is_ok();
            prop_assert_eq!(allowed, hello.server_name.as_deref() == Some("example.com") && !hello.ech);
        }
    }

    #[test]
    fn a_hello_with_any_name_is_read_with_that_name(name in "[a-z0-9.-]{1,60}") {
        let bytes = records(&hello_message(&[sni(&name)]), 40);
        prop_assert_eq!(parse_hello(&bytes), Parsed::Hello(named(Some(&name))));
    }
}
