//! Property tests of the file rules. Random trees (directories, files, and
//! symlinks inside, outside, to ancestors, dangling, in chains), random
//! profiles (`file.read`, `file.write`, `file.deny`) and random sequences of
//! reads, writes, listings, stats, renames, hard links and symlinks, with
//! paths spelled in many ways, go through a real host and the `files` test
//! guest. A model of the intended policy judges every operation on the path
//! the kernel would use (symlinks resolved component by component on the
//! model's own tree, which follows the operations that succeed):
//!
//! - the model refuses ⇒ the host must fail, and change nothing;
//! - the model allows ⇒ the host must succeed, with the model's output and
//!   effect (the one corner the model leaves open, a rename spelled with a
//!   trailing slash or dot, is counted as `unsure`);
//! - after each operation the real tree equals the model's;
//! - no output ever holds the marker of a file that is denied or outside the
//!   grants, and nothing outside the write grants, or denied, ever changes.
//!
//! Relative paths start in the workspace whether or not the profile grants
//! it: the workspace itself may then be read as a directory, and its listing
//! shows only what may be read.
//!
//! CI runs [`CI_CASES`] cases from [`CI_SEED`]. A longer run (see
//! docs/config.md): `PROPTEST_CASES=5000 PROPTEST_RNG_SEED=7 cargo test -p
//! toolhost-tests --test all paths_model`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use serde_json::{Value, json};
use toolhost::policy::paths::normalize;
use toolhost::{CallRequest, Caller, Host};

/// Cases a CI run tries, and the seed it starts from.
const CI_CASES: u32 = 400;
const CI_SEED: u64 = 14;

/// Directories every tree has (relative to its root; `ws` is the workspace).
const DIRS: &[&str] = &[
    "ws",
    "ws/a",
    "ws/a/b",
    "ws/out",
    "ws/secrets",
    "ws/cfg",
    "outside",
];
/// Directories some trees have.
const EXTRA_DIRS: &[&str] = &[
    "ws/cfg/secrets",
    "ws/out/deep",
    "ws/a/.env",
    "ws/secrets/sub",
    "ws/a/b/c",
];
/// Files every tree has.
const FIXED_FILES: &[&str] = &[
    "top.txt",
    "outside/o.txt",
    "ws/notes.txt",
    "ws/.env",
    "ws/secrets/key.txt",
];
const FILE_NAMES: &[&str] = &["f.txt", "g.txt", ".env", "x.key", "k.pem"];
const LINK_NAMES: &[&str] = &["l1", "l2", "l3", "s.key", ".env"];
/// Names that do not exist yet: where writes, renames and links create.
const FRESH_NAMES: &[&str] = &["new.txt", ".env", "n.key", "m.pem", "d"];
const READ_GRANTS: &[&str] = &[".", "a", "a/b", "out", "cfg"];
const WRITE_GRANTS: &[&str] = &["out", "a/b", "cfg", "."];
const DENY_GLOBS: &[&str] = &[
    "secrets/**",
    "**/.env",
    "*.key",
    "**/*.pem",
    "cfg/secrets/**",
    "a/b/*.txt",
];

// ---------------------------------------------------------------- inputs

/// Where a symlink points, chosen among the entries of the tree.
#[derive(Debug, Clone)]
enum Target {
    /// A relative path to an entry.
    Relative(u8),
    /// The absolute path of an entry.
    Absolute(u8),
    /// `..`, `../..` or `../../..` (loops back through ancestors).
    Up(u8),
    /// `.`
    Dot,
    /// The link's own name.
    Itself,
    /// A relative path to a name that does not exist, in some directory.
    Dangling(u8, u8),
}

/// How a path names its target.
#[derive(Debug, Clone, Copy)]
enum Spelling {
    Relative,
    Absolute,
    DoubledSlashes,
    DotSegments,
    /// Into a directory and back out with `..`.
    Detour,
    TrailingSlash,
    /// Through a symlink that leads to one of the target's ancestors.
    ViaLink,
    /// `link/../rest`: `..` after a symlink.
    ViaLinkParent,
    /// Out of the workspace and back in: `../ws/...`.
    ClimbBack,
}

#[derive(Debug, Clone)]
struct PathSpec {
    /// A name that does not exist yet, in some directory.
    fresh: bool,
    pick: u8,
    name: u8,
    spelling: Spelling,
    via: u8,
}

#[derive(Debug, Clone)]
enum Op {
    Read(PathSpec),
    Write(PathSpec),
    List(PathSpec),
    Stat(PathSpec),
    Rename(PathSpec, PathSpec),
    Link(PathSpec, PathSpec),
    Symlink(Target, PathSpec),
}

#[derive(Debug, Clone)]
struct Case {
    extra_dirs: Vec<&'static str>,
    files: Vec<(u8, u8)>,
    links: Vec<(u8, u8, Target)>,
    read: Vec<&'static str>,
    write: Vec<&'static str>,
    deny: Vec<&'static str>,
    ops: Vec<Op>,
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        4 => any::<u8>().prop_map(Target::Relative),
        1 => any::<u8>().prop_map(Target::Absolute),
        2 => (1u8..=3).prop_map(Target::Up),
        1 => Just(Target::Dot),
        1 => Just(Target::Itself),
        2 => (any::<u8>(), any::<u8>()).prop_map(|(d, n)| Target::Dangling(d, n)),
    ]
}

fn spelling() -> impl Strategy<Value = Spelling> {
    prop_oneof![
        3 => Just(Spelling::Relative),
        2 => Just(Spelling::Absolute),
        1 => Just(Spelling::DoubledSlashes),
        1 => Just(Spelling::DotSegments),
        1 => Just(Spelling::Detour),
        1 => Just(Spelling::TrailingSlash),
        3 => Just(Spelling::ViaLink),
        3 => Just(Spelling::ViaLinkParent),
        1 => Just(Spelling::ClimbBack),
    ]
}

