//! Shared by `host/build.rs` and `tests/build.rs`: compiles every guest crate
//! in a directory of the workspace to `wasm32-wasip2` with a nested cargo, in
//! its own target directory (`target/guests`) so it never waits on the outer
//! build's lock and stays warm between builds. A crate that asks for
//! `wasm32-unknown-unknown` in `[package.metadata.toolhost]` (it needs
//! nothing of WASI) is built for that, and its module made a component here.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A compiled guest.
pub(crate) struct Guest {
    /// Its directory name, which is also the plugin name.
    pub(crate) name: String,
    /// Its package name.
    #[allow(dead_code)]
    pub(crate) package: String,
    /// The built component.
    pub(crate) wasm: PathBuf,
}

fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    manifest_dir
        .ancestors()
        .find(|dir| dir.join("wit").is_dir() && dir.join("Cargo.lock").exists())
        .or_else(|| manifest_dir.parent())
        .unwrap()
        .to_path_buf()
}

/// The `name = "..."` of a crate's `[package]`.
fn package_name(manifest: &str, path: &Path) -> String {
    manifest
        .lines()
        .map(str::trim)
        .find_map(|line| {
            let value = line.strip_prefix("name")?.trim_start().strip_prefix('=')?;
            Some(value.trim().trim_matches('"').to_string())
        })
        .unwrap_or_else(|| panic!("{} has no package name", path.display()))
}

/// Builds every crate directly under `dir` (relative to the workspace root).
pub(crate) fn build(dir: &str) -> Vec<Guest> {
    let root = workspace_root();
    let guests_dir = root.join(dir);
    for watched in [dir, "sdk", "wit", "Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    println!("cargo:rerun-if-env-changed=TOOLHOST_GUEST_PROFILE");

    let mut crates: Vec<Crate> = std::fs::read_dir(&guests_dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", guests_dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .map(|path| {
            let manifest = std::fs::read_to_string(path.join("Cargo.toml")).unwrap();
            Crate {
                name: path.file_name().unwrap().to_string_lossy().into_owned(),
                package: package_name(&manifest, &path),
                target: toolhost_target(&manifest, &path),
            }
        })
        .collect();
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    if crates.is_empty() {
        return Vec::new();
    }

    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("guests");
    let profile = std::env::var("TOOLHOST_GUEST_PROFILE").unwrap_or_else(|_| "guest".into());
    for target in [WASM_TARGET, LEAN_TARGET] {
        let packages: Vec<&str> = crates
            .iter()
            .filter(|c| c.target == target)
            .map(|c| c.package.as_str())
            .collect();
        if !packages.is_empty() {
            cargo_build(&root, dir, &target_dir, target, &profile, &packages);
        }
    }

    crates
        .into_iter()
        .map(
            |Crate {
                 name,
                 package,
                 target,
             }| {
                let out = target_dir.join(target).join(&profile);
                // A library (cdylib) is named with underscores, a binary as is.
                let wasm = [package.replace('-', "_"), package.clone()]
                    .iter()
                    .map(|stem| out.join(format!("{stem}.wasm")))
                    .find(|path| path.is_file())
                    .unwrap_or_else(|| panic!("{package} was not built into {}", out.display()));
                let mut bytes = std::fs::read(&wasm).unwrap();
                if target == LEAN_TARGET {
                    bytes = componentize(&bytes)
                        .unwrap_or_else(|e| panic!("making {} a component: {e:#}", wasm.display()));
                }
                // Name the file after the plugin, as an author would deploy it.
                let named = out_dir().join(format!("{name}.wasm"));
                if std::fs::read(&named).ok().as_deref() != Some(&bytes[..]) {
                    std::fs::write(&named, &bytes).unwrap();
                }
                Guest {
                    name,
                    package,
                    wasm: named,
                }
            },
        )
        .collect()
}

/// A guest crate to build.
struct Crate {
    name: String,
    package: String,
    target: &'static str,
}

