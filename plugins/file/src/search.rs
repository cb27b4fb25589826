//! `search_files`: find files by name (a glob) and lines by content (a
//! regular expression), streaming each file in chunks and stopping at the
//! result cap.

use std::fs::{self, File};
use std::io::Read;
use std::time::{Duration, Instant};

use regex::bytes::{Regex, RegexBuilder};
use toolhost_sdk::prelude::*;

use crate::fsio::{NameFilter, SNIFF_BYTES, clip, io_error, looks_binary};
use crate::walk::{Include, Kind, Walk};

/// Results returned when `max_results` is not given, and at most.
const DEFAULT_RESULTS: usize = 100;
const MAX_RESULTS: usize = 1000;
/// Deepest directory level searched.
const MAX_DEPTH: usize = 64;
/// Bytes read from a file at a time.
const CHUNK: usize = 256 * 1024;
/// A line longer than this is searched in pieces of this size.
const MAX_LINE: usize = 1 << 20;
/// Most characters of a matching line returned.
const MAX_LINE_SHOWN: usize = 300;
/// The search stops (with what it found) after this long, well inside the
/// host's time limit for a call.
const TIME_BUDGET: Duration = Duration::from_secs(10);

/// Arguments of `search_files`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchFilesArgs {
    /// A regular expression (Rust `regex` syntax) to find in file contents,
    /// line by line, e.g. `fn \w+\(` or `TODO|FIXME`. Leave it out to find
    /// files by name only.
    #[serde(default)]
    pattern: Option<String>,
    /// Only files whose name matches this glob (`*.rs`, `*.{ts,tsx}`,
    /// `Cargo.toml`); a glob with a `/` matches the path relative to `path`
    /// (`src/**/test_*.py`).
    #[serde(default)]
    glob: Option<String>,
    /// The directory to search (default `.`, the workspace), or one file.
    #[serde(default)]
    path: Option<String>,
    /// Match `pattern` regardless of case (default false).
    #[serde(default)]
    case_insensitive: bool,
    /// Also search hidden files and directories, whose names start with `.`
    /// (default false).
    #[serde(default)]
    include_hidden: bool,
    /// Also search files that `.gitignore` or `.ignore` files exclude (build
    /// output, dependencies); default false, as in ripgrep.
    #[serde(default)]
    include_ignored: bool,
    /// The most results to return (default 100, at most 1000): matching
    /// lines, or file names when there is no `pattern`.
    #[serde(default)]
    max_results: Option<usize>,
}

/// Search files under a directory. With `glob` only, returns the `files`
/// whose names match. With `pattern`, returns `matches`: each matching line's
/// `path`, `line` number (from 1) and `text` (cut at 300 characters), in
/// files that match `glob` if given. Binary files, hidden entries and what
/// `.gitignore` or `.ignore` files exclude are skipped (`include_hidden`,
/// `include_ignored` search them too); symbolic links are not followed.
/// Stops at `max_results` (default 100) with `truncated: true`: narrow
/// `path`, `glob` or `pattern` then.
/// Returned paths can be passed to read_file as they are.
#[tool(toolset = "file", permissions = ["file:read"], read_only, emoji = "🔍")]
pub(crate) fn search_files(args: SearchFilesArgs) -> Result<Value, ToolError> {
    let root = match args.path.as_deref() {
        None | Some("") => ".",
        Some(path) => path,
    };
    let max_results = args.max_results.unwrap_or(DEFAULT_RESULTS);
    if !(1..=MAX_RESULTS).contains(&max_results) {
        return Err(ToolError::invalid_arguments(format!(
            "max_results must be between 1 and {MAX_RESULTS}"
        )));
    }
    let filter = args.glob.as_deref().map(NameFilter::new).transpose()?;
    let matcher = args
        .pattern
        .as_deref()
        .map(|p| LineMatcher::new(p, args.case_insensitive))
        .transpose()?;
    if filter.is_none() && matcher.is_none() {
        return Err(ToolError::invalid_arguments(
            "give a pattern (a regular expression to find in file contents), a glob (to \
             find files by name), or both",
        ));
    }
    let metadata = fs::metadata(root).map_err(|e| io_error("searching", root, &e))?;
    let deadline = Instant::now() + TIME_BUDGET;
    let mut search = Search {
        matcher,
        max_results,
        deadline,
        buffer: Vec::new(),
        matches: Vec::new(),
        files: Vec::new(),
        files_searched: 0,
        skipped_binary: 0,
        unreadable: 0,
        full: false,
    };

    let mut timed_out = false;
    if metadata.is_file() {
        let name = root.rsplit('/').next().unwrap_or(root);
        if filter.as_ref().is_none_or(|f| f.matches(name)) {
            search.file(root, root);
        }
    } else {
        fs::read_dir(root).map_err(|e| io_error("searching", root, &e))?;
        let include = Include {
            hidden: args.include_hidden,
            ignored: args.include_ignored,
        };
        let mut walk = Walk::new(root, MAX_DEPTH, include).deadline(deadline);
        for entry in walk.by_ref() {
            if entry.kind != Kind::File
                || filter.as_ref().is_some_and(|f| !f.matches(&entry.relative))
            {
                continue;
            }
            search.file(&entry.path.to_string_lossy(), &entry.shown);
            if search.full || Instant::now() >= deadline {
                break;
            }
        }
        timed_out = walk.timed_out || (!search.full && Instant::now() >= deadline);
        search.unreadable += walk.unreadable;
    }
    Ok(search.into_result(timed_out))
}

