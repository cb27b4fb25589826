//! System call results as the launcher reports them: the call and the
//! kernel's reason.

pub(super) fn os_error<T>(what: impl std::fmt::Display) -> Result<T, String> {
    Err(format!("{what}: {}", std::io::Error::last_os_error()))
}

pub(super) fn check(result: libc::c_int, what: impl std::fmt::Display) -> Result<(), String> {
    if result < 0 { os_error(what) } else { Ok(()) }
}

/// A path as a C string; `Err` when it holds a NUL byte.
pub(crate) fn cstring(path: impl AsRef<std::ffi::OsStr>) -> Result<std::ffi::CString, String> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_ref().as_bytes())
        .map_err(|_| "a path holds a NUL byte".to_string())
}
