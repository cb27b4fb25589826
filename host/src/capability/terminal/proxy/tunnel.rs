//! What a `CONNECT` tunnel of the terminal's proxy carries: TLS whose
//! ClientHello names the tunnel's host as its server (SNI), or no server
//! when the tunnel is to an address. Plain HTTP, and whatever else is not
//! TLS, is refused: its `Host` would pick any virtual host behind the
//! checked address. Inside TLS nothing more is seen.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Most bytes of a ClientHello read, across its records.
const MAX_HELLO: usize = 64 * 1024;

/// Largest TLS record fragment (2^14 bytes).
const MAX_RECORD: usize = 16 * 1024;

/// The `encrypted_client_hello` extension.
const ECH: u16 = 0xfe0d;

/// TLS alerts sent when a ClientHello is refused.
const DECODE_ERROR: u8 = 50;
const UNRECOGNIZED_NAME: u8 = 112;

/// Why a tunnel's first bytes were refused, and how the client is told.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Not TLS: answered `403` with the reason, as an HTTP client reads it.
    NotTls(String),
    /// TLS the proxy refuses: answered with a fatal alert of this
    /// description.
    Tls(String, u8),
}

impl Refusal {
    /// A fatal TLS alert record of `description`.
    pub(super) fn alert(description: u8) -> [u8; 7] {
        [0x15, 3, 3, 0, 2, 2, description]
    }
}

/// Reads the client's bytes until its ClientHello is whole and judges it
/// for a tunnel to `host`: the bytes read to send on, `None` when the
/// client closed first.
pub(super) async fn first_flight(
    client: &mut (impl AsyncRead + Unpin),
    mut read: Vec<u8>,
    host: &str,
) -> Result<Option<Vec<u8>>, Refusal> {
    let mut chunk = [0u8; 4096];
    loop {
        match parse_hello(&read) {
            Parsed::More if read.len() <= MAX_HELLO => {}
            Parsed::More => {
                return Err(Refusal::Tls(
                    format!("the ClientHello is longer than {MAX_HELLO} bytes"),
                    DECODE_ERROR,
                ));
            }
            Parsed::Hello(hello) => return judge(host, &hello).map(|()| Some(read)),
            Parsed::NotTls => return Err(Refusal::NotTls(not_tls(host))),
            Parsed::Malformed(problem) => {
                return Err(Refusal::Tls(
                    format!("the tunnel's ClientHello is malformed: {problem}"),
                    DECODE_ERROR,
                ));
            }
        }
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return Ok(None),
            Ok(n) => read.extend_from_slice(&chunk[..n]),
        }
    }
}

pub(super) fn not_tls(host: &str) -> String {
    format!(
        "a CONNECT tunnel carries only TLS, and what came in the tunnel to {host} is not \
         (plain HTTP's Host could name any site behind the checked address); send a plain \
         http:// request to the proxy as it is (curl without -p/--proxytunnel), where its \
         Host is checked"
    )
}

/// Whether `hello` may open a tunnel to `host` (as the `CONNECT` named it).
fn judge(host: &str, hello: &Hello) -> Result<(), Refusal> {
    let refused = |reason: String| Err(Refusal::Tls(reason, UNRECOGNIZED_NAME));
    if hello.ech {
        return refused(format!(
            "the ClientHello to {host} offers Encrypted Client Hello, whose inner server name \
             the proxy cannot check; turn ECH off for commands"
        ));
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let normal = |name: &str| name.trim_end_matches('.').to_ascii_lowercase();
    match (&hello.server_name, bare.parse::<std::net::IpAddr>()) {
        (None, Ok(_)) => Ok(()),
        (Some(name), Ok(_)) => refused(format!(
            "the TLS server name {name:?} picks a site behind the address {host}, and only \
             the address was checked; CONNECT to {name} by its name instead (network.allow_hosts \
             must allow it)"
        )),
        (Some(name), Err(_)) if normal(name) == normal(host) => Ok(()),
        (Some(name), Err(_)) => refused(format!(
            "the TLS server name {name:?} is not the tunnel's host {host:?}"
        )),
        (None, Err(_)) => refused(format!(
            "the ClientHello to {host} names no server (SNI), so the server would pick a \
             site the proxy did not check; send the server name"
        )),
    }
}

/// What a ClientHello says that the proxy judges.
#[derive(Debug, PartialEq, Eq)]
struct Hello {
    server_name: Option<String>,
    ech: bool,
}

/// What the bytes read so far are.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// The start of a ClientHello.
    More,
    Hello(Hello),
    NotTls,
    Malformed(String),
}