/// A compiled content pattern.
struct LineMatcher {
    /// Matches one line.
    line: Regex,
    /// Matches a block of lines when some line of it matches (`(?m)`), to
    /// skip blocks without a match in one pass. `None` for patterns where
    /// that does not hold (`\A`, `\z`, `$`).
    block: Option<Regex>,
}

impl LineMatcher {
    fn new(pattern: &str, case_insensitive: bool) -> Result<Self, ToolError> {
        let build = |pattern: &str, multi_line: bool| {
            RegexBuilder::new(pattern)
                .case_insensitive(case_insensitive)
                .multi_line(multi_line)
                .size_limit(8 << 20)
                .build()
        };
        let line = build(pattern, false).map_err(|e| {
            ToolError::invalid_arguments(format!(
                "pattern is not a valid regular expression: {e}. Escape special characters \
                 like ( ) [ ] {{ }} . * + ? | \\ with a backslash to match them literally"
            ))
        })?;
        // `$` would not match before the `\r` of a `\r\n` line end in a block
        // (lines are matched without it), and `(?-m)` would undo multi-line.
        let anchored = ["\\A", "\\z", "$", "-m"]
            .iter()
            .any(|anchor| pattern.contains(anchor));
        let block = if anchored {
            None
        } else {
            build(pattern, true).ok()
        };
        Ok(Self { line, block })
    }
}

/// The state of one search.
struct Search {
    matcher: Option<LineMatcher>,
    max_results: usize,
    deadline: Instant,
    /// The read buffer, allocated for the first file searched and reused.
    buffer: Vec<u8>,
    matches: Vec<Value>,
    files: Vec<String>,
    files_searched: usize,
    skipped_binary: usize,
    unreadable: usize,
    /// The result cap was reached.
    full: bool,
}

impl Search {
    /// Handles one file that passed the name filter.
    fn file(&mut self, path: &str, shown: &str) {
        if self.matcher.is_none() {
            self.files.push(shown.to_string());
            self.full = self.files.len() >= self.max_results;
            return;
        }
        match File::open(path) {
            Ok(file) => {
                self.files_searched += 1;
                if self.grep(file, shown).is_err() {
                    self.unreadable += 1;
                }
            }
            Err(_) => self.unreadable += 1,
        }
    }

    /// Searches one file's lines, a chunk at a time.
    fn grep(&mut self, mut file: File, shown: &str) -> std::io::Result<()> {
        let Some(matcher) = self.matcher.take() else {
            return Ok(());
        };
        let result = self.grep_with(&matcher, &mut file, shown);
        self.matcher = Some(matcher);
        result
    }

