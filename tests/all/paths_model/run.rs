//! One case: its real tree built, each operation run through the host and
//! judged by the model.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};
use toolhost::{CallRequest, Caller, Host};

use super::inputs::{Case, Op};
use super::model::{Expect, Model, Output, Rendered};
use super::policy::Policy;
use super::tree::{Node, Resolved, Tree};
use super::{DIRS, FILE_NAMES, FIXED_FILES, LINK_NAMES};

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
pub(super) struct Tally {
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

pub(super) async fn run_case(
    host: &Host,
    case: &Case,
    tally: &Mutex<Tally>,
) -> Result<(), TestCaseError> {
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