/// Builds `packages` for `target` with a nested cargo.
fn cargo_build(
    root: &Path,
    dir: &str,
    target_dir: &Path,
    target: &str,
    profile: &str,
    packages: &[&str],
) {
    ensure_wasm_target(target_dir, target);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg(format!("--target={target}"))
        .arg(format!("--profile={profile}"))
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target_dir);
    for package in packages {
        command.arg("-p").arg(package);
    }
    // Settings of the outer build that must not leak into the wasm build.
    // With TOOLHOST_LINT_GUESTS set (CI, where clippy's driver builds the
    // workspace), the plugins are built by it too, and so linted.
    let lint = std::env::var_os("TOOLHOST_LINT_GUESTS").is_some();
    println!("cargo:rerun-if-env-changed=TOOLHOST_LINT_GUESTS");
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET"]
        .into_iter()
        .chain((!lint).then_some("RUSTC_WORKSPACE_WRAPPER"))
    {
        command.env_remove(var);
    }
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"));
    if !status.success() {
        panic!("building the guest plugins in {dir}/ for {target} failed (see the errors above)");
    }
}

/// Makes a core module built for [`LEAN_TARGET`] a component, from the
/// component type wit-bindgen embedded in it. It imports nothing of WASI:
/// nothing on that target links any of it in.
fn componentize(core: &[u8]) -> anyhow::Result<Vec<u8>> {
    wit_component::ComponentEncoder::default()
        .module(core)?
        .validate(true)
        .encode()
}

/// The target a guest crate asks for in `[package.metadata.toolhost]`
/// (`target = "..."`), [`WASM_TARGET`] when it names none.
fn toolhost_target(manifest: &str, path: &Path) -> &'static str {
    let mut in_table = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_table = line == "[package.metadata.toolhost]";
            continue;
        }
        let Some(value) = in_table
            .then(|| line.strip_prefix("target")?.trim_start().strip_prefix('='))
            .flatten()
        else {
            continue;
        };
        return match value.trim().trim_matches('"') {
            WASM_TARGET => WASM_TARGET,
            LEAN_TARGET => LEAN_TARGET,
            other => panic!(
                "{}: [package.metadata.toolhost] target = {other:?}: say {WASM_TARGET:?} or \
                 {LEAN_TARGET:?}",
                path.display()
            ),
        };
    }
    WASM_TARGET
}

/// The wasm target the guests are built for.
const WASM_TARGET: &str = "wasm32-wasip2";

/// The target of guests that need nothing of WASI (lean components).
const LEAN_TARGET: &str = "wasm32-unknown-unknown";

/// Makes sure the toolchain can build for `target`: rustup does not add
/// the targets named in `rust-toolchain.toml` when its automatic installs are
/// off, so a fresh machine would stop here with "can't find crate for `core`".
/// The host's and the tests' build scripts run at once: a lock file in the
/// guests' target directory makes the second one wait for the first install.
fn ensure_wasm_target(target_dir: &Path, target: &str) {
    let installed = || {
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
        Command::new(rustc)
            .args(["--print", "target-libdir", "--target", target])
            .output()
            .ok()
            .filter(|out| out.status.success())
            .and_then(|out| std::fs::read_dir(String::from_utf8_lossy(&out.stdout).trim()).ok())
            .is_some_and(|mut entries| {
                entries.any(|entry| {
                    entry.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("libcore-"))
                })
            })
    };
    if installed() {
        return;
    }
    std::fs::create_dir_all(target_dir).unwrap();
    let lock = std::fs::File::create(target_dir.join(".rustup-target.lock")).unwrap();
    lock.lock().unwrap();
    if installed() {
        return;
    }
    let mut rustup = Command::new("rustup");
    rustup.args(["target", "add", target]);
    // The toolchain this build runs on (set by rustup's proxies).
    if let Ok(toolchain) = std::env::var("RUSTUP_TOOLCHAIN") {
        rustup.args(["--toolchain", &toolchain]);
    }
    println!("cargo:warning=installing the {target} target with rustup to build the plugins");
    let added = rustup.status().is_ok_and(|status| status.success());
    if !added || !installed() {
        panic!(
            "the plugins are built for {target}, which this toolchain lacks, and \
             `rustup target add {target}` did not add it: run that command, then build again"
        );
    }
}

fn out_dir() -> PathBuf {
    PathBuf::from(std::env::var("OUT_DIR").unwrap())
}

/// Writes `OUT_DIR/name` if its content changed.
pub(crate) fn write_out(name: &str, code: &str) {
    let path = out_dir().join(name);
    if std::fs::read_to_string(&path).ok().as_deref() != Some(code) {
        std::fs::write(&path, code).unwrap();
    }
}
