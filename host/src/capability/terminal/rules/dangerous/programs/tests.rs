//! Unit tests of `capability/terminal/rules/dangerous/programs`.

use super::*;

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The categories of what the program rules (these and
/// [`super::tools`]') find in `line`'s first simple command.
pub(in crate::capability::terminal::rules::dangerous) fn categories(
    line: &str,
) -> Vec<DangerCategory> {
    let invocation = shell::invocation(&shell::words(&shell::tokenize(line))).expect("a program");
    dangers(&invocation)
        .into_iter()
        .map(|f| f.category)
        .collect()
}

/// Checks a table of rules: each line is flagged in its category, and its
/// near miss is not flagged at all.
pub(in crate::capability::terminal::rules::dangerous) fn assert_rules(
    cases: &[(&str, DangerCategory, &str)],
) {
    for (line, category, near_miss) in cases {
        let found = categories(line);
        assert!(
            found.contains(category),
            "{line}: {category} not in {found:?}"
        );
        let found = categories(near_miss);
        assert!(found.is_empty(), "{near_miss}: {found:?}");
    }
}

#[test]
fn flags_are_found_in_clusters_and_long_forms() {
    let args = strings(&["-xdf", "--dry-run=no", "--", "-n"]);
    assert!(has_flag(&args, 'f', &[]));
    assert!(has_flag(&args, 'x', &[]));
    assert!(has_flag(&args, 'z', &["--dry-run"]));
    assert!(!has_flag(&args, 'n', &[]), "nothing after -- is an option");
    assert!(!has_flag(&strings(&["--force"]), 'f', &[]));
}

#[test]
fn operands_skip_options_and_their_values() {
    let args = strings(&["-s", "0", "-v", "a", "--", "-b"]);
    assert_eq!(operands(&args, &["-s"]), ["a", "-b"]);
}

#[test]
fn copy_destination_is_the_last_operand_or_target_directory() {
    assert_eq!(
        copy_destination(&strings(&["-r", "a", "b", "/etc"])),
        Some("/etc")
    );
    assert_eq!(
        copy_destination(&strings(&["-t", "/etc", "a", "b"])),
        Some("/etc")
    );
    assert_eq!(
        copy_destination(&strings(&["--target-directory=/x", "a"])),
        Some("/x")
    );
    assert_eq!(copy_destination(&strings(&["a"])), None);
}

#[test]
fn sed_edits_in_place_only_with_i() {
    assert_eq!(
        sed_in_place_files(&strings(&["-i", "s/a/b/", "f1", "f2"])),
        ["f1", "f2"]
    );
    assert_eq!(
        sed_in_place_files(&strings(&["-i.bak", "-e", "s/a/b/", "f"])),
        ["f"]
    );
    assert_eq!(sed_in_place_files(&strings(&["-Ei", "s/a/b/", "f"])), ["f"]);
    assert!(sed_in_place_files(&strings(&["-n", "s/a/b/p", "f"])).is_empty());
}

#[test]
fn chmod_modes() {
    let cases = [
        ("777", (true, false)),
        ("0777", (true, false)),
        ("2", (true, false)),
        ("644", (false, false)),
        ("4755", (false, true)),
        ("2755", (false, true)),
        ("1777", (true, false)),
        ("o+w", (true, false)),
        ("a+rwx", (true, false)),
        ("go=rw", (true, false)),
        ("u+w,o-w", (false, false)),
        ("o-w", (false, false)),
        ("+w", (false, false)),
        ("u+s", (false, true)),
        ("g+s", (false, true)),
        ("o+s", (false, false)),
        ("88", (false, false)),
    ];
    for (mode, expected) in cases {
        assert_eq!(mode_risks(mode), expected, "{mode}");
    }
}

#[test]
fn kill_targets_every_process_only_with_pid_minus_one() {
    assert!(kills_everything(&strings(&["-9", "-1"])));
    assert!(kills_everything(&strings(&["-1"])));
    assert!(kills_everything(&strings(&["-s", "TERM", "-1"])));
    assert!(kills_everything(&strings(&["--", "-1"])));
    assert!(!kills_everything(&strings(&["-1", "1234"])));
    assert!(!kills_everything(&strings(&["1234"])));
    assert!(!kills_everything(&strings(&["-l"])));
    assert!(!kills_everything(&[]));
}

#[test]
fn rm_spellings() {
    assert_eq!(categories("rm -r x"), [DangerCategory::RecursiveDelete]);
    assert_eq!(
        categories("rm --recursive x"),
        [DangerCategory::RecursiveDelete]
    );
    assert_eq!(categories("rm --force x"), []);
    assert_eq!(categories("rm -- -r"), []);
    assert_eq!(
        categories("unlink /etc/passwd"),
        [DangerCategory::SystemWrite]
    );
}

#[test]
fn programs_that_only_read_are_not_flagged() {
    for line in [
        "systemctl status x",
        "fdisk -l",
        "parted /dev/sda print",
        "sfdisk -l",
        "wipefs /dev/sda",
        "zfs list",
        "git status",
        "git log --force",
    ] {
        assert!(categories(line).is_empty(), "{line}");
    }
}
