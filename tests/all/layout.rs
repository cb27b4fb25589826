//! The layout of `host/src`: no file, and no top-level module, imports one
//! that imports it back, directly or around a circle, so the modules read as
//! floors; `Host` is implemented under `host/` only; no file is longer than
//! 600 lines; the README's module map names every top-level module; a
//! capability's folder imports another's only when its `section.rs` names it
//! in `NEEDS`, and its rules name no wasmtime.
//!
//! A file's imports are the paths it names (`crate::a::b`, `super::x`,
//! `self::y`, a child module `z::`), each taken to the file of its longest
//! module prefix, or, when that module only re-exports the name, to the file
//! the re-export comes from. Re-exports themselves (`pub use`), `mod`
//! declarations and unit tests do not count: a facade that declares and
//! re-exports its children is not a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`["runtime", "plugin", "load"]`) → its re-exports (`pub
/// use` statements) and its source without tests, comments, re-exports and
/// `mod` lines.
type Modules = BTreeMap<Vec<String>, (String, String)>;

fn modules(root: &Path) -> Modules {
    let mut found = Modules::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative: PathBuf = path.strip_prefix(root).unwrap().with_extension("");
            // The binary's root is another crate (and would take lib.rs's place).
            if relative == Path::new("main") {
                continue;
            }
            let mut parts: Vec<String> = relative
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            let is_dir = matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            );
            if is_dir {
                parts.pop();
            }
            if parts.last().is_some_and(|p| p == "tests") {
                continue;
            }
            let source = std::fs::read_to_string(&path).unwrap();
            found.insert(parts, (reexports(&source), strip(&source)));
        }
    }
    found
}

