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
