//! Paths and symlink targets spelled out in the many ways a case asks for.

use std::path::Path;

use super::FRESH_NAMES;
use super::inputs::{PathSpec, Spelling, Target};
use super::model::Model;
use super::tree::{Node, Resolved, Tree, relative};

impl Model {
    pub(super) fn pick<T: Clone>(items: &[T], index: u8) -> Option<T> {
        (!items.is_empty()).then(|| items[index as usize % items.len()].clone())
    }

    pub(super) fn spell(&self, spec: &PathSpec) -> String {
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

    pub(super) fn spell_target(&self, target: &Target, dir: &Path, own_name: &str) -> String {
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
