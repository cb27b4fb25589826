//! Runs a document's console blocks in a scratch directory against the
//! built binary and compares each command's output with the one shown,
//! through snapbox: `[..]` stands for part of a line, `...` on a line of its
//! own for any lines, `[HASH]` for a hex digest, `[TIME]` for a timestamp.
//! The scratch directory reads as `/home/me/project`, and the server's port
//! as 8080. `DOCS_BLESS=1` writes the outputs the commands gave back into the
//! document (keeping the wildcards that still match). Commands find the
//! test plugins in `$TEST_PLUGINS` and the files of `tests/all/docs/fixtures`
//! in `$FIXTURES`.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use snapbox::{Assert, Data, Redactions};

use super::blocks::{Block, Directive, Step, blocks, steps};

/// The directory the documents show as the user's project.
const SHOWN_DIR: &str = "/home/me/project";
/// The port the documents' servers listen on.
const SHOWN_PORT: &str = "8080";
/// Longest one command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// Where a document is run.
pub(crate) struct Run {
    /// The scratch directory commands run in (symlinks resolved).
    pub(crate) dir: PathBuf,
    _scratch: Option<tempfile::TempDir>,
    bin: tempfile::TempDir,
    port: u16,
    server: Option<Child>,
    /// Extra environment for every command.
    env: Vec<(String, String)>,
    /// How long one command may take.
    pub(crate) timeout: Duration,
}

impl Run {
    /// A run in a new scratch directory.
    pub(crate) fn new() -> Self {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().canonicalize().unwrap();
        let mut run = Self::in_dir(dir);
        run._scratch = Some(scratch);
        run
    }

