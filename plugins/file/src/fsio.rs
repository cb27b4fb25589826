//! What every file tool shares: I/O errors as tool errors that say what to
//! do, binary detection, atomic writes, and the glob filter.

use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, RandomState};
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use toolhost_sdk::ToolError;

/// How much of a file's start decides whether it is binary.
pub(crate) const SNIFF_BYTES: usize = 8 * 1024;

/// A tool error for an I/O failure on `path` while doing `action`
/// ("reading", "writing", ...).
pub(crate) fn io_error(action: &str, path: &str, error: &io::Error) -> ToolError {
    // The host refuses to open special files as "unsupported" (the name
    // may lead to a regular file again by now).
    if error.kind() == ErrorKind::Unsupported
        || (error.kind() != ErrorKind::NotFound && is_special(path))
    {
        return ToolError::invalid_arguments(format!(
            "{action} {path}: it is not a regular file or a directory (a FIFO, socket or \
             device), and file tools open only those; read it with a command if it must be"
        ));
    }
    match error.kind() {
        ErrorKind::NotFound => ToolError::invalid_arguments(format!(
            "{path}: no such file or directory. Relative paths start in the workspace, and \
             only the directories the caller's profile grants exist; use list_dir or \
             search_files to find the right path"
        )),
        ErrorKind::PermissionDenied => ToolError::denied(format!(
            "{action} {path} is not allowed: the caller's profile denies this path \
             (file.deny) or does not grant it for this kind of access"
        )),
        ErrorKind::ReadOnlyFilesystem => ToolError::denied(format!(
            "{action} {path} is not allowed: the caller's profile grants this directory \
             for reading only (it is not in file.write)"
        )),
        ErrorKind::IsADirectory => ToolError::invalid_arguments(format!(
            "{path} is a directory; use list_dir to see what it contains"
        )),
        ErrorKind::NotADirectory => ToolError::invalid_arguments(format!(
            "{path}: a part of this path is a file, not a directory"
        )),
        ErrorKind::AlreadyExists => {
            ToolError::failed(format!("{action} {path}: a file in the way already exists"))
        }
        _ => ToolError::failed(format!("{action} {path}: {error}")),
    }
}

/// Whether `path` names something that is neither a regular file, a
/// directory nor a symlink (the host refuses to open those).
fn is_special(path: &str) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| {
        let kind = meta.file_type();
        !kind.is_file() && !kind.is_dir() && !kind.is_symlink()
    })
}

/// Whether the first bytes of a file look like binary data rather than text:
/// a NUL byte, or bytes that are not UTF-8 with many control characters.
pub(crate) fn looks_binary(sample: &[u8]) -> bool {
    let sample = &sample[..sample.len().min(SNIFF_BYTES)];
    if memchr::memchr(0, sample).is_some() {
        return true;
    }
    match std::str::from_utf8(sample) {
        Ok(_) => false,
        // Cut in the middle of a character at the end of the sample.
        Err(e) if e.error_len().is_none() => false,
        Err(_) => {
            let control = sample
                .iter()
                .filter(|&&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b))
                .count();
            control * 10 > sample.len()
        }
    }
}

/// Opens `path` for reading, refusing directories with a clear error.
pub(crate) fn open_file(path: &str) -> Result<(File, u64), ToolError> {
    let file = File::open(path).map_err(|e| io_error("reading", path, &e))?;
    let metadata = file.metadata().map_err(|e| io_error("reading", path, &e))?;
    if metadata.is_dir() {
        return Err(ToolError::invalid_arguments(format!(
            "{path} is a directory; use list_dir to see what it contains"
        )));
    }
    Ok((file, metadata.len()))
}

