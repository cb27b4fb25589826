//! The random inputs of a case: the tree, the profile and the operations.

use proptest::prelude::*;

use super::{DENY_GLOBS, EXTRA_DIRS, READ_GRANTS, WRITE_GRANTS};

/// Where a symlink points, chosen among the entries of the tree.
#[derive(Debug, Clone)]
pub(super) enum Target {
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
pub(super) enum Spelling {
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
pub(super) struct PathSpec {
    /// A name that does not exist yet, in some directory.
    pub(super) fresh: bool,
    pub(super) pick: u8,
    pub(super) name: u8,
    pub(super) spelling: Spelling,
    pub(super) via: u8,
}

#[derive(Debug, Clone)]
pub(super) enum Op {
    Read(PathSpec),
    Write(PathSpec),
    List(PathSpec),
    Stat(PathSpec),
    Rename(PathSpec, PathSpec),
    Link(PathSpec, PathSpec),
    Symlink(Target, PathSpec),
}

#[derive(Debug, Clone)]
pub(super) struct Case {
    pub(super) extra_dirs: Vec<&'static str>,
    pub(super) files: Vec<(u8, u8)>,
    pub(super) links: Vec<(u8, u8, Target)>,
    pub(super) read: Vec<&'static str>,
    pub(super) write: Vec<&'static str>,
    pub(super) deny: Vec<&'static str>,
    pub(super) ops: Vec<Op>,
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

pub(super) fn case() -> impl Strategy<Value = Case> {
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
