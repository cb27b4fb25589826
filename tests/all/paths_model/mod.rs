//! Property tests of the file rules. Random trees (directories, files, and
//! symlinks inside, outside, to ancestors, dangling, in chains), random
//! profiles (`file.read`, `file.write`, `file.deny`) and random sequences of
//! reads, writes, listings, stats, renames, hard links and symlinks, with
//! paths spelled in many ways, go through a real host and the `files` test
//! guest. A model of the intended policy judges every operation on the path
//! the kernel would use (symlinks resolved component by component on the
//! model's own tree, which follows the operations that succeed):
//!
//! - the model refuses ⇒ the host must fail, and change nothing;
//! - the model allows ⇒ the host must succeed, with the model's output and
//!   effect (the one corner the model leaves open, a rename spelled with a
//!   trailing slash or dot, is counted as `unsure`);
//! - after each operation the real tree equals the model's;
//! - no output ever holds the marker of a file that is denied or outside the
//!   grants, and nothing outside the write grants, or denied, ever changes.
//!
//! Relative paths start in the workspace whether or not the profile grants
//! it: the workspace itself may then be read as a directory, and its listing
//! shows only what may be read.
//!
//! CI runs [`CI_CASES`] cases from [`CI_SEED`]. A longer run (see
//! docs/config.md): `PROPTEST_CASES=5000 PROPTEST_RNG_SEED=7 cargo test -p
//! toolhost-tests --test all paths_model`.

mod inputs;
mod model;
mod policy;
mod run;
mod spelling;
mod tree;

use std::sync::Mutex;

use proptest::test_runner::{Config, RngSeed, TestRunner};
use toolhost::Host;

use self::inputs::case;
use self::run::{Tally, run_case};

/// Cases a CI run tries, and the seed it starts from.
const CI_CASES: u32 = 400;
const CI_SEED: u64 = 14;

/// Directories every tree has (relative to its root; `ws` is the workspace).
const DIRS: &[&str] = &[
    "ws",
    "ws/a",
    "ws/a/b",
    "ws/out",
    "ws/secrets",
    "ws/cfg",
    "outside",
];
/// Directories some trees have.
const EXTRA_DIRS: &[&str] = &[
    "ws/cfg/secrets",
    "ws/out/deep",
    "ws/a/.env",
    "ws/secrets/sub",
    "ws/a/b/c",
];
/// Files every tree has.
const FIXED_FILES: &[&str] = &[
    "top.txt",
    "outside/o.txt",
    "ws/notes.txt",
    "ws/.env",
    "ws/secrets/key.txt",
];
const FILE_NAMES: &[&str] = &["f.txt", "g.txt", ".env", "x.key", "k.pem"];
const LINK_NAMES: &[&str] = &["l1", "l2", "l3", "s.key", ".env"];
/// Names that do not exist yet: where writes, renames and links create.
const FRESH_NAMES: &[&str] = &["new.txt", ".env", "n.key", "m.pem", "d"];
const READ_GRANTS: &[&str] = &[".", "a", "a/b", "out", "cfg"];
const WRITE_GRANTS: &[&str] = &["out", "a/b", "cfg", "."];
const DENY_GLOBS: &[&str] = &[
    "secrets/**",
    "**/.env",
    "*.key",
    "**/*.pem",
    "cfg/secrets/**",
    "a/b/*.txt",
];

#[test]
fn file_rules_hold_on_random_trees_profiles_and_operations() {
    let mut config = Config {
        failure_persistence: None,
        max_shrink_iters: 400,
        ..Config::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = CI_CASES;
    }
    if config.rng_seed == RngSeed::Random {
        config.rng_seed = RngSeed::Fixed(CI_SEED);
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let host = runtime.block_on(async {
        Host::builder()
            .plugin_file(toolhost_tests::FILES)
            .build()
            .await
            .unwrap()
    });
    let tally = Mutex::new(Tally::default());
    let started = std::time::Instant::now();
    let mut runner = TestRunner::new(config);
    let result = runner.run(&case(), |case| {
        runtime.block_on(run_case(&host, &case, &tally))
    });
    eprintln!(
        "paths_model: {:?} in {:.1?}",
        tally.lock().unwrap(),
        started.elapsed()
    );
    if let Err(error) = result {
        panic!("{error}");
    }
}