    /// A run in `dir`, which the caller keeps.
    pub(crate) fn in_dir(dir: PathBuf) -> Self {
        let bin = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_toolhost-cli"),
            bin.path().join("toolhost"),
        )
        .unwrap();
        let port = free_port();
        let plugins = Path::new(toolhost_tests::MISBEHAVE).parent().unwrap();
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("all/docs/fixtures");
        Self {
            dir,
            _scratch: None,
            bin,
            port,
            server: None,
            timeout: COMMAND_TIMEOUT,
            env: vec![
                ("TEST_PLUGINS".into(), plugins.display().to_string()),
                ("FIXTURES".into(), fixtures.display().to_string()),
                (
                    "TOOLHOST_CACHE_DIR".into(),
                    cache_dir().display().to_string(),
                ),
            ],
        }
    }

    /// Runs every console block of `markdown` (the document at `path`, for
    /// messages and blessing); panics listing every output that differs.
    pub(crate) fn document(&mut self, path: &Path, markdown: &str) {
        let started = Instant::now();
        let blocks = blocks(markdown).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut failures = Vec::new();
        let mut blessed: Vec<(std::ops::Range<usize>, usize, String)> = Vec::new();
        let (mut run, mut skipped) = (0, 0);
        for block in &blocks {
            let console = block.info == "console";
            if let Some(reason) = block.skipped() {
                assert!(
                    console,
                    "{}:{}: only console blocks are skipped",
                    path.display(),
                    block.line
                );
                assert!(
                    reason.split_whitespace().count() >= 4,
                    "{}:{}: say why the block cannot run: {reason:?}",
                    path.display(),
                    block.line
                );
                skipped += 1;
                continue;
            }
            self.prepare(path, block);
            if !console {
                continue;
            }
            run += 1;
            let steps = steps(block).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for step in steps {
                let actual = self.step(&step);
                if let Some(normalized) = differs(&actual, &step.expected) {
                    failures.push(format!(
                        "{}:{}: $ {}\n--- shown\n{}\n--- got\n{}\n",
                        path.display(),
                        step.line,
                        step.command,
                        step.expected,
                        actual
                    ));
                    blessed.push((step.output_lines.clone(), block.indent, normalized));
                }
            }
        }
        self.stop_server();
        eprintln!(
            "{}: {run} console blocks run, {skipped} skipped, in {:.1?}",
            path.display(),
            started.elapsed()
        );
        if failures.is_empty() {
            return;
        }
        if std::env::var_os("DOCS_BLESS").is_some() {
            bless(path, markdown, blessed);
        }
        panic!(
            "{} output(s) of {} differ from what the document shows (DOCS_BLESS=1 writes them \
             back):\n\n{}",
            failures.len(),
            path.display(),
            failures.join("\n")
        );
    }

    /// Writes the files and runs the setup the block's directives ask for.
    fn prepare(&mut self, path: &Path, block: &Block) {
        for directive in &block.directives {
            match directive {
                Directive::Skip(_) => {}
                Directive::File(file) | Directive::Append(file) => {
                    let target = self.dir.join(file);
                    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                    let mut text = if matches!(directive, Directive::Append(_)) {
                        std::fs::read_to_string(&target).unwrap_or_default()
                    } else {
                        String::new()
                    };
                    text.push_str(&block.text());
                    std::fs::write(&target, text).unwrap();
                }
                Directive::Setup(command) => {
                    let (status, output) = self.shell(command);
                    assert!(
                        status,
                        "{}:{}: setup `{command}` failed:\n{output}",
                        path.display(),
                        block.line
                    );
                }
            }
        }
    }

    /// Runs one step; returns its output as the document would show it.
    fn step(&mut self, step: &Step) -> String {
        // A server gets a port of its own (the kernel's choice, so that no
        // other test can take it first), which later commands then use.
        let output = if is_server(&step.command) {
            let output = self.start_server(&step.command.replace(&format!(":{SHOWN_PORT}"), ":0"));
            port_zero_shown(&output)
        } else {
            let port = format!(":{}", self.port);
            self.shell(&step.command.replace(&format!(":{SHOWN_PORT}"), &port))
                .1
        };
        let port = self.port;
        let shown = output
            .replace(&self.dir.display().to_string(), SHOWN_DIR)
            .replace(&format!(":{port}"), &format!(":{SHOWN_PORT}"));
        let trimmed: Vec<&str> = shown.trim_end().lines().map(str::trim_end).collect();
        trimmed.join("\n")
    }

    fn command(&self, line: &str) -> Command {
        let mut command = Command::new("bash");
        let path = format!(
            "{}:{}",
            self.bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        command
            .arg("-c")
            .arg(line)
            .current_dir(&self.dir)
            .env("PATH", path)
            .env_remove("RUST_LOG")
            .env_remove("TOOLHOST_CONFIG")
            // A document's `cargo build` builds where the document says.
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .process_group(0);
        command
    }

    /// Runs `line` with bash; stdout and stderr together.
    fn shell(&self, line: &str) -> (bool, String) {
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut child = self
            .command(line)
            .stdout(log.reopen().unwrap())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + self.timeout;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                kill_group(&mut child);
                panic!("`{line}` ran longer than {:?}", self.timeout);
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        (
            status.success(),
            std::fs::read_to_string(log.path()).unwrap(),
        )
    }

    /// Starts a server in the background and returns what it logged up to
    /// its `serving on` line (then it replaces the server before), or
    /// everything if it exits first.
    fn start_server(&mut self, line: &str) -> String {
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut child = self
            .command(line)
            .stdout(log.reopen().unwrap())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            let text = std::fs::read_to_string(log.path()).unwrap();
            if child.try_wait().unwrap().is_some() {
                return text;
            }
            if let Some(end) = text
                .find("serving on")
                .and_then(|at| text[at..].find('\n').map(|n| at + n))
            {
                self.stop_server();
                self.server = Some(child);
                self.port = served_port(&text[..end]);
                // Bundled plugins load beside the server's start: whether
                // a line saying so comes before `serving on` depends on
                // the compile cache, so the document shows none.
                let shown: Vec<&str> = text[..end]
                    .lines()
                    .filter(|line| !line.contains("toolhost::host::plugins: plugin loaded"))
                    .collect();
                return shown.join("\n");
            }
            if Instant::now() > deadline {
                kill_group(&mut child);
                panic!("`{line}` did not start serving within {COMMAND_TIMEOUT:?}:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn stop_server(&mut self) {
        if let Some(mut server) = self.server.take() {
            kill_group(&mut server);
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.stop_server();
    }
}

/// Whether `line` starts a server: `toolhost serve --http`, after any
/// variable assignments.
fn is_server(line: &str) -> bool {
    let words: Vec<&str> = line
        .split_whitespace()
        .skip_while(|w| w.contains('=') && !w.starts_with('-'))
        .collect();
    words.starts_with(&["toolhost", "serve", "--http"])
}

/// A port no one listens on now.
/// A port no server listens on now (where commands before the first
/// server would reach).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `text` with port 0 (what a server that did not start was asked for)
/// shown as the document's port.
fn port_zero_shown(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(":0") {
        let after = &rest[at + 2..];
        shown.push_str(&rest[..at]);
        if after.starts_with(|c: char| c.is_ascii_digit()) {
            shown.push_str(":0");
        } else {
            shown.push(':');
            shown.push_str(SHOWN_PORT);
        }
        rest = after;
    }
    shown.push_str(rest);
    shown
}

/// The port of the `serving on http://HOST:PORT` line ending `log`.
fn served_port(log: &str) -> u16 {
    let url = &log[log.rfind("serving on http://").expect("a serving line")..];
    let authority = url["serving on http://".len()..]
        .split(['/', ' '])
        .next()
        .unwrap_or_default();
    authority
        .rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url:?}"))
}

fn kill_group(child: &mut Child) {
    // SAFETY: signalling the process group this test started.
    unsafe {
        libc::kill(-(child.id() as i32), libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            // SAFETY: as above.
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The compiled-code cache the documents' commands share: filled once, so
/// that every command finds the bundled plugins compiled.
pub(crate) fn cache_dir() -> PathBuf {
    static WARM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    WARM.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/docs-cache");
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.canonicalize().unwrap();
        let empty = tempfile::tempdir().unwrap();
        let status = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
            .arg("status")
            .current_dir(empty.path())
            .env("TOOLHOST_CACHE_DIR", &dir)
            .env_remove("TOOLHOST_CONFIG")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(
            status.success(),
            "toolhost status fails in an empty directory"
        );
        dir
    })
    .clone()
}

fn redactions() -> Redactions {
    let mut redactions = Redactions::new();
    redactions
        .insert(
            "[HASH]",
            regex::Regex::new(r"\b(?<redacted>[0-9a-f]{64}|[0-9a-f]{12})\b").unwrap(),
        )
        .unwrap();
    redactions
        .insert(
            "[TIME]",
            regex::Regex::new(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z").unwrap(),
        )
        .unwrap();
    redactions
}

/// `None` when `actual` matches `expected`; else `actual` normalized to it
/// (the wildcards that still match kept), for blessing.
fn differs(actual: &str, expected: &str) -> Option<String> {
    let assert = Assert::new()
        .redact_with(redactions())
        .normalize_paths(false);
    let (actual, expected) = assert.normalize(Data::text(actual), Data::text(expected));
    let (actual, expected) = (actual.render().unwrap(), expected.render().unwrap());
    (actual.trim_end() != expected.trim_end()).then(|| actual.trim_end().to_string())
}

/// Writes the normalized outputs over the shown ones.
fn bless(path: &Path, markdown: &str, mut outputs: Vec<(std::ops::Range<usize>, usize, String)>) {
    let mut lines: Vec<String> = markdown.lines().map(String::from).collect();
    outputs.sort_by_key(|(range, ..)| std::cmp::Reverse(range.start));
    for (range, indent, text) in outputs {
        let pad = " ".repeat(indent);
        let new: Vec<String> = text
            .lines()
            .map(|l| {
                if l.is_empty() {
                    String::new()
                } else {
                    format!("{pad}{l}")
                }
            })
            .collect();
        lines.splice(range, new);
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}