/// The source without its inline unit tests, comments, re-exports and
/// `mod` declarations.
fn strip(source: &str) -> String {
    let source = source
        .find("#[cfg(test)]\nmod tests {")
        .map_or(source, |at| &source[..at]);
    source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .filter(|line| {
            let line = line.trim_start();
            let after_vis = ["pub(crate) ", "pub(super) ", "pub "]
                .iter()
                .find_map(|vis| line.strip_prefix(vis))
                .unwrap_or(line);
            let reexport = line.len() != after_vis.len() && after_vis.starts_with("use ");
            !reexport && !after_vis.starts_with("mod ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `pub use` statements of `source`, as `use` bodies joined by `;`.
fn reexports(source: &str) -> String {
    let code: Vec<&str> = source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect();
    let code = code.join("\n");
    let mut found = String::new();
    for vis in ["pub(crate) use ", "pub(super) use ", "pub use "] {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(vis) {
            let body = &rest[at + vis.len()..];
            let end = body.find(';').unwrap_or(body.len());
            found.push_str(&body[..end]);
            found.push(';');
            rest = &body[end..];
        }
    }
    found
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The module paths `source` names, absolute.
fn named_paths(module: &[String], source: &str, children: &[String]) -> Vec<Vec<String>> {
    let chars: Vec<char> = source.chars().collect();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_ident(chars[i]) || (i > 0 && (is_ident(chars[i - 1]) || chars[i - 1] == ':')) {
            i += 1;
            continue;
        }
        // A path starting here: ident(::ident)* and maybe ::{group}.
        let mut segments = Vec::new();
        let mut j = i;
        loop {
            let start = j;
            while j < chars.len() && is_ident(chars[j]) {
                j += 1;
            }
            segments.push(chars[start..j].iter().collect::<String>());
            if chars.get(j..j + 2) == Some(&[':', ':'])
                && chars.get(j + 2).is_some_and(|&c| is_ident(c))
            {
                j += 2;
            } else {
                break;
            }
        }
        let group = if chars.get(j..j + 3) == Some(&[':', ':', '{']) {
            let end = chars[j..]
                .iter()
                .position(|&c| c == ';')
                .map_or(chars.len(), |p| j + p);
            Some(chars[j + 3..end].iter().collect::<String>())
        } else {
            None
        };
        i = j.max(i + 1);
        if segments.len() == 1 && group.is_none() {
            continue;
        }
        let head = segments[0].as_str();
        let base: Vec<String> = match head {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                segments.drain(..ups - 1);
                module[..module.len().saturating_sub(ups)].to_vec()
            }
            child if children.iter().any(|c| c == child) => {
                let mut base = module.to_vec();
                base.push(child.to_string());
                base
            }
            _ => continue,
        };
        let mut path = base;
        path.extend(segments[1..].iter().cloned());
        match group {
            Some(group) => {
                for item in group.split(',') {
                    let item = item.split(" as ").next().unwrap_or("").trim();
                    let item: Vec<String> = item
                        .split("::")
                        .map(|s| s.trim_matches(|c: char| !is_ident(c)).to_string())
                        .filter(|s| !s.is_empty())
                        .collect();
                    if item.first().is_some_and(|s| s != "self") {
                        let mut full = path.clone();
                        full.extend(item);
                        paths.push(full);
                    }
                }
            }
            None => paths.push(path),
        }
    }
    paths
}

/// Every file's imports, as module paths of files.
fn imports(modules: &Modules) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut edges = BTreeMap::new();
    for (module, (_, source)) in modules {
        let children: Vec<String> = modules
            .keys()
            .filter(|other| other.len() == module.len() + 1 && other.starts_with(module))
            .map(|other| other.last().unwrap().clone())
            .collect();
        let mut targets = BTreeSet::new();
        for path in named_paths(module, source, &children) {
            if let Some(file) = file_of(modules, &path, 0)
                && &file != module
                && !file.is_empty()
            {
                targets.insert(file);
            }
        }
        edges.insert(module.clone(), targets);
    }
    edges
}

/// The file that defines what `path` names: the file of its longest module
/// prefix (the crate root's re-exports included), or, when that module only
/// re-exports the name, the file the re-export comes from.
fn file_of(modules: &Modules, path: &[String], depth: usize) -> Option<Vec<String>> {
    let file = (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| modules.contains_key(prefix))?;
    let Some(name) = path.get(file.len()) else {
        return Some(file);
    };
    if depth > 8 {
        return Some(file);
    }
    let children: Vec<String> = modules
        .keys()
        .filter(|other| other.len() == file.len() + 1 && other.starts_with(&file))
        .map(|other| other.last().unwrap().clone())
        .collect();
    let reexported = named_paths(&file, &format!("use {};", modules[&file].0), &children)
        .into_iter()
        .find(|source| source.last() == Some(name) || source.last().is_some_and(|s| s == "*"));
    match reexported {
        Some(source) if source.last() == Some(name) => file_of(modules, &source, depth + 1),
        _ => Some(file),
    }
}

/// The groups of files that import each other around circles (strongly
/// connected components of more than one file), each sorted.
fn circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> BTreeSet<Vec<String>> {
    // Files reachable from each file, then groups of mutual reach.
    let reach = |from: &Vec<String>| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(node) = stack.pop() {
            for next in edges.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<_, _> = edges
        .keys()
        .map(|node| (node.clone(), reach(node)))
        .collect();
    let mut groups = BTreeSet::new();
    for (node, seen) in &reaches {
        let group: Vec<String> = seen
            .iter()
            .filter(|other| reaches[*other].contains(node))
            .map(|m| m.join("/"))
            .collect();
        if group.len() > 1 {
            groups.insert(group);
        }
    }
    groups
}

fn host_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/src")
}

#[test]
fn no_file_of_the_host_imports_one_that_imports_it_back() {
    let edges = imports(&modules(&host_src()));
    // The analysis sees the imports it should.
    let plugin_call = ["runtime", "plugin", "call"].map(String::from).to_vec();
    let instance = ["runtime", "instance"].map(String::from).to_vec();
    assert!(
        edges[&plugin_call].contains(&instance),
        "{:?}",
        edges[&plugin_call]
    );
    let found = circles(&edges);
    assert!(found.is_empty(), "import circles between files: {found:#?}");
}

#[test]
fn a_circle_between_files_is_found() {
    let mut modules = Modules::new();
    let file = |source: &str| (reexports(source), strip(source));
    modules.insert(vec!["a".into()], file("use crate::b::Thing;\n"));
    modules.insert(
        vec!["b".into()],
        file("fn f() -> super::c::X { todo!() }\n"),
    );
    modules.insert(vec!["c".into()], file("use crate::{a::Other, d};\n"));
    modules.insert(
        vec!["d".into()],
        file("// crate::a::X in a comment\npub use crate::a::Y;\n"),
    );
    // Through a facade's re-export: e → f (which re-exports g's item) is e → g.
    modules.insert(vec!["e".into()], file("use crate::f::Item;\n"));
    modules.insert(
        vec!["f".into()],
        file("mod g;\npub use g::{Item, Other};\n"),
    );
    modules.insert(vec!["f".into(), "g".into()], file("pub struct Item;\n"));
    let edges = imports(&modules);
    let found = circles(&edges);
    let abc = ["a", "b", "c"].map(String::from).to_vec();
    assert_eq!(found, BTreeSet::from([abc]), "{edges:?}");
    assert!(edges[&vec!["d".to_string()]].is_empty(), "{edges:?}");
    let e = &edges[&vec!["e".to_string()]];
    assert_eq!(e, &BTreeSet::from([vec!["f".to_string(), "g".to_string()]]));
}

/// The most lines a file of `host/src` has.
const MAX_LINES: usize = 600;

/// Groups of top-level modules that import each other around circles.
fn module_circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> BTreeSet<Vec<String>> {
    let mut top: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (from, targets) in edges {
        let Some(from) = from.first() else { continue };
        let entry = top.entry(vec![from.clone()]).or_default();
        for to in targets {
            if let Some(to) = to.first()
                && to != from
            {
                entry.insert(vec![to.clone()]);
            }
        }
    }
    circles(&top)
}

#[test]
fn no_top_level_module_imports_one_that_imports_it_back() {
    let found = module_circles(&imports(&modules(&host_src())));
    assert!(
        found.is_empty(),
        "import circles between top-level modules: {found:#?}"
    );
}

#[test]
fn a_circle_between_modules_is_found_and_one_between_their_files_is_not_needed() {
    // a/x → b/y and b/z → a/w: no file circle, one module circle.
    let mut modules = Modules::new();
    let file = |source: &str| (reexports(source), strip(source));
    let path = |p: &str| p.split('/').map(String::from).collect::<Vec<_>>();
    modules.insert(path("a/x"), file("use crate::b::y::Y;\n"));
    modules.insert(path("b/y"), file("pub struct Y;\n"));
    modules.insert(path("b/z"), file("use crate::a::w::W;\n"));
    modules.insert(path("a/w"), file("pub struct W;\n"));
    // And through the crate root's re-export (lib.rs, the empty path).
    modules.insert(Vec::new(), file("mod c;\npub use c::C;\n"));
    modules.insert(path("c"), file("pub struct C;\n"));
    modules.insert(path("d"), file("fn f() -> crate::C { todo!() }\n"));
    let edges = imports(&modules);
    assert!(circles(&edges).is_empty(), "{edges:?}");
    let found = module_circles(&edges);
    assert_eq!(
        found,
        BTreeSet::from([vec!["a".to_string(), "b".to_string()]])
    );
    assert_eq!(edges[&path("d")], BTreeSet::from([path("c")]), "{edges:?}");
}

#[test]
fn no_file_is_longer_than_600_lines() {
    let root = host_src();
    let mut long = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                if lines > MAX_LINES {
                    let relative = path.strip_prefix(&root).unwrap();
                    long.push(relative.to_string_lossy().replace('\\', "/"));
                }
            }
        }
    }
    long.sort();
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}

