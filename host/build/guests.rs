//! Shared by `host/build.rs` and `tests/build.rs`: compiles every guest crate
//! in a directory of the workspace to `wasm32-wasip2` with a nested cargo, in
//! its own target directory (`target/guests`) so it never waits on the outer
//! build's lock and stays warm between builds.

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
fn package_name(manifest: &Path) -> String {
    let text = std::fs::read_to_string(manifest).unwrap();
    text.lines()
        .map(str::trim)
        .find_map(|line| {
            let value = line.strip_prefix("name")?.trim_start().strip_prefix('=')?;
            Some(value.trim().trim_matches('"').to_string())
        })
        .unwrap_or_else(|| panic!("{} has no package name", manifest.display()))
}

/// Builds every crate directly under `dir` (relative to the workspace root).
pub(crate) fn build(dir: &str) -> Vec<Guest> {
    let root = workspace_root();
    let guests_dir = root.join(dir);
    for watched in [dir, "sdk", "wit", "Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    println!("cargo:rerun-if-env-changed=TOOLHOST_GUEST_PROFILE");

    let mut crates: Vec<(String, String)> = std::fs::read_dir(&guests_dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", guests_dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, package_name(&path.join("Cargo.toml")))
        })
        .collect();
    crates.sort();
    if crates.is_empty() {
        return Vec::new();
    }

    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("guests");
    ensure_wasm_target(&target_dir);
    let profile = std::env::var("TOOLHOST_GUEST_PROFILE").unwrap_or_else(|_| "guest".into());
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg(format!("--target={WASM_TARGET}"))
        .arg(format!("--profile={profile}"))
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target_dir);
    for (_, package) in &crates {
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
        panic!("building the guest plugins in {dir}/ failed (see the errors above)");
    }

    let out = target_dir.join(WASM_TARGET).join(&profile);
    crates
        .into_iter()
        .map(|(name, package)| {
            // A library (cdylib) is named with underscores, a binary as is.
            let wasm = [package.replace('-', "_"), package.clone()]
                .iter()
                .map(|stem| out.join(format!("{stem}.wasm")))
                .find(|path| path.is_file())
                .unwrap_or_else(|| panic!("{package} was not built into {}", out.display()));
            // Name the file after the plugin, as an author would deploy it.
            let named = out_dir().join(format!("{name}.wasm"));
            if std::fs::read(&named).ok() != std::fs::read(&wasm).ok() {
                std::fs::copy(&wasm, &named).unwrap();
            }
            let wasm = named;
            Guest {
                name,
                package,
                wasm,
            }
        })
        .collect()
}

/// The wasm target the guests are built for.
const WASM_TARGET: &str = "wasm32-wasip2";

/// Makes sure the toolchain can build for [`WASM_TARGET`]: rustup does not add
/// the targets named in `rust-toolchain.toml` when its automatic installs are
/// off, so a fresh machine would stop here with "can't find crate for `core`".
/// The host's and the tests' build scripts run at once: a lock file in the
/// guests' target directory makes the second one wait for the first install.
fn ensure_wasm_target(target_dir: &Path) {
    let installed = || {
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
        Command::new(rustc)
            .args(["--print", "target-libdir", "--target", WASM_TARGET])
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
    rustup.args(["target", "add", WASM_TARGET]);
    // The toolchain this build runs on (set by rustup's proxies).
    if let Ok(toolchain) = std::env::var("RUSTUP_TOOLCHAIN") {
        rustup.args(["--toolchain", &toolchain]);
    }
    println!("cargo:warning=installing the {WASM_TARGET} target with rustup to build the plugins");
    let added = rustup.status().is_ok_and(|status| status.success());
    if !added || !installed() {
        panic!(
            "the plugins are built for {WASM_TARGET}, which this toolchain lacks, and \
             `rustup target add {WASM_TARGET}` did not add it: run that command, then build again"
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
