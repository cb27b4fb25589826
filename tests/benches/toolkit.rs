//! Bundled toolkit figures, through `Host::call` with a fresh instance per
//! call: `search_files` over a tree of 10,000 files (content pattern, and
//! names by glob), and `read_file` windows of a 100 MB file (start, middle,
//! end by line offset, and by byte offset as base64).
//!
//! Run: `cargo bench -p toolhost-tests --bench toolkit`. Prints the median
//! of several runs of each.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost::Host;
use toolhost::config::{Config, ConfigSource};

/// Directories × files in each of the search tree.
const DIRS: usize = 100;
const FILES_PER_DIR: usize = 100;
/// Lines of the large file; each is 50 bytes, so 100 MB in all.
const BIG_LINES: usize = 2_000_000;
const RUNS: usize = 7;

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// 10,000 source-like files of 40 lines (about 1.6 KB each); one file in a
/// hundred has a line with `needle`.
fn make_tree(root: &Path) {
    for d in 0..DIRS {
        let dir = root.join(format!("tree/dir{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            let mut text = String::new();
            for line in 0..40 {
                if f == 7 && line == 20 {
                    text.push_str("    let needle = find(haystack); // the one\n");
                } else {
                    text.push_str(&format!(
                        "    let value_{line} = compute({d}, {f}, {line});\n"
                    ));
                }
            }
            let ext = if f % 2 == 0 { "rs" } else { "txt" };
            std::fs::write(dir.join(format!("file{f:03}.{ext}")), text).unwrap();
        }
    }
}

/// A 100 MB text file of numbered 50-byte lines.
fn make_big_file(path: &Path) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..BIG_LINES {
        // 49 characters and a newline.
        let line = format!("line {i:>10} of the large file");
        writeln!(out, "{line:<49}").unwrap();
    }
    out.flush().unwrap();
}

async fn timed(host: &Host, tool: &str, arguments: Value) -> (Duration, Value) {
    let started = Instant::now();
    let result = host
        .call(tool, arguments.clone())
        .await
        .unwrap_or_else(|e| panic!("{tool} {arguments}: {e}"));
    let took = started.elapsed();
    (took, serde_json::from_str(result.get()).unwrap())
}

/// Runs a call `RUNS` times (after one warm-up), checks the result of the
/// last, and prints the median.
async fn measure(host: &Host, label: &str, tool: &str, arguments: Value, check: fn(&Value)) {
    timed(host, tool, arguments.clone()).await;
    let mut samples = Vec::new();
    let mut last = Value::Null;
    for _ in 0..RUNS {
        let (took, result) = timed(host, tool, arguments.clone()).await;
        samples.push(took);
        last = result;
    }
    check(&last);
    println!("  {label:<44} median {}", ms(median(&mut samples)));
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let started = Instant::now();
    make_tree(&root);
    make_big_file(&root.join("big.txt"));
    println!(
        "fixtures: {} files, a {} MB file ({:.1} s to write)",
        DIRS * FILES_PER_DIR,
        std::fs::metadata(root.join("big.txt")).unwrap().len() / 1_000_000,
        started.elapsed().as_secs_f64()
    );

    let config = Config::parse(
        "default_profile = \"p\"\n[profiles.p]\nallow = [\"file:read\"]\nfile.read = [\".\"]\n",
        ConfigSource::Embedded,
        &root,
    )
    .unwrap();
    let host = Host::builder()
        .bundled(true)
        .profile(config.profile("p", None).unwrap())
        .build()
        .await
        .unwrap();

    println!("search_files over 10,000 files ({RUNS} runs each):");
    measure(
        &host,
        "pattern `needle`, every file (100 matches)",
        "search_files",
        json!({"pattern": "needle", "path": "tree", "max_results": 1000}),
        |r| {
            assert_eq!(r["count"], 100, "{r}");
            assert_eq!(r["files_searched"], 10_000);
            assert_eq!(r["truncated"], false);
        },
    )
    .await;
    measure(
        &host,
        "regex `compute\\(42, 5\\d, 3\\d\\)` in *.rs (50 matches)",
        "search_files",
        json!({"pattern": "compute\\(42, 5\\d, 3\\d\\)", "glob": "*.rs", "path": "tree", "max_results": 1000}),
        |r| {
            assert_eq!(r["count"], 50, "{r}");
            assert_eq!(r["files_searched"], 5_000);
        },
    )
    .await;
    measure(
        &host,
        "names only, glob `*.rs` (cap 1000)",
        "search_files",
        json!({"glob": "*.rs", "path": "tree", "max_results": 1000}),
        |r| assert_eq!(r["count"], 1000, "{r}"),
    )
    .await;
    measure(
        &host,
        "names only, glob `dir099/file09?.txt`",
        "search_files",
        json!({"glob": "dir099/file09?.txt", "path": "tree"}),
        |r| assert_eq!(r["count"], 5, "{r}"),
    )
    .await;

    println!("read_file of a 100 MB file, 2,000,000 lines ({RUNS} runs each):");
    for (label, offset) in [
        ("offset 1, limit 100", 1),
        ("offset 1,000,000, limit 100", 1_000_000),
        ("offset 1,999,901, limit 100 (the end)", 1_999_901),
    ] {
        measure(
            &host,
            label,
            "read_file",
            json!({"path": "big.txt", "offset": offset, "limit": 100}),
            |r| assert_eq!(r["content"].as_str().unwrap().lines().count(), 100, "{r}"),
        )
        .await;
    }
    measure(
        &host,
        "offset 1, default limit (2000 lines)",
        "read_file",
        json!({"path": "big.txt"}),
        |r| assert_eq!(r["end_line"], 2000, "{r}"),
    )
    .await;
    measure(
        &host,
        "base64, byte offset 99,000,000, 64 KiB",
        "read_file",
        json!({"path": "big.txt", "encoding": "base64", "offset": 99_000_000, "max_bytes": 65536}),
        |r| assert_eq!(r["bytes"], 65536, "{r}"),
    )
    .await;
}
