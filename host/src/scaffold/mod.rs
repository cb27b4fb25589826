//! `toolhost new`: a plugin project that builds and loads as created, in
//! Rust (on the SDK) or Python (componentize-py).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

/// The language of a new plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust on toolhost-sdk.
    Rust,
    /// Python with componentize-py.
    Python,
}

/// The SDK this binary was built with, for the new project's path dependency.
fn sdk_path() -> PathBuf {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
    std::fs::canonicalize(&sdk).unwrap_or(sdk)
}

/// Creates the project `name` in `parent/name`; returns its directory.
pub fn create(name: &str, lang: Lang, parent: &Path) -> Result<PathBuf> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        || !name.as_bytes()[0].is_ascii_lowercase()
    {
        bail!(
            "plugin name {name:?} is invalid: use lower-case letters, digits, '-' and '_', \
             starting with a letter"
        );
    }
    let dir = parent.join(name);
    if dir.exists() {
        bail!(
            "{} already exists; choose another name or directory",
            dir.display()
        );
    }
    let tool = name.replace('-', "_");
    let files: Vec<(&str, String)> = match lang {
        Lang::Rust => vec![
            ("Cargo.toml", rust_manifest(name)),
            (
                "src/lib.rs",
                include_str!("rust_lib.rs").replace("TOOL", &tool),
            ),
            ("rust-toolchain.toml", RUST_TOOLCHAIN.to_string()),
            (".gitignore", "/target\n".to_string()),
            ("README.md", readme(name, &tool, lang)),
        ],
        Lang::Python => vec![
            (
                "app.py",
                include_str!("python_app.py").replace("TOOL", &tool),
            ),
            (
                "build.sh",
                include_str!("python_build.sh").replace("NAME", name),
            ),
            (
                "wit/plugin.wit",
                include_str!("../../../wit/plugin.wit").to_string(),
            ),
            (".gitignore", "/.venv\n/*.wasm\n/wit_world\n".to_string()),
            ("README.md", readme(name, &tool, lang)),
        ],
    };
    for (file, content) in files {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().expect("a file has a parent"))
            .with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(&path, content).with_context(|| format!("writing {}", path.display()))?;
    }
    #[cfg(unix)]
    if lang == Lang::Python {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join("build.sh");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(dir)
}

const RUST_TOOLCHAIN: &str = "[toolchain]\nchannel = \"stable\"\ntargets = [\"wasm32-wasip2\"]\n";

fn rust_manifest(name: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib"]

[dependencies]
# The SDK from the toolhost source tree this project was created with.
toolhost-sdk = {{ path = {sdk:?} }}
schemars = "1"
serde = {{ version = "1", features = ["derive"] }}
serde_json = "1"

[profile.release]
opt-level = 2
strip = "debuginfo"

# A standalone project, even when created inside another Cargo workspace.
[workspace]
"#,
        sdk = sdk_path().display().to_string()
    )
}

fn readme(name: &str, tool: &str, lang: Lang) -> String {
    let (build, wasm) = match lang {
        Lang::Rust => (
            "cargo build --release --target wasm32-wasip2".to_string(),
            format!("target/wasm32-wasip2/release/{tool}.wasm"),
        ),
        Lang::Python => ("./build.sh".to_string(), format!("{name}.wasm")),
    };
    format!(
        r#"# {name}

A toolhost plugin. Build the component, validate it (world, specs,
schemas), put it in a plugin directory and call its tool:

```console
$ {build}
...
$ toolhost check {wasm}
plugin    {name}
...
✓ ok: 1 tool would load
$ mkdir -p plugins && cp {wasm} plugins/{name}.wasm
$ toolhost --plugins plugins call {tool} '{{"name": "world"}}'
{{
  "greeting": "Hello, world!"
}}
```

Edit the tool, rebuild, copy: a running `toolhost serve`, or
`toolhost --plugins plugins watch`, picks the new version up without a
restart.
"#
    )
}