fn path_spec(fresh: f64) -> impl Strategy<Value = PathSpec> {
    (
        prop::bool::weighted(fresh),
        any::<u8>(),
        any::<u8>(),
        spelling(),
        any::<u8>(),
    )
        .prop_map(|(fresh, pick, name, spelling, via)| PathSpec {
            fresh,
            pick,
            name,
            spelling,
            via,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => path_spec(0.1).prop_map(Op::Read),
        2 => path_spec(0.5).prop_map(Op::Write),
        1 => path_spec(0.0).prop_map(Op::List),
        1 => path_spec(0.2).prop_map(Op::Stat),
        3 => (path_spec(0.1), path_spec(0.6)).prop_map(|(a, b)| Op::Rename(a, b)),
        2 => (path_spec(0.1), path_spec(0.8)).prop_map(|(a, b)| Op::Link(a, b)),
        2 => (target(), path_spec(0.9)).prop_map(|(t, at)| Op::Symlink(t, at)),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::sample::subsequence(EXTRA_DIRS, 0..=EXTRA_DIRS.len()),
        prop::collection::vec((any::<u8>(), any::<u8>()), 0..6),
        prop::collection::vec((any::<u8>(), any::<u8>(), target()), 0..6),
        // The workspace itself is read-granted in most cases; relative paths
        // start in it either way.
        (
            prop::bool::weighted(0.6),
            prop::sample::subsequence(&READ_GRANTS[1..], 0..=2),
        )
            .prop_map(|(workspace, mut read)| {
                if workspace {
                    read.insert(0, READ_GRANTS[0]);
                }
                read
            }),
        prop::sample::subsequence(WRITE_GRANTS, 1..=2),
        prop::sample::subsequence(DENY_GLOBS, 0..=4),
        prop::collection::vec(op(), 1..12),
    )
        .prop_map(|(extra_dirs, files, links, read, write, deny, ops)| Case {
            extra_dirs,
            files,
            links,
            read,
            write,
            deny,
            ops,
        })
}

// ---------------------------------------------------------------- the model

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Dir,
    /// `ino` tells hard links apart.
    File {
        ino: u64,
        text: String,
    },
    Link(String),
}

/// The model's view of the filesystem under the case's root. Everything
/// outside the root is taken as absent, except the root's ancestors.
#[derive(Debug, Clone)]
struct Tree {
    root: PathBuf,
    nodes: BTreeMap<PathBuf, Node>,
    next_ino: u64,
}

/// A path resolved as the kernel would resolve it.
#[derive(Debug, Clone, PartialEq)]
enum Resolved {
    /// An existing entry (a symlink only when the last one is not followed).
    Found(PathBuf, Node),
    /// An absent last component in an existing directory; `dir` if the path
    /// asked for a directory (trailing slash, `.`).
    Missing(PathBuf, bool),
}

impl Resolved {
    fn path(&self) -> &Path {
        match self {
            Self::Found(path, _) | Self::Missing(path, _) => path,
        }
    }
}

