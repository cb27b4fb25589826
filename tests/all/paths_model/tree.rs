//! The model's tree: entries, and paths resolved as the kernel resolves them.

use std::collections::{BTreeMap, VecDeque};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Node {
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
pub(super) struct Tree {
    pub(super) root: PathBuf,
    pub(super) nodes: BTreeMap<PathBuf, Node>,
    pub(super) next_ino: u64,
}

/// A path resolved as the kernel would resolve it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Resolved {
    /// An existing entry (a symlink only when the last one is not followed).
    Found(PathBuf, Node),
    /// An absent last component in an existing directory; `dir` if the path
    /// asked for a directory (trailing slash, `.`).
    Missing(PathBuf, bool),
}

impl Resolved {
    pub(super) fn path(&self) -> &Path {
        match self {
            Self::Found(path, _) | Self::Missing(path, _) => path,
        }
    }
}

impl Tree {
    /// Reads the real tree under `root`.
    pub(super) fn scan(root: &Path) -> Self {
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
    pub(super) fn view(&self) -> BTreeMap<PathBuf, String> {
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

    pub(super) fn dirs(&self) -> Vec<PathBuf> {
        self.nodes
            .iter()
            .filter(|(_, node)| **node == Node::Dir)
            .map(|(path, _)| path.clone())
            .collect()
    }

    pub(super) fn entries(&self) -> Vec<PathBuf> {
        self.nodes.keys().cloned().collect()
    }

    pub(super) fn links(&self) -> Vec<PathBuf> {
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
    pub(super) fn resolve(
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
    pub(super) fn lead(&self, dir: &Path, target: &str) -> Option<Resolved> {
        let (base, rest) = match target.strip_prefix('/') {
            Some(rest) => (Path::new("/"), rest),
            None => (dir, target),
        };
        self.resolve(base, rest, true, false).ok()
    }

    pub(super) fn write(&mut self, path: &Path, text: &str) {
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

    pub(super) fn rename(&mut self, from: &Path, to: &Path) {
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
pub(super) fn relative(from: &Path, to: &Path) -> String {
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
