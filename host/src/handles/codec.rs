//! The text of a handle: `th_` and base64url of a 24-byte body (version,
//! key id, replica, hard expiry, 128-bit random nonce) and a 16-byte
//! HMAC-SHA256 tag over the body, the tenant and the caller's profile.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// What every handle starts with.
pub const PREFIX: &str = "th_";

/// The body's format version.
const VERSION: u8 = 1;
const BODY: usize = 24;
const TAG: usize = 16;
/// What the tag is computed over first, so a tag of another kind of token
/// made with the same key never verifies as a handle.
const DOMAIN: &[u8] = b"toolhost/handle/v1\0";

/// Length of a handle's text: the prefix and 40 bytes in base64url.
pub const TEXT_LEN: usize = PREFIX.len() + (BODY + TAG).div_ceil(3) * 4 - 2;

/// The 128 random bits that name one handle's state.
pub(super) type Nonce = [u8; 16];

/// What a verified handle says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Claims {
    /// The replica that keeps its state.
    pub(super) replica: u16,
    /// Unix time (seconds) after which it is refused.
    pub(super) expires: u32,
    /// Its state's name.
    pub(super) nonce: Nonce,
}

/// Who a handle is bound to: the tenant (`None`: the local caller) and the
/// name of the caller's profile.
#[derive(Debug, Clone, Copy)]
pub(super) struct Owner<'a> {
    /// The tenant.
    pub(super) tenant: Option<&'a str>,
    /// The caller's profile.
    pub(super) profile: &'a str,
}

/// Seals and opens handles (and request states) with one key.
pub(super) struct Codec {
    key: [u8; 32],
    /// The key of request states, so neither kind opens as the other.
    state_key: [u8; 32],
    kid: u8,
}

/// What a request state starts with.
pub(super) const STATE_PREFIX: &str = "rs_";
const STATE_DOMAIN: &[u8] = b"toolhost/request-state/v1\0";
/// version, key id, expiry (4), id (16).
const STATE_BODY: usize = 22;

impl Codec {
    /// A codec whose handle key is derived from `master`.
    pub(super) fn new(master: &[u8; 32]) -> Self {
        let derive = |label: &[u8]| {
            let mut mac = <Hmac<Sha256>>::new_from_slice(master).expect("any key length");
            mac.update(label);
            <[u8; 32]>::from(mac.finalize().into_bytes())
        };
        Self {
            key: derive(b"toolhost/handle/v1"),
            state_key: derive(b"toolhost/request-state/v1"),
            // Tells keys apart (a handle of an old key is refused at once);
            // not secret and not a check of its own.
            kid: derive(b"toolhost/key-id")[0],
        }
    }

    /// The text of a handle for `claims`, bound to `owner`.
    pub(super) fn seal(&self, claims: &Claims, owner: Owner<'_>) -> String {
        let body = self.body(claims);
        let tag = self.tag(&body, owner);
        let mut raw = Vec::with_capacity(BODY + TAG);
        raw.extend_from_slice(&body);
        raw.extend_from_slice(&tag[..TAG]);
        format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(raw))
    }

    /// The claims of `text` if this codec sealed it for `owner`; `None` for
    /// anything else (altered, truncated, of another tenant or profile, of
    /// another key), all alike.
    pub(super) fn open(&self, text: &str, owner: Owner<'_>) -> Option<Claims> {
        if text.len() != TEXT_LEN {
            return None;
        }
        let encoded = text.strip_prefix(PREFIX)?;
        let raw = URL_SAFE_NO_PAD.decode(encoded).ok()?;
        let (body, tag) = raw.split_at_checked(BODY)?;
        if tag.len() != TAG || body[0] != VERSION || body[1] != self.kid {
            return None;
        }
        let mac = self.mac(body, owner);
        mac.verify_truncated_left(tag).ok()?;
        Some(Claims {
            replica: u16::from_be_bytes([body[2], body[3]]),
            expires: u32::from_be_bytes(body[4..8].try_into().ok()?),
            nonce: body[8..24].try_into().ok()?,
        })
    }

    /// A request state naming parked call `id` until `expires` (unix
    /// seconds), bound to `owner` and to `bound` (a digest of the request).
    pub(super) fn seal_state(
        &self,
        id: &Nonce,
        expires: u32,
        owner: Owner<'_>,
        bound: &[u8; 32],
    ) -> String {
        let mut body = [0u8; STATE_BODY];
        body[0] = VERSION;
        body[1] = self.kid;
        body[2..6].copy_from_slice(&expires.to_be_bytes());
        body[6..].copy_from_slice(id);
        let tag = self.state_mac(&body, owner, bound).finalize().into_bytes();
        let mut raw = body.to_vec();
        raw.extend_from_slice(&tag[..TAG]);
        format!("{STATE_PREFIX}{}", URL_SAFE_NO_PAD.encode(raw))
    }

    /// The parked call and expiry of request state `text` if it was sealed
    /// for `owner` and `bound`; `None` for anything else.
    pub(super) fn open_state(
        &self,
        text: &str,
        owner: Owner<'_>,
        bound: &[u8; 32],
    ) -> Option<(Nonce, u32)> {
        let raw = URL_SAFE_NO_PAD
            .decode(text.strip_prefix(STATE_PREFIX)?)
            .ok()?;
        let (body, tag) = raw.split_at_checked(STATE_BODY)?;
        if tag.len() != TAG || body[0] != VERSION || body[1] != self.kid {
            return None;
        }
        self.state_mac(body, owner, bound)
            .verify_truncated_left(tag)
            .ok()?;
        Some((
            body[6..].try_into().ok()?,
            u32::from_be_bytes(body[2..6].try_into().ok()?),
        ))
    }

    fn state_mac(&self, body: &[u8], owner: Owner<'_>, bound: &[u8; 32]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256>>::new_from_slice(&self.state_key).expect("any key length");
        mac.update(STATE_DOMAIN);
        mac.update(body);
        bind_owner(&mut mac, owner);
        mac.update(bound);
        mac
    }

    fn body(&self, claims: &Claims) -> [u8; BODY] {
        let mut body = [0u8; BODY];
        body[0] = VERSION;
        body[1] = self.kid;
        body[2..4].copy_from_slice(&claims.replica.to_be_bytes());
        body[4..8].copy_from_slice(&claims.expires.to_be_bytes());
        body[8..].copy_from_slice(&claims.nonce);
        body
    }

    fn tag(&self, body: &[u8], owner: Owner<'_>) -> [u8; 32] {
        self.mac(body, owner).finalize().into_bytes().into()
    }

    /// The MAC over the domain, the body and the owner, each part
    /// length-prefixed so no two owners share an input.
    fn mac(&self, body: &[u8], owner: Owner<'_>) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256>>::new_from_slice(&self.key).expect("any key length");
        mac.update(DOMAIN);
        mac.update(body);
        bind_owner(&mut mac, owner);
        mac
    }
}