/// Reads TLS records from the start of `bytes` until their handshake
/// fragments hold a whole ClientHello.
fn parse_hello(bytes: &[u8]) -> Parsed {
    match bytes.first() {
        None => return Parsed::More,
        Some(0x16) => {}
        Some(_) => return Parsed::NotTls,
    }
    let mut handshake = Vec::new();
    let mut at = 0;
    loop {
        let Some(header) = bytes.get(at..at + 5) else {
            return Parsed::More;
        };
        if header[0] != 0x16 {
            return Parsed::Malformed("a record that is not a handshake within it".into());
        }
        if header[1] != 3 {
            return Parsed::Malformed(format!("record version {}.{}", header[1], header[2]));
        }
        let length = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if length == 0 || length > MAX_RECORD {
            return Parsed::Malformed(format!("a record of {length} bytes"));
        }
        let Some(fragment) = bytes.get(at + 5..at + 5 + length) else {
            return Parsed::More;
        };
        handshake.extend_from_slice(fragment);
        at += 5 + length;
        if let Some(&kind) = handshake.first()
            && kind != 1
        {
            return Parsed::Malformed(format!("handshake message {kind} before a ClientHello"));
        }
        let Some(size) = handshake.get(1..4) else {
            continue;
        };
        let size = usize::from(size[0]) << 16 | usize::from(size[1]) << 8 | usize::from(size[2]);
        if size > MAX_HELLO {
            return Parsed::Malformed(format!("a ClientHello of {size} bytes"));
        }
        if let Some(body) = handshake.get(4..4 + size) {
            return match client_hello(body) {
                Some(Ok(hello)) => Parsed::Hello(hello),
                Some(Err(problem)) => Parsed::Malformed(problem),
                None => Parsed::Malformed("it ends early".into()),
            };
        }
    }
}

/// Bytes read from the front.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (taken, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    /// A vector whose length is a `u8`, or a `u16` when `wide`.
    fn vector(&mut self, wide: bool) -> Option<Reader<'a>> {
        let length = if wide {
            usize::from(self.u16()?)
        } else {
            usize::from(self.u8()?)
        };
        self.take(length).map(Reader)
    }
}

/// The server name and ECH offer of a ClientHello's body; `None` when it
/// ends early.
fn client_hello(body: &[u8]) -> Option<Result<Hello, String>> {
    let mut hello = Reader(body);
    hello.take(2 + 32)?;
    hello.vector(false)?;
    hello.vector(true)?;
    hello.vector(false)?;
    let mut found = Hello {
        server_name: None,
        ech: false,
    };
    if hello.0.is_empty() {
        return Some(Ok(found));
    }
    let mut extensions = hello.vector(true)?;
    if !hello.0.is_empty() {
        return Some(Err("bytes after its extensions".into()));
    }
    let mut seen = std::collections::HashSet::new();
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let mut data = extensions.vector(true)?;
        if !seen.insert(kind) {
            return Some(Err(format!("extension {kind} twice")));
        }
        match kind {
            0 => match server_name(&mut data)? {
                Ok(name) => found.server_name = Some(name),
                Err(problem) => return Some(Err(problem)),
            },
            ECH => found.ech = true,
            _ => {}
        }
    }
    Some(Ok(found))
}

/// The one host name of a `server_name` extension.
fn server_name(data: &mut Reader<'_>) -> Option<Result<String, String>> {
    let mut list = data.vector(true)?;
    let kind = list.u8()?;
    let name = list.vector(true)?.0;
    if kind != 0 || !list.0.is_empty() || !data.0.is_empty() {
        return Some(Err("a server_name other than one host name".into()));
    }
    match std::str::from_utf8(name) {
        Ok(name) if !name.is_empty() && name.is_ascii() => Some(Ok(name.to_string())),
        _ => Some(Err("a server name that is not ASCII".into())),
    }
}

#[cfg(test)]
mod tests;