    fn grep_with(
        &mut self,
        matcher: &LineMatcher,
        file: &mut File,
        shown: &str,
    ) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            self.buffer = vec![0; CHUNK + MAX_LINE];
        }
        let mut buffer = std::mem::take(&mut self.buffer);
        let result = self.grep_into(matcher, file, shown, &mut buffer);
        self.buffer = buffer;
        result
    }

    fn grep_into(
        &mut self,
        matcher: &LineMatcher,
        file: &mut File,
        shown: &str,
        buffer: &mut [u8],
    ) -> std::io::Result<()> {
        // `buffer[..filled]` holds the unsearched tail of the previous chunk
        // (a partial line) followed by the chunk just read.
        let mut filled = 0;
        let mut line_number = 1usize;
        let mut first = true;
        loop {
            let read = read_full(file, &mut buffer[filled..filled + CHUNK])?;
            filled += read;
            let at_end = read < CHUNK;
            if first {
                first = false;
                if looks_binary(&buffer[..filled.min(SNIFF_BYTES)]) {
                    self.skipped_binary += 1;
                    return Ok(());
                }
            }
            // Search whole lines; keep a trailing partial line for the next
            // chunk unless the file ended or the line is too long.
            let searchable = if at_end || filled >= MAX_LINE {
                filled
            } else {
                memchr::memrchr(b'\n', &buffer[..filled]).map_or(0, |i| i + 1)
            };
            line_number = self.search_block(matcher, &buffer[..searchable], line_number, shown);
            buffer.copy_within(searchable..filled, 0);
            filled -= searchable;
            if at_end || self.full || Instant::now() >= self.deadline {
                return Ok(());
            }
        }
    }

    /// Searches complete lines starting at `line_number`; returns the number
    /// of the line after them.
    fn search_block(
        &mut self,
        matcher: &LineMatcher,
        block: &[u8],
        mut line_number: usize,
        shown: &str,
    ) -> usize {
        if block.is_empty() {
            return line_number;
        }
        if let Some(quick) = &matcher.block
            && !quick.is_match(block)
        {
            return line_number + memchr::memchr_iter(b'\n', block).count();
        }
        for line in block.split_inclusive(|&b| b == b'\n') {
            let text = line
                .strip_suffix(b"\n")
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                .unwrap_or(line);
            if matcher.line.is_match(text) {
                self.matches.push(json!({
                    "path": shown,
                    "line": line_number,
                    "text": clip(&String::from_utf8_lossy(text), MAX_LINE_SHOWN),
                }));
                if self.matches.len() >= self.max_results {
                    self.full = true;
                    break;
                }
            }
            if line.ends_with(b"\n") {
                line_number += 1;
            }
        }
        line_number
    }

    fn into_result(self, timed_out: bool) -> Value {
        let truncated = self.full || timed_out;
        let mut result = if self.matcher.is_some() {
            let files_matched = {
                let mut paths: Vec<&str> = self
                    .matches
                    .iter()
                    .filter_map(|m| m["path"].as_str())
                    .collect();
                paths.dedup();
                paths.len()
            };
            json!({
                "matches": self.matches,
                "count": self.matches.len(),
                "files_matched": files_matched,
                "files_searched": self.files_searched,
                "skipped_binary": self.skipped_binary,
                "truncated": truncated,
            })
        } else {
            json!({
                "files": self.files,
                "count": self.files.len(),
                "truncated": truncated,
            })
        };
        if self.full {
            result["note"] = json!(format!(
                "stopped at {} results (max_results); narrow path, glob or pattern to see \
                 the rest",
                self.max_results
            ));
        } else if timed_out {
            result["note"] = json!(format!(
                "stopped after {} s with partial results; narrow path or glob",
                TIME_BUDGET.as_secs()
            ));
        }
        if self.unreadable > 0 {
            result["unreadable"] = json!(self.unreadable);
        }
        result
    }
}

/// Reads until `buffer` is full or the file ends.
fn read_full(file: &mut File, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