impl Tree {
    /// Reads the real tree under `root`.
    fn scan(root: &Path) -> Self {
        let mut nodes = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        nodes.insert(root.to_path_buf(), Node::Dir);
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let meta = std::fs::symlink_metadata(&path).unwrap();
                let node = if meta.is_dir() {
                    stack.push(path.clone());
                    Node::Dir
                } else if meta.file_type().is_symlink() {
                    Node::Link(
                        std::fs::read_link(&path)
                            .unwrap()
                            .to_string_lossy()
                            .into_owned(),
                    )
                } else {
                    Node::File {
                        ino: meta.ino(),
                        text: std::fs::read_to_string(&path).unwrap_or_default(),
                    }
                };
                nodes.insert(path, node);
            }
        }
        Self {
            root: root.to_path_buf(),
            nodes,
            next_ino: 1 << 62,
        }
    }

    /// What can be compared with the real tree: kinds, texts and targets
    /// (inode numbers are the model's own).
    fn view(&self) -> BTreeMap<PathBuf, String> {
        self.nodes
            .iter()
            .map(|(path, node)| {
                let shown = match node {
                    Node::Dir => "dir".to_owned(),
                    Node::File { text, .. } => format!("file {text:?}"),
                    Node::Link(target) => format!("link -> {target}"),
                };
                (path.clone(), shown)
            })
            .collect()
    }

    fn node(&self, path: &Path) -> Option<Node> {
        if let Some(node) = self.nodes.get(path) {
            return Some(node.clone());
        }
        (self.root.starts_with(path) && path != self.root).then_some(Node::Dir)
    }

    fn dirs(&self) -> Vec<PathBuf> {
        self.nodes
            .iter()
            .filter(|(_, node)| **node == Node::Dir)
            .map(|(path, _)| path.clone())
            .collect()
    }

    fn entries(&self) -> Vec<PathBuf> {
        self.nodes.keys().cloned().collect()
    }

    fn links(&self) -> Vec<PathBuf> {
        self.nodes
            .iter()
            .filter(|(_, node)| matches!(node, Node::Link(_)))
            .map(|(path, _)| path.clone())
            .collect()
    }

    /// Resolves `rest` from the directory `base` as the kernel does: each
    /// component in turn, a symlink replaced by its target where it stands
    /// (so `link/..` is the parent of where `link` leads). `follow` follows
    /// a symlink in the last component. `beneath` fails as cap-std does when
    /// the walk leaves `base` or meets an absolute symlink.
    fn resolve(
        &self,
        base: &Path,
        rest: &str,
        follow: bool,
        beneath: bool,
    ) -> Result<Resolved, &'static str> {
        let mut want_dir = rest.ends_with('/');
        let mut queue: VecDeque<String> = segments(rest);
        if matches!(queue.back().map(String::as_str), Some("." | "..")) {
            want_dir = true;
        }
        let mut current = base.to_path_buf();
        let mut links = 0;
        while let Some(segment) = queue.pop_front() {
            let last = queue.is_empty();
            match segment.as_str() {
                "." => {}
                ".." => {
                    if beneath && current == base {
                        return Err("leaves the preopened directory");
                    }
                    current.pop();
                }
                name => {
                    let next = current.join(name);
                    match self.node(&next) {
                        Some(Node::Link(target)) if !last || follow || want_dir => {
                            links += 1;
                            if links > 40 {
                                return Err("too many levels of symbolic links");
                            }
                            if target.starts_with('/') {
                                if beneath {
                                    return Err("absolute symlink");
                                }
                                current = PathBuf::from("/");
                            }
                            let mut expanded = segments(&target);
                            if last && matches!(target.as_str(), "." | "..") {
                                want_dir = true;
                            }
                            expanded.extend(queue);
                            queue = expanded;
                        }
                        Some(Node::Dir) => current = next,
                        Some(node) if last && !want_dir => return Ok(Resolved::Found(next, node)),
                        Some(_) => return Err("not a directory"),
                        None if last => return Ok(Resolved::Missing(next, want_dir)),
                        None => return Err("no such directory"),
                    }
                }
            }
        }
        Ok(Resolved::Found(current, Node::Dir))
    }

    /// Where a symlink in `dir` would lead, if it resolves.
    fn lead(&self, dir: &Path, target: &str) -> Option<Resolved> {
        let (base, rest) = match target.strip_prefix('/') {
            Some(rest) => (Path::new("/"), rest),
            None => (dir, target),
        };
        self.resolve(base, rest, true, false).ok()
    }

    fn write(&mut self, path: &Path, text: &str) {
        match self.nodes.get(path) {
            Some(Node::File { ino, .. }) => {
                let ino = *ino;
                for node in self.nodes.values_mut() {
                    if let Node::File {
                        ino: other,
                        text: old,
                    } = node
                        && *other == ino
                    {
                        *old = text.to_owned();
                    }
                }
            }
            _ => {
                self.next_ino += 1;
                let node = Node::File {
                    ino: self.next_ino,
                    text: text.to_owned(),
                };
                self.nodes.insert(path.to_path_buf(), node);
            }
        }
    }

    fn rename(&mut self, from: &Path, to: &Path) {
        if from == to {
            return;
        }
        self.nodes.remove(to);
        let moved: Vec<PathBuf> = self
            .nodes
            .keys()
            .filter(|path| path.starts_with(from))
            .cloned()
            .collect();
        for path in moved {
            let node = self.nodes.remove(&path).unwrap();
            let new = to.join(path.strip_prefix(from).unwrap());
            self.nodes.insert(new, node);
        }
    }
}

