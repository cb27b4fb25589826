//! What `check` and `doctor` say of toolhost's own paths: each path, what
//! it is, and how tools and commands are kept from it; which profiles may
//! write the plugin directory; what the sandbox cannot mask.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt as _;

use crate::config::Config;
use crate::policy::Protection;

/// The report of `config`'s own paths, escaped for a terminal: the paths
/// come from the disk, where a command may have named them.
pub(super) fn report(config: &Config) -> String {
    let own = config.own_paths();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "toolhost's own paths (out of every grant, whatever the profiles say)"
    );
    for path in own.iter() {
        let how = match path.protection {
            Protection::Hidden => "hidden   ",
            Protection::ReadOnly => "read-only",
        };
        let _ = writeln!(
            out,
            "   {how}  {}  {} ({})",
            path.path.display(),
            path.what,
            path.key
        );
        if path.real != path.path {
            let _ = writeln!(out, "              really {}", path.real.display());
        }
        let _ = writeln!(out, "              {}", path.described());
        if path.writable_when_granted {
            let writers: Vec<&str> = config
                .profiles
                .keys()
                .filter(|name| {
                    config.profile(name, None).is_ok_and(|profile| {
                        !profile.file.own().iter().any(|kept| kept.path == path.path)
                    })
                })
                .map(String::as_str)
                .collect();
            if !writers.is_empty() {
                let _ = writeln!(
                    out,
                    "              ! writable by profile{} {}: file.write names it",
                    if writers.len() == 1 { "" } else { "s" },
                    writers.join(", ")
                );
            }
        }
        match std::fs::metadata(&path.real) {
            Ok(meta) if meta.is_file() && meta.nlink() > 1 => {
                let _ = writeln!(
                    out,
                    "              ! has {} hard links: the terminal sandbox masks this name only; \
                     remove the other names",
                    meta.nlink()
                );
            }
            Err(_) if path.placeholder.is_some() => {
                let _ = writeln!(
                    out,
                    "              - does not exist: tools may not create it; a command's sandbox \
                     inside a writable grant makes it first, to protect it"
                );
            }
            Err(_) => {
                let _ = writeln!(
                    out,
                    "              - does not exist: tools may not create it; inside a writable \
                     grant a command that makes it is ended and what it made removed"
                );
            }
            _ => {}
        }
    }
    crate::escape::escape_lines(&out)
}