/// The owner into `mac`, each part length-prefixed.
fn bind_owner(mac: &mut Hmac<Sha256>, owner: Owner<'_>) {
    match owner.tenant {
        Some(tenant) => {
            mac.update(&[1]);
            prefixed(mac, tenant);
        }
        None => mac.update(&[0]),
    }
    prefixed(mac, owner.profile);
}

fn prefixed(mac: &mut Hmac<Sha256>, text: &str) {
    mac.update(&(text.len() as u64).to_be_bytes());
    mac.update(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALPHA: Owner<'static> = Owner {
        tenant: Some("alpha"),
        profile: "reader",
    };

    fn claims() -> Claims {
        Claims {
            replica: 7,
            expires: 1_900_000_000,
            nonce: [0xab; 16],
        }
    }

    #[test]
    fn a_sealed_handle_opens_for_its_owner_only() {
        let codec = Codec::new(&[1; 32]);
        let text = codec.seal(&claims(), ALPHA);
        assert_eq!(text.len(), TEXT_LEN);
        assert_eq!(codec.open(&text, ALPHA), Some(claims()));
        for other in [
            Owner {
                tenant: Some("beta"),
                profile: "reader",
            },
            Owner {
                tenant: Some("alpha"),
                profile: "writer",
            },
            Owner {
                tenant: None,
                profile: "reader",
            },
            // The same bytes split differently between tenant and profile.
            Owner {
                tenant: Some("alphar"),
                profile: "eader",
            },
        ] {
            assert_eq!(codec.open(&text, other), None, "{other:?}");
        }
        assert_eq!(Codec::new(&[2; 32]).open(&text, ALPHA), None);
    }

    #[test]
    fn every_altered_character_is_refused() {
        let codec = Codec::new(&[1; 32]);
        let text = codec.seal(&claims(), ALPHA);
        for at in 0..text.len() {
            for replacement in ['A', '_', '-', 'z'] {
                let mut altered: Vec<char> = text.chars().collect();
                if altered[at] == replacement {
                    continue;
                }
                altered[at] = replacement;
                let altered: String = altered.into_iter().collect();
                assert_eq!(codec.open(&altered, ALPHA), None, "{altered}");
            }
        }
        assert_eq!(codec.open(&text[..text.len() - 1], ALPHA), None);
        assert_eq!(codec.open(&format!("{text}A"), ALPHA), None);
        assert_eq!(codec.open("", ALPHA), None);
        assert_eq!(codec.open(&"é".repeat(TEXT_LEN / 2), ALPHA), None);
    }

    #[test]
    fn a_request_state_opens_only_for_its_owner_and_request() {
        let codec = Codec::new(&[1; 32]);
        let text = codec.seal_state(&[7; 16], 99, ALPHA, &[1; 32]);
        assert_eq!(
            codec.open_state(&text, ALPHA, &[1; 32]),
            Some(([7; 16], 99))
        );
        assert_eq!(codec.open_state(&text, ALPHA, &[2; 32]), None);
        let beta = Owner {
            tenant: Some("beta"),
            profile: "reader",
        };
        assert_eq!(codec.open_state(&text, beta, &[1; 32]), None);
        // A handle never opens as a request state, nor the other way.
        let handle = codec.seal(&claims(), ALPHA);
        assert_eq!(codec.open_state(&handle, ALPHA, &[1; 32]), None);
        assert_eq!(codec.open(&text, ALPHA), None);
    }

    proptest::proptest! {
        #[test]
        fn random_bodies_never_open(raw in proptest::array::uniform32(0u8..), more in proptest::array::uniform8(0u8..)) {
            let codec = Codec::new(&[3; 32]);
            let mut bytes = raw.to_vec();
            bytes.extend_from_slice(&more);
            bytes[0] = VERSION;
            bytes[1] = codec.kid;
            let text = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(&bytes));
            proptest::prop_assert_eq!(codec.open(&text, ALPHA), None);
        }
    }
}