fn segments(path: &str) -> VecDeque<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `to` relative to the directory `from`.
fn relative(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_owned(); from.len() - common];
    parts.extend(
        to[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// A `file.deny` glob of [`DENY_GLOBS`], as the model reads it.
#[derive(Debug, Clone)]
enum Deny {
    /// `dir/**`: the directory and everything in it.
    Under(PathBuf),
    /// `**/name`: any entry with that name.
    Name(String),
    /// `dir/*suffix`: entries of `dir` whose name ends so.
    ChildSuffix(PathBuf, String),
    /// `**/*suffix`
    AnySuffix(String),
}

impl Deny {
    fn parse(glob: &str, workspace: &Path) -> Self {
        if let Some(name) = glob.strip_prefix("**/") {
            return match name.strip_prefix('*') {
                Some(suffix) => Self::AnySuffix(suffix.to_owned()),
                None => Self::Name(name.to_owned()),
            };
        }
        if let Some(dir) = glob.strip_suffix("/**") {
            return Self::Under(workspace.join(dir));
        }
        let (dir, name) = glob.rsplit_once('/').unwrap_or(("", glob));
        let suffix = name.strip_prefix('*').expect("a `*suffix` glob");
        Self::ChildSuffix(workspace.join(dir), suffix.to_owned())
    }

    fn matches(&self, path: &Path) -> bool {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match self {
            Self::Under(dir) => path == dir,
            Self::Name(wanted) => name == *wanted,
            Self::ChildSuffix(dir, suffix) => {
                path.parent() == Some(dir.as_path()) && name.ends_with(suffix.as_str())
            }
            Self::AnySuffix(suffix) => !name.is_empty() && name.ends_with(suffix.as_str()),
        }
    }

    /// The directory the glob names literally, if any: renaming it, or one
    /// of its ancestors, would leave the glob behind.
    fn literal(&self) -> Option<&Path> {
        match self {
            Self::Under(dir) | Self::ChildSuffix(dir, _) => Some(dir),
            Self::Name(_) | Self::AnySuffix(_) => None,
        }
    }
}

/// One directory the guest sees, as wasi-libc and cap-std use it.
#[derive(Debug, Clone)]
struct Preopen {
    /// The guest's name for it (`.` for the workspace).
    name: String,
    host: PathBuf,
    writable: bool,
}

/// The intended policy on canonical paths, and the guest's view of the
/// grants.
#[derive(Debug)]
struct Policy {
    workspace: PathBuf,
    grants: Vec<(PathBuf, bool)>,
    deny: Vec<Deny>,
    preopens: Vec<Preopen>,
}

impl Policy {
    fn new(case: &Case, workspace: &Path) -> Self {
        let mut grants: Vec<(PathBuf, bool)> = Vec::new();
        for (dirs, writable) in [(&case.write, true), (&case.read, false)] {
            for dir in dirs {
                let dir = normalize(&workspace.join(dir));
                match grants.iter_mut().find(|(d, _)| *d == dir) {
                    Some((_, w)) => *w |= writable,
                    None => grants.push((dir, writable)),
                }
            }
        }
        let mut preopens: Vec<Preopen> = grants
            .iter()
            .map(|(dir, writable)| Preopen {
                name: dir.to_string_lossy().into_owned(),
                host: dir.clone(),
                writable: *writable,
            })
            .collect();
        // The workspace, where relative paths start, whether or not it is
        // granted itself.
        preopens.push(Preopen {
            name: ".".to_owned(),
            host: workspace.to_path_buf(),
            writable: grants
                .iter()
                .any(|(dir, w)| *w && dir.starts_with(workspace)),
        });
        Self {
            workspace: workspace.to_path_buf(),
            grants,
            deny: case
                .deny
                .iter()
                .map(|g| Deny::parse(g, workspace))
                .collect(),
            preopens,
        }
    }

    fn denied(&self, path: &Path) -> bool {
        path.ancestors()
            .any(|a| self.deny.iter().any(|rule| rule.matches(a)))
    }

    /// Whether `path` may be read (or written, with `write`). The workspace
    /// itself may always be read as a directory (its listing shows only what
    /// may be read).
    fn allows(&self, path: &Path, write: bool) -> Result<(), String> {
        if self.denied(path) {
            return Err(format!("{} is denied", path.display()));
        }
        if self
            .grants
            .iter()
            .any(|(dir, w)| (*w || !write) && path.starts_with(dir))
            || (!write && path == self.workspace)
        {
            Ok(())
        } else {
            Err(format!(
                "{} is outside the {} grants",
                path.display(),
                if write { "write" } else { "read" }
            ))
        }
    }

    /// The directory wasi-libc opens `path` in, and the rest of the path:
    /// the longest preopen name that is a prefix of it (leading slashes
    /// ignored), `.` (named "") matching any path.
    fn route(&self, path: &str) -> Option<(&Preopen, String)> {
        let stripped = path.trim_start_matches('/');
        let (preopen, length) = self
            .preopens
            .iter()
            .filter_map(|p| {
                let prefix = p.name.trim_start_matches('/');
                let prefix = if prefix == "." { "" } else { prefix };
                let matches = prefix.is_empty()
                    || (stripped.starts_with(prefix)
                        && matches!(stripped.as_bytes().get(prefix.len()), None | Some(b'/')));
                matches.then_some((p, prefix.len()))
            })
            .rev()
            .max_by_key(|(_, length)| *length)?;
        let rest = stripped[length..].trim_start_matches('/');
        Some((
            preopen,
            if rest.is_empty() {
                ".".into()
            } else {
                rest.into()
            },
        ))
    }
}

/// What the model expects of one operation.
#[derive(Debug)]
enum Expect {
    /// Success, with this output and effect.
    Ok(Output, Effect),
    /// The policy refuses it: the host must fail.
    Refused(String),
    /// It cannot succeed (no such file, not a directory, the walk leaves
    /// the preopened directory): the host must fail.
    Fails(String),
    /// A corner the model does not predict (trailing slashes on renames).
    Unsure(String),
}

#[derive(Debug)]
enum Output {
    Any,
    Text(String),
    Names(Vec<String>),
    Size(u64),
}

#[derive(Debug)]
enum Effect {
    None,
    Write(PathBuf, String),
    Rename(PathBuf, PathBuf),
    Link(PathBuf, Node),
    Symlink(PathBuf, String),
}

/// A path judged for an operation: where it is opened, and where the kernel
/// really goes.
struct Judged {
    real: Resolved,
    preopen_base: PathBuf,
}

struct Model {
    tree: Tree,
    policy: Policy,
}

impl Model {
    /// Judges one path: as written (normalised), where the kernel goes,
    /// whether cap-std can walk it from the directory wasi-libc picks, and
    /// whether that directory is writable.
    fn judge(&self, path: &str, write: bool, follow: bool) -> Result<Judged, Expect> {
        let Some((preopen, rest)) = self.policy.route(path) else {
            return Err(Expect::Fails("no preopened directory".into()));
        };
        let lexical = normalize(&preopen.host.join(&rest));
        self.policy
            .allows(&lexical, write)
            .map_err(|why| Expect::Refused(format!("as written: {why}")))?;
        let real = self
            .tree
            .resolve(&preopen.host, &rest, follow, false)
            .map_err(|why| Expect::Fails(why.into()))?;
        self.policy
            .allows(real.path(), write)
            .map_err(|why| Expect::Refused(format!("really: {why}")))?;
        self.tree
            .resolve(&preopen.host, &rest, follow, true)
            .map_err(|why| Expect::Fails(format!("cap-std: {why}")))?;
        if write && !preopen.writable {
            return Err(Expect::Fails(format!(
                "{} is preopened read-only",
                preopen.host.display()
            )));
        }
        Ok(Judged {
            real,
            preopen_base: preopen.host.clone(),
        })
    }

    /// Why moving (or linking) `path` would carry something denied, or a
    /// granted directory, to another name.
    fn carries(&self, path: &Path) -> Option<String> {
        if let Some(rule) = self
            .policy
            .deny
            .iter()
            .find(|rule| rule.literal().is_some_and(|dir| dir.starts_with(path)))
        {
            return Some(format!("{rule:?} names a path inside"));
        }
        if let Some(inside) = self
            .tree
            .nodes
            .keys()
            .find(|p| p.starts_with(path) && *p != path && self.policy.denied(p))
        {
            return Some(format!("{} inside is denied", inside.display()));
        }
        None
    }

    fn expect(&self, op: &Rendered) -> Expect {
        match self.expect_inner(op) {
            Ok(expect) | Err(expect) => expect,
        }
    }

    fn expect_inner(&self, op: &Rendered) -> Result<Expect, Expect> {
        Ok(match op {
            Rendered::Read(path) => match self.judge(path, false, true)?.real {
                Resolved::Found(_, Node::File { text, .. }) => {
                    Expect::Ok(Output::Text(text), Effect::None)
                }
                other => Expect::Fails(format!("not a file: {other:?}")),
            },
            Rendered::Stat(path) => match self.judge(path, false, true)?.real {
                Resolved::Found(_, Node::File { text, .. }) => {
                    Expect::Ok(Output::Size(text.len() as u64), Effect::None)
                }
                Resolved::Found(..) => Expect::Ok(Output::Any, Effect::None),
                Resolved::Missing(..) => Expect::Fails("absent".into()),
            },
            Rendered::List(path) => match self.judge(path, false, true)?.real {
                Resolved::Found(dir, Node::Dir) => {
                    let names = self
                        .tree
                        .nodes
                        .keys()
                        .filter(|p| {
                            p.parent() == Some(dir.as_path())
                                && self.policy.allows(p, false).is_ok()
                        })
                        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                        .collect();
                    Expect::Ok(Output::Names(names), Effect::None)
                }
                other => Expect::Fails(format!("not a directory: {other:?}")),
            },
            Rendered::Write(path, text) => match self.judge(path, true, true)?.real {
                Resolved::Found(file, Node::File { .. }) | Resolved::Missing(file, false) => {
                    Expect::Ok(Output::Any, Effect::Write(file, text.clone()))
                }
                other => Expect::Fails(format!("cannot write {other:?}")),
            },
            Rendered::Rename(from, to) => self.expect_rename(from, to)?,
            Rendered::Link(from, to) => {
                let source = self.judge(from, true, false)?;
                // A hard link to a symlink is judged where it leads too.
                if let Resolved::Found(path, Node::Link(target)) = &source.real
                    && let Some(lead) = self.tree.lead(path.parent().unwrap(), target)
                {
                    self.policy
                        .allows(lead.path(), true)
                        .map_err(|why| Expect::Refused(format!("the link leads: {why}")))?;
                }
                let dest = self.judge(to, true, false)?;
                match (source.real, dest.real) {
                    (Resolved::Found(_, Node::Dir), _) => Expect::Fails("a directory".into()),
                    (Resolved::Found(_, node), Resolved::Missing(new, false)) => {
                        Expect::Ok(Output::Any, Effect::Link(new, node))
                    }
                    (source, dest) => Expect::Fails(format!("cannot link {source:?} to {dest:?}")),
                }
            }
            Rendered::Symlink(target, at) => {
                let Some((base, rest)) = self
                    .policy
                    .preopens
                    .iter()
                    .filter(|p| at.starts_with(&format!("{}/", p.name)))
                    .max_by_key(|p| p.name.len())
                    .map(|p| (p, &at[p.name.len() + 1..]))
                else {
                    return Err(Expect::Fails("no preopened directory".into()));
                };
                if rest.starts_with('/') {
                    return Err(Expect::Fails("absolute path in the directory".into()));
                }
                let lexical = normalize(&base.host.join(rest));
                self.policy
                    .allows(&lexical, true)
                    .map_err(|why| Expect::Refused(format!("as written: {why}")))?;
                let link = self
                    .tree
                    .resolve(&base.host, rest, false, false)
                    .map_err(|why| Expect::Fails(why.into()))?;
                self.policy
                    .allows(link.path(), true)
                    .map_err(|why| Expect::Refused(format!("really: {why}")))?;
                // Where the link will point, from where it really is.
                let parent = link.path().parent().unwrap();
                let pointee = normalize(&parent.join(target));
                self.policy
                    .allows(&pointee, false)
                    .map_err(|why| Expect::Refused(format!("points as written: {why}")))?;
                if let Some(lead) = self.tree.lead(parent, target) {
                    self.policy
                        .allows(lead.path(), false)
                        .map_err(|why| Expect::Refused(format!("points really: {why}")))?;
                }
                self.tree
                    .resolve(&base.host, rest, false, true)
                    .map_err(|why| Expect::Fails(format!("cap-std: {why}")))?;
                if !base.writable {
                    return Err(Expect::Fails("read-only preopen".into()));
                }
                if target.starts_with('/') {
                    return Err(Expect::Fails("cap-std: an absolute symlink target".into()));
                }
                match link {
                    Resolved::Missing(path, false) => {
                        Expect::Ok(Output::Any, Effect::Symlink(path, target.clone()))
                    }
                    other => Expect::Fails(format!("exists: {other:?}")),
                }
            }
        })
    }

    fn expect_rename(&self, from: &str, to: &str) -> Result<Expect, Expect> {
        let source = self.judge(from, true, false)?;
        let Resolved::Found(old, node) = source.real else {
            return Ok(Expect::Fails("no such source".into()));
        };
        if node == Node::Dir {
            if let Some(why) = self.carries(&old) {
                return Err(Expect::Refused(why));
            }
            if let Some(preopen) = self
                .policy
                .preopens
                .iter()
                .find(|p| p.host.starts_with(&old))
            {
                return Err(Expect::Refused(format!(
                    "holds the granted {}",
                    preopen.host.display()
                )));
            }
        }
        let dest = self.judge(to, true, false)?;
        if from.ends_with('/') || to.ends_with('/') || from.ends_with('.') || to.ends_with('.') {
            return Ok(Expect::Unsure("a trailing slash or dot".into()));
        }
        if old == source.preopen_base || dest.real.path() == dest.preopen_base {
            return Ok(Expect::Unsure("renames a preopened directory".into()));
        }
        if self
            .policy
            .preopens
            .iter()
            .any(|p| p.host.starts_with(dest.real.path()))
        {
            return Err(Expect::Refused("replaces a granted directory".into()));
        }
        let new = dest.real.path().to_path_buf();
        Ok(match (&node, &dest.real) {
            _ if old == new => Expect::Ok(Output::Any, Effect::None),
            (Node::File { ino, .. }, Resolved::Found(_, Node::File { ino: other, .. }))
                if ino == other =>
            {
                Expect::Ok(Output::Any, Effect::None)
            }
            (Node::Dir, _) if new.starts_with(&old) => Expect::Fails("into itself".into()),
            (Node::Dir, Resolved::Missing(..)) => Expect::Ok(Output::Any, Effect::Rename(old, new)),
            (Node::Dir, Resolved::Found(path, Node::Dir)) => {
                if self
                    .tree
                    .nodes
                    .keys()
                    .any(|p| p.parent() == Some(path.as_path()))
                {
                    Expect::Fails("onto a directory that is not empty".into())
                } else {
                    Expect::Ok(Output::Any, Effect::Rename(old, new))
                }
            }
            (Node::Dir, Resolved::Found(..)) => Expect::Fails("a directory onto a file".into()),
            (_, Resolved::Found(_, Node::Dir)) => Expect::Fails("a file onto a directory".into()),
            _ => Expect::Ok(Output::Any, Effect::Rename(old, new)),
        })
    }

    fn apply(&mut self, effect: Effect) {
        match effect {
            Effect::None => {}
            Effect::Write(path, text) => self.tree.write(&path, &text),
            Effect::Rename(from, to) => self.tree.rename(&from, &to),
            Effect::Link(path, node) => {
                self.tree.nodes.insert(path, node);
            }
            Effect::Symlink(path, target) => {
                self.tree.nodes.insert(path, Node::Link(target));
            }
        }
    }

    // ------------------------------------------------------------ spelling

    fn pick<T: Clone>(items: &[T], index: u8) -> Option<T> {
        (!items.is_empty()).then(|| items[index as usize % items.len()].clone())
    }

    fn spell(&self, spec: &PathSpec) -> String {
        let ws = &self.policy.workspace;
        // Mostly where something can happen: fresh names in writable
        // directories, entries in the workspace.
        let likely = !spec.name.is_multiple_of(4);
        let target = if spec.fresh {
            let mut dirs = self.tree.dirs();
            if likely {
                let writable: Vec<_> = dirs
                    .iter()
                    .filter(|d| self.policy.allows(d, true).is_ok())
                    .cloned()
                    .collect();
                if !writable.is_empty() {
                    dirs = writable;
                }
            }
            let dir = Self::pick(&dirs, spec.pick).unwrap();
            dir.join(FRESH_NAMES[spec.name as usize % FRESH_NAMES.len()])
        } else {
            let mut entries = self.tree.entries();
            if likely {
                entries.retain(|e| e.starts_with(ws) && e != ws);
            }
            Self::pick(&entries, spec.pick).unwrap_or_else(|| ws.clone())
        };
        let rel = relative(ws, &target);
        let absolute = target.to_string_lossy().into_owned();
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| ".".into());
        let link = Self::pick(&self.tree.links(), spec.via);
        match (spec.spelling, link) {
            (Spelling::Relative, _) => rel,
            (Spelling::Absolute, _) => absolute,
            (Spelling::DoubledSlashes, _) => absolute.replace('/', "//"),
            (Spelling::DotSegments, _) => format!("./{}", rel.replace('/', "/./")),
            (Spelling::Detour, _) => {
                let dir = Self::pick(&self.tree.dirs(), spec.via).unwrap();
                let into = relative(ws, &dir);
                let back = relative(&dir, ws);
                format!("{into}/{back}/{rel}")
            }
            (Spelling::TrailingSlash, _) if spec.via.is_multiple_of(2) => format!("{rel}/"),
            (Spelling::TrailingSlash, _) => format!("{rel}/."),
            (Spelling::ClimbBack, _) => format!("../ws/{rel}"),
            (Spelling::ViaLink | Spelling::ViaLinkParent, None) => rel,
            (Spelling::ViaLink, Some(link)) => {
                let through = relative(ws, &link);
                match self
                    .tree
                    .lead(link.parent().unwrap(), &link_target(&self.tree, &link))
                {
                    Some(Resolved::Found(dir, Node::Dir)) if target.starts_with(&dir) => {
                        format!("{through}/{}", relative(&dir, &target))
                    }
                    _ => format!("{through}/{name}"),
                }
            }
            (Spelling::ViaLinkParent, Some(link)) => {
                let through = relative(ws, &link);
                match self
                    .tree
                    .lead(link.parent().unwrap(), &link_target(&self.tree, &link))
                {
                    Some(Resolved::Found(dir, Node::Dir))
                        if target.starts_with(dir.parent().unwrap_or(&dir)) =>
                    {
                        let parent = dir.parent().unwrap_or(&dir);
                        format!("{through}/../{}", relative(parent, &target))
                    }
                    _ => format!("{through}/../{name}"),
                }
            }
        }
    }

    fn spell_target(&self, target: &Target, dir: &Path, own_name: &str) -> String {
        let entries = self.tree.entries();
        match target {
            Target::Relative(i) => relative(dir, &Self::pick(&entries, *i).unwrap()),
            Target::Absolute(i) => Self::pick(&entries, *i)
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            Target::Up(depth) => vec![".."; *depth as usize].join("/"),
            Target::Dot => ".".into(),
            Target::Itself => own_name.into(),
            Target::Dangling(d, n) => {
                let parent = Self::pick(&self.tree.dirs(), *d).unwrap();
                let name = FRESH_NAMES[*n as usize % FRESH_NAMES.len()];
                relative(dir, &parent.join(name))
            }
        }
    }
}

fn link_target(tree: &Tree, link: &Path) -> String {
    match tree.nodes.get(link) {
        Some(Node::Link(target)) => target.clone(),
        _ => ".".into(),
    }
}

/// An operation with its paths spelled out.
#[derive(Debug, Clone)]
enum Rendered {
    Read(String),
    Write(String, String),
    List(String),
    Stat(String),
    Rename(String, String),
    Link(String, String),
    Symlink(String, String),
}

impl Rendered {
    fn call(&self) -> (&'static str, Value) {
        match self {
            Self::Read(path) => ("read", json!({ "path": path })),
            Self::List(path) => ("list", json!({ "path": path })),
            Self::Stat(path) => ("stat", json!({ "path": path })),
            Self::Write(path, content) => ("write", json!({ "path": path, "content": content })),
            Self::Rename(from, to) => ("rename", json!({ "from": from, "to": to })),
            Self::Link(from, to) => ("link", json!({ "from": from, "to": to })),
            Self::Symlink(target, at) => ("symlink", json!({ "from": target, "to": at })),
        }
    }
}

// ---------------------------------------------------------------- one case

/// The real tree of a case, built in a temporary directory.
struct Built {
    _dir: tempfile::TempDir,
    root: PathBuf,
    workspace: PathBuf,
}

fn build(case: &Case, model_policy: impl Fn(&Path) -> Policy) -> (Built, Model) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let workspace = root.join("ws");
    for sub in DIRS.iter().chain(&case.extra_dirs) {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    let mut marker = 0;
    let mut plant = |path: &Path| {
        if std::fs::symlink_metadata(path).is_err() {
            marker += 1;
            std::fs::write(path, format!("marker-{marker:03}-qz")).unwrap();
        }
    };
    for file in FIXED_FILES {
        plant(&root.join(file));
    }
    let dirs = Tree::scan(&root).dirs();
    for (d, n) in &case.files {
        let dir = Model::pick(&dirs, *d).unwrap();
        plant(&dir.join(FILE_NAMES[*n as usize % FILE_NAMES.len()]));
    }
    let policy = model_policy(&workspace);
    let ws_dirs: Vec<PathBuf> = dirs
        .into_iter()
        .filter(|d| d.starts_with(&workspace))
        .collect();
    for (d, n, target) in &case.links {
        let model = Model {
            tree: Tree::scan(&root),
            policy: model_policy(&workspace),
        };
        let dir = Model::pick(&ws_dirs, *d).unwrap();
        let name = LINK_NAMES[*n as usize % LINK_NAMES.len()];
        let path = dir.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        std::os::unix::fs::symlink(model.spell_target(target, &dir, name), &path).unwrap();
    }
    let model = Model {
        tree: Tree::scan(&root),
        policy,
    };
    (
        Built {
            _dir: dir,
            root,
            workspace,
        },
        model,
    )
}

fn profile_toml(case: &Case) -> String {
    let list = |items: &[&str]| {
        items
            .iter()
            .map(|i| format!("{i:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "allow = [\"file:*\"]\nfile.read = [{}]\nfile.write = [{}]\nfile.deny = [{}]\n",
        list(&case.read),
        list(&case.write),
        list(&case.deny)
    )
}

/// The files no tool may ever show: denied or outside the read grants.
fn secret_markers(model: &Model) -> Vec<String> {
    model
        .tree
        .nodes
        .iter()
        .filter_map(|(path, node)| match node {
            Node::File { text, .. } if model.policy.allows(path, false).is_err() => {
                Some(text.clone())
            }
            _ => None,
        })
        .collect()
}

/// The entries no tool may change: outside the write grants, or denied.
fn protected(model: &Model) -> BTreeMap<PathBuf, String> {
    model
        .tree
        .view()
        .into_iter()
        .filter(|(path, _)| model.policy.allows(path, true).is_err())
        .collect()
}

/// What the runs saw, for the summary line.
#[derive(Debug, Default)]
struct Tally {
    cases: u64,
    allowed: u64,
    refused: u64,
    failed: u64,
    unsure: u64,
    /// Why the model expected failures, by the start of the reason.
    reasons: BTreeMap<String, u64>,
}

macro_rules! ensure {
    ($cond:expr, $log:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(TestCaseError::fail(format!(
                "{}\n-- operations so far:\n{}",
                format!($($fmt)+),
                $log.join("\n")
            )));
        }
    };
}

async fn run_case(host: &Host, case: &Case, tally: &Mutex<Tally>) -> Result<(), TestCaseError> {
    let (built, mut model) = build(case, |ws| Policy::new(case, ws));
    let profile = crate::profile(&profile_toml(case), &built.workspace);
    let caller = Caller::new(profile, host.caller().approvals().clone());
    let secrets = secret_markers(&model);
    let before = protected(&model);
    let mut log = vec![format!(
        "profile: {}",
        profile_toml(case).replace('\n', "; ")
    )];
    log.extend(model.tree.view().iter().map(|(p, n)| {
        format!(
            "  {} {n}",
            p.strip_prefix(&built.root).unwrap_or(p).display()
        )
    }));
    for (index, op) in case.ops.iter().enumerate() {
        let rendered = match op {
            Op::Read(p) => Rendered::Read(model.spell(p)),
            Op::Write(p) => Rendered::Write(model.spell(p), format!("written-{index}")),
            Op::List(p) => Rendered::List(model.spell(p)),
            Op::Stat(p) => Rendered::Stat(model.spell(p)),
            Op::Rename(a, b) => Rendered::Rename(model.spell(a), model.spell(b)),
            Op::Link(a, b) => Rendered::Link(model.spell(a), model.spell(b)),
            Op::Symlink(target, at) => {
                let at = model.spell(at);
                let at = if at.starts_with('/') {
                    at
                } else {
                    format!("{}/{at}", built.workspace.display())
                };
                let (dir, name) = match at.rsplit_once('/') {
                    Some((dir, name)) => (PathBuf::from(dir), name.to_owned()),
                    None => (built.workspace.clone(), at.clone()),
                };
                let dir =
                    match model
                        .tree
                        .resolve(Path::new("/"), &dir.to_string_lossy(), true, false)
                    {
                        Ok(Resolved::Found(dir, Node::Dir)) => dir,
                        _ => dir,
                    };
                Rendered::Symlink(model.spell_target(target, &dir, &name), at)
            }
        };
        let expect = model.expect(&rendered);
        let (tool, arguments) = rendered.call();
        let result = host
            .dispatch_as(&caller, CallRequest::new(tool, arguments))
            .await;
        let (ok, text) = match result {
            Ok(raw) => {
                let value: Value = serde_json::from_str(raw.get()).unwrap();
                (value.get("ok").cloned(), raw.get().to_owned())
            }
            Err(error) => (None, error.to_string()),
        };
        log.push(format!(
            "{rendered:?}\n    model: {expect:?}\n    host: {text}"
        ));
        for secret in &secrets {
            ensure!(
                !text.contains(secret.as_str()),
                log,
                "secret {secret} in the output"
            );
        }
        let real = Tree::scan(&built.root);
        let mut tally = tally.lock().unwrap();
        if let Expect::Refused(why) | Expect::Fails(why) | Expect::Unsure(why) = &expect {
            let head: String = why.split(['/', ':']).next().unwrap_or_default().into();
            *tally.reasons.entry(head).or_default() += 1;
        }
        match (&expect, &ok) {
            (Expect::Refused(_), _) => tally.refused += 1,
            (Expect::Unsure(_), _) => tally.unsure += 1,
            (_, None) => tally.failed += 1,
            (_, Some(_)) => tally.allowed += 1,
        }
        match expect {
            Expect::Refused(why) | Expect::Fails(why) if ok.is_some() => {
                ensure!(false, log, "the host did what the model rules out ({why})");
            }
            Expect::Refused(_) | Expect::Fails(_) => {
                ensure!(
                    real.view() == model.tree.view(),
                    log,
                    "a refused operation changed the tree: {}",
                    diff(&model.tree, &real)
                );
            }
            Expect::Unsure(_) => {
                if ok.is_some() {
                    model.tree = real.clone();
                }
            }
            Expect::Ok(..) if ok.is_none() => {
                ensure!(false, log, "the host refused what the model allows");
            }
            Expect::Ok(output, effect) => {
                let ok = ok.unwrap();
                match output {
                    Output::Any => {}
                    Output::Text(text) => {
                        ensure!(ok == json!(text), log, "read {ok}, the model has {text:?}")
                    }
                    Output::Size(size) => {
                        ensure!(ok == json!(size), log, "size {ok}, the model has {size}")
                    }
                    Output::Names(names) => ensure!(
                        ok == json!(names),
                        log,
                        "listed {ok}, the model has {names:?}"
                    ),
                }
                model.apply(effect);
            }
        }
        ensure!(
            real.view() == model.tree.view(),
            log,
            "the tree is not the model's: {}",
            diff(&model.tree, &real)
        );
    }
    let after = protected(&Model {
        tree: Tree::scan(&built.root),
        policy: Policy::new(case, &built.workspace),
    });
    let changed: Vec<_> = before
        .iter()
        .filter(|(path, node)| Tree::scan(&built.root).view().get(*path) != Some(*node))
        .map(|(path, _)| path)
        .chain(after.keys().filter(|path| !before.contains_key(*path)))
        .collect();
    ensure!(
        changed.is_empty(),
        log,
        "protected entries changed: {changed:?}"
    );
    tally.lock().unwrap().cases += 1;
    Ok(())
}

fn diff(model: &Tree, real: &Tree) -> String {
    let (model, real) = (model.view(), real.view());
    let keys: BTreeSet<_> = model.keys().chain(real.keys()).collect();
    keys.into_iter()
        .filter(|k| model.get(*k) != real.get(*k))
        .map(|k| {
            format!(
                "\n  {}: model {:?}, real {:?}",
                k.display(),
                model.get(k),
                real.get(k)
            )
        })
        .collect()
}

#[test]
fn file_rules_hold_on_random_trees_profiles_and_operations() {
    let mut config = Config {
        failure_persistence: None,
        max_shrink_iters: 400,
        ..Config::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = CI_CASES;
    }
    if config.rng_seed == RngSeed::Random {
        config.rng_seed = RngSeed::Fixed(CI_SEED);
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let host = runtime.block_on(async {
        Host::builder()
            .plugin_file(toolhost_tests::FILES)
            .build()
            .await
            .unwrap()
    });
    let tally = Mutex::new(Tally::default());
    let started = std::time::Instant::now();
    let mut runner = TestRunner::new(config);
    let result = runner.run(&case(), |case| {
        runtime.block_on(run_case(&host, &case, &tally))
    });
    eprintln!(
        "paths_model: {:?} in {:.1?}",
        tally.lock().unwrap(),
        started.elapsed()
    );
    if let Err(error) = result {
        panic!("{error}");
    }
}
