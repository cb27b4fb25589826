//! The documentation's examples are tests: every console block of README.md,
//! docs/config.md and the scaffolds' READMEs runs against the built binary,
//! and its output must be the one shown (`run`: how; `blocks`: reading the
//! Markdown and its `<!-- test: ... -->` directives).

mod blocks;
mod run;

pub(crate) use run::cache_dir;

use std::path::PathBuf;

fn document(name: &str) -> (PathBuf, String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name);
    let path = path.canonicalize().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

#[test]
fn the_readme_shows_what_the_commands_print() {
    let (path, text) = document("README.md");
    run::Run::new().document(&path, &text);
}

#[test]
fn the_config_reference_shows_what_the_commands_print() {
    let (path, text) = document("docs/config.md");
    run::Run::new().document(&path, &text);
}

/// The README of a project `toolhost new` makes, run in the project: it
/// builds the component, checks it and calls its tool. The build reuses a
/// warm target directory (Rust) or the componentize-py of
/// `target/python-venv` (Python, as `.ci/run` installs it).
fn scaffold_readme(lang: toolhost::scaffold::Lang) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let parent = tempfile::tempdir().unwrap();
    let dir = toolhost::scaffold::create("demo", lang, parent.path()).unwrap();
    let dir = dir.canonicalize().unwrap();
    let (warm, link) = match lang {
        toolhost::scaffold::Lang::Rust => ("target/scaffold-test", "target"),
        toolhost::scaffold::Lang::Python => ("target/python-venv", ".venv"),
    };
    let warm = root.join(warm);
    std::fs::create_dir_all(&warm).unwrap();
    std::os::unix::fs::symlink(warm.canonicalize().unwrap(), dir.join(link)).unwrap();
    let path = dir.join("README.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut run = run::Run::in_dir(dir);
    run.timeout = std::time::Duration::from_secs(900);
    run.document(&path, &text);
}

#[test]
fn a_new_rust_plugins_readme_shows_what_the_commands_print() {
    scaffold_readme(toolhost::scaffold::Lang::Rust);
}

#[test]
fn a_new_python_plugins_readme_shows_what_the_commands_print() {
    scaffold_readme(toolhost::scaffold::Lang::Python);
}
