#!/usr/bin/env python3
"""Writes the tree that `search_files` is measured and checked on against
ripgrep, the same bytes on every run.

    python3 scripts/search-tree.py ROOT

ROOT (created; must not exist or be empty) gets:
- `tree/`: 10,000 regular files in nested directories (`pkgNN/modNN/partN`):
  9,540 small text files (100 B to 4 KB of source-like lines; one in fifty
  holds a line with `needle`), and among the rest:
  - ignored: `.gitignore` excludes `build/` (100 files) and `*.log` (100
    files); a nested `.gitignore` excludes `generated/` (40 files) and a
    `.ignore` excludes `*.tmp` (20 files);
  - hidden: `.cache/` (60 files) and a `.notes.txt` in 40 directories;
  - binary: 60 files with NUL bytes near their start (and `needle`);
  - denied by the profile below: `.env`, `.env.local`, `secrets/` (20
    files), `certs/server.pem`, `keys/api.key` and a `.git/` directory;
  - symbolic links, to a text file and into `secrets/` (never followed);
  every one of these holds `needle` too, so skipping it shows.
- `toolhost.toml`: a default profile that may read `tree` and denies what
  the default configuration denies plus `tree/secrets/**`.
- `expected-needle`: what a search of `tree` for `needle` finds by these
  rules (hidden and ignored files left out), as `tree/PATH:LINE:TEXT`
  lines, sorted.
- `rg-flags`: ripgrep's flags for the same rules, one per line, for a
  search of `tree` run in ROOT (its `-g` globs are relative to the current
  directory).

Nothing in the tree holds `zebrafish`: the benchmark's word that is not there.
"""

import os
import random
import sys

SEED = 33
NEEDLE_EVERY = 50
WORDS = (
    "let value result index count buffer parse render config state handle "
    "request response item entry node tree path name size offset line token "
    "error ok some none match return self struct impl fn pub use mod async "
    "await loop while for in if else break continue true false"
).split()

CONFIG = """\
# The profile search_files runs under on this tree (scripts/search-tree.py).
default_profile = "default"

[profiles.default]
allow = ["file:read"]
deny = ["file:write", "network:*", "terminal:*", "env:*"]
file.read = ["tree"]
file.deny = [
    "**/.env", "**/.env.*", "**/.git/**", "**/.ssh/**",
    "**/*.pem", "**/*.key", "**/id_rsa*", "**/id_ed25519*",
    "tree/secrets/**",
]
"""

# ripgrep flags that give search_files' rules: .gitignore and .ignore honoured
# outside a git repository too, no global excludes, no .rgignore, hidden
# files skipped, symlinks not followed (rg's defaults), and the profile's
# denied paths left out.
RG_FLAGS = [
    "--no-require-git",
    "--no-ignore-global",
    "--no-config",
    "-g",
    "!.env",
    "-g",
    "!.env.*",
    "-g",
    "!.git/",
    "-g",
    "!.ssh/",
    "-g",
    "!*.pem",
    "-g",
    "!*.key",
    "-g",
    "!id_rsa*",
    "-g",
    "!id_ed25519*",
    "-g",
    "!/tree/secrets/",
]


NEEDLE_LINE = "    // the needle is here"


def text(rng, needle):
    """Source-like lines, 100 B to 4 KB; a `needle` line if asked."""
    lines = []
    size = rng.randint(100, 4000)
    total = 0
    while total < size:
        words = rng.choices(WORDS, k=rng.randint(2, 12))
        line = "    " * rng.randint(0, 3) + " ".join(words) + ";"
        lines.append(line)
        total += len(line) + 1
    if needle:
        lines.insert(rng.randrange(len(lines) + 1), NEEDLE_LINE)
    return "\n".join(lines) + "\n"


def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = "wb" if isinstance(content, bytes) else "w"
    with open(path, mode) as out:
        out.write(content)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: search-tree.py ROOT")
    root = sys.argv[1]
    if os.path.exists(root) and os.listdir(root):
        sys.exit(f"search-tree.py: {root} is not empty; give a new directory")
    rng = random.Random(SEED)
    tree = os.path.join(root, "tree")
    count = 0
    # What a default search for `needle` finds: `tree/PATH:LINE:TEXT`.
    expected = []

    def put(relative, content, searched=False):
        nonlocal count
        write(os.path.join(tree, relative), content)
        count += 1
        if searched:
            for number, line in enumerate(content.split("\n"), 1):
                if "needle" in line:
                    expected.append(f"tree/{relative}:{number}:{line}")

    dirs = [
        f"pkg{p:02}/mod{m:02}/part{d}"
        for p in range(20)
        for m in range(6)
        for d in range(4)
    ]
    # The text files, spread over 480 leaf directories and their parents.
    plain = 9540
    for i in range(plain):
        where = dirs[i % len(dirs)]
        if i % 7 == 0:
            where = os.path.dirname(where)
        ext = ["rs", "py", "md", "txt", "toml"][i % 5]
        put(f"{where}/file{i:05}.{ext}", text(rng, i % NEEDLE_EVERY == 3), searched=True)

    # Ignored by ignore files.
    write(os.path.join(tree, ".gitignore"), "build/\n*.log\n")
    write(os.path.join(tree, "pkg05/.gitignore"), "generated/\n")
    write(os.path.join(tree, "pkg07/mod01/.ignore"), "*.tmp\n")
    for i in range(100):
        put(f"build/out{i // 25}/artifact{i:03}.txt", text(rng, True))
    for i in range(100):
        put(f"{dirs[(i * 13) % len(dirs)]}/run{i:03}.log", text(rng, True))
    for i in range(40):
        put(f"pkg05/generated/gen{i:03}.rs", text(rng, True))
    for i in range(20):
        put(f"pkg07/mod01/part{i % 4}/scratch{i:02}.tmp", text(rng, True))

    # Hidden.
    for i in range(60):
        put(f".cache/c{i // 20}/entry{i:03}.txt", text(rng, True))
    for i in range(40):
        put(f"{dirs[(i * 11) % len(dirs)]}/.notes.txt", text(rng, True))

    # Binary: a NUL in the first bytes, then text with the needle.
    for i in range(60):
        head = bytes(rng.randrange(256) for _ in range(64)) + b"\0\0\0\0"
        put(f"{dirs[(i * 7) % len(dirs)]}/blob{i:02}.bin", head + text(rng, True).encode())

    # Denied by the profile.
    put(".env", "TOKEN=needle-in-env\n")
    put("pkg02/.env.local", "TOKEN=needle-in-env-local\n")
    for i in range(20):
        put(f"secrets/s{i // 10}/secret{i:02}.txt", text(rng, True))
    put("certs/server.pem", "-----BEGIN CERTIFICATE----- needle\n")
    put("keys/api.key", "needle key\n")
    for i in range(16):
        put(f".git/objects/o{i:02}", text(rng, True))

    # Links, never followed: to a text file, into secrets/, to a directory.
    os.symlink("file00003.rs", os.path.join(tree, "pkg00/mod00/link-to-file.rs"))
    os.symlink("../secrets/s0/secret00.txt", os.path.join(tree, "pkg00/link-to-secret.txt"))
    os.symlink("../pkg04", os.path.join(tree, "pkg03/link-to-dir"))

    assert count == 10_000, count
    write(os.path.join(root, "toolhost.toml"), CONFIG)
    write(os.path.join(root, "rg-flags"), "\n".join(RG_FLAGS) + "\n")
    write(os.path.join(root, "expected-needle"), "".join(f"{m}\n" for m in sorted(expected)))
    print(f"{tree}: {count} files")


if __name__ == "__main__":
    main()