/// The top-level modules lib.rs declares.
fn top_level_modules() -> Vec<String> {
    let lib = std::fs::read_to_string(host_src().join("lib.rs")).unwrap();
    lib.lines()
        .map(|line| line.split("//").next().unwrap_or("").trim())
        .filter_map(|line| {
            let line = ["pub(crate) ", "pub "]
                .iter()
                .find_map(|vis| line.strip_prefix(vis))
                .unwrap_or(line);
            line.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(String::from)
        })
        .collect()
}

#[test]
fn the_readme_module_map_names_every_top_level_module() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let start = readme
        .find("## How it fits together")
        .expect("the README's module map");
    let map = &readme[start..];
    let map = &map[..map[3..].find("\n## ").map_or(map.len(), |end| end + 3)];
    let missing: Vec<String> = top_level_modules()
        .into_iter()
        .filter(|m| !map.contains(&format!("`{m}`")) && !map.contains(&format!("`{m}/")))
        .collect();
    assert!(
        missing.is_empty(),
        "the README's module map does not name {missing:?}"
    );
}

#[test]
fn host_is_implemented_in_one_home() {
    let mut elsewhere = Vec::new();
    for (module, (_, source)) in modules(&host_src()) {
        let home = module.first().is_some_and(|m| m == "host");
        if !home
            && source
                .lines()
                .any(|line| line.trim_start().starts_with("impl Host {"))
        {
            elsewhere.push(module.join("/"));
        }
    }
    assert!(
        elsewhere.is_empty(),
        "`impl Host` outside host/: {elsewhere:?}"
    );
}

