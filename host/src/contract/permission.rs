//! A permission: `<capability>:<action>`, declared by a tool and allowed by
//! a profile. The type lives here, below every module that decides on
//! permissions; each capability declares its own names in its `section.rs`
//! (`FILE_READ`, `NETWORK_FETCH`, ...).

use std::fmt;

/// A permission a capability declares, its spelling checked when the
/// constant is built.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Permission(&'static str);

impl Permission {
    /// `name`: lower-case words (`a-z`, `0-9`, `_`, `-`) either side of one
    /// `:`. A bad name fails the build where the constant is defined (a
    /// `const` panics).
    pub const fn new(name: &'static str) -> Self {
        let bytes = name.as_bytes();
        let mut i = 0;
        let mut colons = 0;
        while i < bytes.len() {
            let b = bytes[i];
            assert!(
                b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-' || b == b':',
                "a permission is lower-case words either side of one `:`"
            );
            if b == b':' {
                colons += 1;
            }
            i += 1;
        }
        assert!(
            colons == 1 && bytes[0] != b':' && bytes[bytes.len() - 1] != b':',
            "a permission is lower-case words either side of one `:`"
        );
        Self(name)
    }

    /// As written (`file:read`).
    pub const fn as_str(self) -> &'static str {
        self.0
    }

    /// The part before `:`: the key of the capability that declares it.
    pub fn capability(self) -> &'static str {
        self.0
            .split_once(':')
            .map_or(self.0, |(capability, _)| capability)
    }
}

/// As its name: `"file:read"` (messages quote it as they quoted the text).
impl fmt::Debug for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl AsRef<str> for Permission {
    fn as_ref(&self) -> &str {
        self.0
    }
}

impl PartialEq<&str> for Permission {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::Permission;

    #[test]
    fn a_permission_reads_as_its_name_and_knows_its_capability() {
        const READ: Permission = Permission::new("file:read");
        assert_eq!(READ.as_str(), "file:read");
        assert_eq!(READ.capability(), "file");
        assert_eq!(format!("{READ} {READ:?}"), "file:read \"file:read\"");
        assert_eq!(READ, "file:read");
    }

    #[test]
    #[should_panic(expected = "either side of one `:`")]
    fn a_permission_without_a_capability_is_refused() {
        let _ = Permission::new(":read");
    }
}
