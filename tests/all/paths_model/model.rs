//! What the model expects of each operation, and how it follows those that
//! succeed.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolhost::policy::normalize;

use super::policy::Policy;
use super::tree::{Node, Resolved, Tree};

/// What the model expects of one operation.
#[derive(Debug)]
pub(super) enum Expect {
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
pub(super) enum Output {
    Any,
    Text(String),
    Names(Vec<String>),
    Size(u64),
}

#[derive(Debug)]
pub(super) enum Effect {
    None,
    Write(PathBuf, String),
    Rename(PathBuf, PathBuf),
    Link(PathBuf, Node),
    Symlink(PathBuf, String),
}

/// Why the model leaves an operation on what a denied name reaches unsure
/// (the file tools refuse it when they open it: reads and writes).
const REACHED: &str = "reached by a denied name";

/// A read or write opens its path: what a denied name reaches is refused.
fn opened(expect: Expect) -> Expect {
    match expect {
        Expect::Unsure(why) if why.starts_with(REACHED) => Expect::Refused(why),
        other => other,
    }
}

/// A path judged for an operation: where it is opened, and where the kernel
/// really goes.
struct Judged {
    real: Resolved,
    preopen_base: PathBuf,
}

pub(super) struct Model {
    pub(super) tree: Tree,
    pub(super) policy: Policy,
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
        if self.reached(&real) {
            return Err(Expect::Unsure(format!(
                "{REACHED}: {}",
                real.path().display()
            )));
        }
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

    /// What a name `file.deny` matches reaches under other names, as the
    /// file tools find it: in the write grants, through directories that are
    /// not links, what a denied link leads to, and files of more than one
    /// name that are denied or lie in a denied directory. Dirs by path,
    /// files by inode.
    fn reached_set(&self) -> (Vec<PathBuf>, Vec<u64>) {
        let (mut dirs, mut inodes) = (Vec::new(), Vec::new());
        let names_of = |ino: u64| {
            self.tree
                .nodes
                .values()
                .filter(|node| matches!(node, Node::File { ino: other, .. } if *other == ino))
                .count()
        };
        let writable: Vec<&PathBuf> = self
            .policy
            .grants
            .iter()
            .filter(|(_, write)| *write)
            .map(|(dir, _)| dir)
            .collect();
        let mut stack: Vec<(PathBuf, bool)> = writable
            .iter()
            .filter(|dir| !writable.iter().any(|o| o != *dir && dir.starts_with(o)))
            .map(|dir| ((*dir).clone(), false))
            .collect();
        while let Some((dir, inside_denied)) = stack.pop() {
            for (path, node) in &self.tree.nodes {
                if path.parent() != Some(dir.as_path()) {
                    continue;
                }
                let denied = inside_denied || self.policy.denied(path);
                match node {
                    Node::Dir => stack.push((path.clone(), denied)),
                    Node::Link(target) if denied => match self.tree.lead(&dir, target) {
                        Some(Resolved::Found(to, Node::Dir)) => dirs.push(to),
                        Some(Resolved::Found(_, Node::File { ino, .. })) => inodes.push(ino),
                        _ => {}
                    },
                    Node::File { ino, .. } if denied && names_of(*ino) > 1 => inodes.push(*ino),
                    _ => {}
                }
            }
        }
        (dirs, inodes)
    }

    /// Whether `real`, or a directory it lies in, is reached by a denied
    /// name (see [`Self::reached_set`]).
    fn reached(&self, real: &Resolved) -> bool {
        let (dirs, inodes) = self.reached_set();
        if dirs.is_empty() && inodes.is_empty() {
            return false;
        }
        let itself = match real {
            Resolved::Found(path, Node::Dir) => dirs.contains(path),
            Resolved::Found(_, Node::File { ino, .. }) => inodes.contains(ino),
            _ => false,
        };
        itself
            || real
                .path()
                .ancestors()
                .skip(1)
                .any(|dir| dirs.iter().any(|d| d == dir))
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

    pub(super) fn expect(&self, op: &Rendered) -> Expect {
        match self.expect_inner(op) {
            Ok(expect) | Err(expect) => expect,
        }
    }

    fn expect_inner(&self, op: &Rendered) -> Result<Expect, Expect> {
        Ok(match op {
            Rendered::Read(path) => match self.judge(path, false, true).map_err(opened)?.real {
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
            Rendered::Write(path, text) => match self.judge(path, true, true).map_err(opened)?.real
            {
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

    pub(super) fn apply(&mut self, effect: Effect) {
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
}

/// An operation with its paths spelled out.
#[derive(Debug, Clone)]
pub(super) enum Rendered {
    Read(String),
    Write(String, String),
    List(String),
    Stat(String),
    Rename(String, String),
    Link(String, String),
    Symlink(String, String),
}

impl Rendered {
    pub(super) fn call(&self) -> (&'static str, Value) {
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