/// The capability folders under `capability/`, each with the capabilities
/// it declares it depends on (`const NEEDS` of its `Section` impl).
fn capabilities() -> BTreeMap<String, Vec<String>> {
    let root = host_src().join("capability");
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(&root).unwrap().flatten() {
        if !entry.path().is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let section = std::fs::read_to_string(entry.path().join("section.rs")).unwrap_or_default();
        let needs = section
            .find("const NEEDS")
            .map(|at| {
                let list = &section[at..];
                let list = &list[list.find("= &[").unwrap() + 4..list.find("];").unwrap()];
                list.split(',')
                    .map(|n| n.trim().trim_matches('"').to_string())
                    .filter(|n| !n.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        found.insert(name, needs);
    }
    found
}

/// What breaks the capabilities' boundaries in `modules`, whose capability
/// folders and their `NEEDS` are `capabilities`: a file of a folder that
/// imports another folder's not named in its `NEEDS`, and a file of
/// `rules` or `section.rs` that names wasmtime.
fn boundary_breaks(modules: &Modules, capabilities: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let edges = imports(modules);
    let folder = |module: &[String]| match module {
        [top, name, ..] if top == "capability" && capabilities.contains_key(name) => {
            Some(name.clone())
        }
        _ => None,
    };
    let mut wrong = Vec::new();
    for (module, targets) in &edges {
        let Some(from) = folder(module) else { continue };
        let rules = matches!(module.get(2).map(String::as_str), Some("rules" | "section"));
        let names_wasmtime = modules[module]
            .1
            .split(|c: char| !is_ident(c))
            .any(|w| w == "wasmtime" || w == "wasmtime_wasi");
        if rules && names_wasmtime {
            wrong.push(format!("{}: rules name wasmtime", module.join("/")));
        }
        for target in targets {
            if let Some(to) = folder(target)
                && to != from
                && !capabilities[&from].contains(&to)
            {
                wrong.push(format!(
                    "{} imports {} without NEEDS",
                    module.join("/"),
                    target.join("/")
                ));
            }
        }
    }
    wrong
}

#[test]
fn a_capability_imports_another_only_through_a_declared_dependency() {
    let capabilities = capabilities();
    for (name, needs) in &capabilities {
        for need in needs {
            assert!(
                capabilities.contains_key(need),
                "{name} needs {need:?}, which is no capability"
            );
        }
    }
    let wrong = boundary_breaks(&modules(&host_src()), &capabilities);
    assert_eq!(wrong, KNOWN_BOUNDARY_BREAKS, "{wrong:#?}");
}

/// Imports across capability folders not (yet) declared, each to be
/// removed, never added to.
const KNOWN_BOUNDARY_BREAKS: &[&str] = &[];

#[test]
fn a_capability_breaking_its_boundaries_is_found() {
    let mut modules = Modules::new();
    let file = |source: &str| (reexports(source), strip(source));
    let path = |parts: &[&str]| parts.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    // a's rules name wasmtime and import b, which a does not need; c needs
    // b and imports it; b's imports name wasmtime, as imports do.
    modules.insert(
        path(&["capability", "a", "rules"]),
        file("use wasmtime::component::Linker;\nuse crate::capability::b::rules::Thing;\n"),
    );
    modules.insert(
        path(&["capability", "a", "section"]),
        file("pub struct A;\n"),
    );
    modules.insert(
        path(&["capability", "b", "rules"]),
        file("pub struct Thing;\n"),
    );
    modules.insert(
        path(&["capability", "b", "imports"]),
        file("use wasmtime::component::Linker;\n"),
    );
    modules.insert(
        path(&["capability", "c", "section"]),
        file("use crate::capability::b::rules::Thing;\n"),
    );
    let capabilities = BTreeMap::from([
        ("a".to_string(), vec![]),
        ("b".to_string(), vec![]),
        ("c".to_string(), vec!["b".to_string()]),
    ]);
    assert_eq!(
        boundary_breaks(&modules, &capabilities),
        [
            "capability/a/rules: rules name wasmtime",
            "capability/a/rules imports capability/b/rules without NEEDS",
        ]
    );
}

#[test]
fn the_capabilities_have_distinct_names_and_the_permissions_the_docs_list() {
    let runtime = toolhost::runtime::Runtime::shared().unwrap();
    let infos: Vec<_> = runtime.capability_infos().collect();
    let mut names: Vec<_> = infos.iter().map(|c| c.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), infos.len(), "{names:?}");
    let permissions: Vec<&str> = infos
        .iter()
        .flat_map(|c| c.permissions)
        .map(|p| p.as_str())
        .collect();
    // In the list's order (the TOML's): file, network, terminal, env.
    assert_eq!(
        permissions,
        [
            "file:read",
            "file:write",
            "network:fetch",
            "terminal:execute",
            "env:read"
        ]
    );
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/config.md"))
            .unwrap();
    for info in &infos {
        for permission in info.permissions {
            assert!(
                docs.contains(permission.as_str()),
                "docs/config.md does not name {permission}"
            );
        }
        if let Some(section) = info.section {
            assert!(
                docs.contains(&format!("### `{section}`"))
                    || docs.contains(&format!("`{section}`")),
                "docs/config.md does not describe the {section} section"
            );
        }
    }
}

#[test]
fn nothing_outside_the_test_capability_names_it_but_its_list_entry_and_mod_line() {
    let root = host_src();
    let mut named = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let relative = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if path.is_dir() {
                if relative != "capability/tally" {
                    stack.push(path);
                }
                continue;
            }
            let source = std::fs::read_to_string(&path).unwrap_or_default();
            for line in source.lines() {
                let mut words = line.split(|c: char| !is_ident(c));
                if words.any(|w| w.eq_ignore_ascii_case("tally")) {
                    named.push(format!("{relative}: {}", line.trim()));
                }
            }
        }
    }
    named.sort();
    // Its entry in the list, and its `mod` line beside the other folders'
    // (rustfmt formats no module declared inside a macro, so the list does
    // not declare the folders).
    assert_eq!(
        named,
        [
            "capability/list.rs: tally: crate::capability::tally::Tally [],",
            "capability/mod.rs: pub mod tally;",
        ]
    );
}