/// Reads a whole text file of at most `max` bytes, refusing binary files.
/// Bytes that are not UTF-8 are replaced (fine for showing, not for editing).
pub(crate) fn read_text(path: &str, max: u64) -> Result<String, ToolError> {
    let bytes = read_text_bytes(path, max)?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Like [`read_text`], but refuses text that is not UTF-8, so that writing
/// it back changes nothing but the edit.
pub(crate) fn read_utf8(path: &str, max: u64) -> Result<String, ToolError> {
    String::from_utf8(read_text_bytes(path, max)?).map_err(|e| {
        ToolError::invalid_arguments(format!(
            "{path} is not UTF-8 text (invalid byte at offset {}); it cannot be edited \
             without changing other bytes. Use write_file to replace it as a whole",
            e.utf8_error().valid_up_to()
        ))
    })
}

fn read_text_bytes(path: &str, max: u64) -> Result<Vec<u8>, ToolError> {
    let (file, size) = open_file(path)?;
    if size > max {
        return Err(ToolError::invalid_arguments(format!(
            "{path} is {size} bytes, more than this tool handles ({max} bytes); \
             use read_file with offset/limit to look at parts of it"
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    io::Read::read_to_end(&mut io::Read::take(file, max + 1), &mut bytes)
        .map_err(|e| io_error("reading", path, &e))?;
    if looks_binary(&bytes) {
        return Err(ToolError::invalid_arguments(format!(
            "{path} looks like a binary file, not text; read_file with encoding \"base64\" \
             reads its raw bytes"
        )));
    }
    Ok(bytes)
}

/// The directory a path lives in (`.` for a bare file name).
fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes `bytes` to `path` atomically: into a new temporary file in the same
/// directory, then renamed over `path`, so readers see the old content or the
/// new one, never a half-written file. The temporary file is removed if
/// anything fails.
pub(crate) fn write_atomically(path: &str, bytes: &[u8]) -> Result<(), ToolError> {
    let target = Path::new(path);
    let dir = parent_of(target);
    let hasher = RandomState::new();
    let mut attempt = 0u32;
    let (temp, written) = loop {
        let temp = dir.join(format!(
            ".toolhost-write-{:016x}.tmp",
            hasher.hash_one((path, attempt))
        ));
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            // A leftover of an earlier write, or another writer: pick another name.
            Err(e) if e.kind() == ErrorKind::AlreadyExists && attempt < 8 => attempt += 1,
            Err(e) => return Err(io_error("writing", path, &e)),
            Ok(mut file) => {
                let written = file.write_all(bytes).and_then(|()| file.sync_all());
                break (temp, written);
            }
        }
    };
    if let Err(e) = written.and_then(|()| fs::rename(&temp, target)) {
        let _ = fs::remove_file(&temp);
        return Err(io_error("writing", path, &e));
    }
    Ok(())
}

/// Creates the directories above `path` that do not exist yet.
pub(crate) fn create_parents(path: &str) -> Result<(), ToolError> {
    let dir = parent_of(Path::new(path));
    fs::create_dir_all(&dir).map_err(|e| io_error("creating the directory for", path, &e))
}

/// A file-name filter: a pattern with a `/` matches the path relative to the
/// directory searched, one without matches the file name alone.
pub(crate) struct NameFilter {
    matcher: GlobMatcher,
    whole_path: bool,
}

impl NameFilter {
    /// Compiles a glob (`*.rs`, `src/**/*.{ts,tsx}`, `test_?.py`).
    pub(crate) fn new(pattern: &str) -> Result<Self, ToolError> {
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                ToolError::invalid_arguments(format!(
                    "glob {pattern:?} is invalid: {e}. Use * for any characters except /, \
                     ** for any number of directories, ? for one character, \
                     {{a,b}} for alternatives, [abc] for a character class"
                ))
            })?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            whole_path: pattern.contains('/'),
        })
    }

    /// Whether an entry matches, given its path relative to the root.
    pub(crate) fn matches(&self, relative: &str) -> bool {
        if self.whole_path {
            self.matcher.is_match(relative)
        } else {
            let name = relative.rsplit('/').next().unwrap_or(relative);
            self.matcher.is_match(name)
        }
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_detection() {
        assert!(!looks_binary(b"hello\nworld\n"));
        assert!(!looks_binary("héllo".as_bytes()));
        assert!(!looks_binary(&"é".as_bytes()[..1]));
        assert!(looks_binary(b"PK\x03\x04\0\0"));
        assert!(looks_binary(b"\xff\xfe\x01\x02\x03\x04\x05"));
        assert!(!looks_binary(b"caf\xe9 au lait"));
    }

    #[test]
    fn name_filters() {
        let f = NameFilter::new("*.rs").unwrap();
        assert!(f.matches("src/main.rs"));
        assert!(!f.matches("src/main.rsx"));
        let f = NameFilter::new("src/**/*.rs").unwrap();
        assert!(f.matches("src/a/b.rs"));
        assert!(f.matches("src/b.rs"));
        assert!(!f.matches("tests/b.rs"));
        assert!(NameFilter::new("[").is_err());
    }

    #[test]
    fn clipping_respects_characters() {
        assert_eq!(clip("héllo", 2), "h…");
        assert_eq!(clip("abc", 3), "abc");
    }
}
