//! Unit tests of `capability/terminal/rules/commands`.

use super::*;

fn rules(allow: &[&str], deny: &[&str]) -> CommandRules {
    CommandRules::parse(allow, deny).expect("valid test patterns")
}

fn pattern(text: &str) -> CommandPattern {
    CommandPattern::parse(text).expect("valid test pattern")
}

#[test]
fn split_commands_is_the_public_splitter() {
    assert_eq!(
        split_commands("cd /w && cargo build 2>&1 | tail -n 5; echo $(date)"),
        [
            "cd /w",
            "cargo build 2>&1",
            "tail -n 5",
            "date",
            "echo $(date)"
        ]
    );
    assert_eq!(split_commands("echo 'a; b'"), ["echo 'a; b'"]);
    assert!(split_commands("   ").is_empty());
}

#[test]
fn patterns_glob_over_one_simple_command() {
    assert!(pattern("rm -rf /*").matches("rm -rf /"));
    assert!(pattern("rm -rf /*").matches("rm -rf /home/user"));
    assert!(pattern("rm -rf /*").matches("rm   -rf   /"));
    assert!(!pattern("rm -rf /*").matches("rm -rf ./build"));
    assert!(pattern("git push *").matches("git push origin main"));
    assert!(!pattern("git push *").matches("git pull"));
    assert!(pattern("*").matches("anything"));
}

#[test]
fn quoting_does_not_change_what_matches() {
    assert!(pattern("rm -rf /*").matches("rm -rf '/'"));
    assert!(pattern("rm -rf /*").matches("r\"m\" -r\\f /"));
    assert!(pattern("echo \"a b\"").matches("echo 'a b'"));
    assert!(pattern("ls > *").matches("ls >out.txt"));
}

#[test]
fn deny_patterns_see_through_wrappers() {
    let deny = pattern("rm -rf /*");
    for command in [
        "sudo /bin/rm -rf /",
        "sudo -u root rm -rf /",
        "env FOO=1 rm -rf /",
        "FOO=1 BAR=2 /usr/bin/rm -rf /",
        "command rm -rf /",
        "exec rm -rf /",
        "nohup rm -rf /",
        "time rm -rf /",
        "RM -rf /",
        "\\rm -rf /",
    ] {
        assert!(deny.matches(command), "{command}");
    }
    assert!(pattern("sudo *").matches("sudo ls"));
}

#[test]
fn deny_refusal_names_command_and_pattern() {
    let rules = rules(&[], &["rm -rf /*"]);
    let refusal = rules.check("cd /tmp && sudo /bin/rm -rf /").unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "command \"sudo /bin/rm -rf /\" matches terminal.deny_commands pattern \"rm -rf /*\"; \
             remove or narrow that pattern to allow it"
    );
    assert_eq!(rules.check("rm -rf ./build"), Ok(()));
    assert_eq!(rules.check("ls -la"), Ok(()));
}

#[test]
fn deny_applies_to_every_simple_command_and_substitution() {
    let rules = rules(&[], &["rm -rf /*"]);
    for line in [
        "ls; rm -rf /",
        "ls && rm -rf /",
        "false || rm -rf /",
        "ls | rm -rf /",
        "ls & rm -rf /",
        "ls\nrm -rf /",
        "echo $(rm -rf /)",
        "echo `rm -rf /`",
        "echo \"$(rm -rf /)\"",
        "cat <(rm -rf /)",
        "if true; then rm -rf /; fi",
        "( rm -rf / )",
    ] {
        assert!(
            matches!(rules.check(line), Err(CommandRefusal::Denied { .. })),
            "{line}"
        );
    }
}

#[test]
fn deny_follows_command_strings_handed_to_a_shell() {
    let rules = rules(&[], &["rm -rf /*"]);
    for line in [
        "bash -c 'rm -rf /'",
        "sh -c \"ls; rm -rf /\"",
        "sudo bash -lc 'rm -rf /'",
        "eval rm -rf /",
        "eval 'rm -rf /'",
        "bash <<EOF\nrm -rf /\nEOF",
        "sh <<< 'rm -rf /'",
        "su -c 'rm -rf /' root",
        "bash -c \"bash -c 'rm -rf /'\"",
    ] {
        assert!(
            matches!(rules.check(line), Err(CommandRefusal::Denied { .. })),
            "{line}"
        );
    }
    assert_eq!(rules.check("cat <<EOF\nrm -rf /\nEOF"), Ok(()));
    for line in [
        "find / -exec rm -rf / \\;",
        "find . -execdir sh -c 'rm -rf /' \\;",
        "ls | xargs rm -rf /",
    ] {
        assert!(
            matches!(rules.check(line), Err(CommandRefusal::Denied { .. })),
            "{line}"
        );
    }
}

#[test]
fn allow_list_requires_every_simple_command_to_match() {
    let rules = rules(&["git *", "ls*", "cargo *"], &[]);
    assert_eq!(rules.check("git status"), Ok(()));
    assert_eq!(
        rules.check("ls -la && git diff | cargo fmt --check"),
        Ok(())
    );
    let refusal = rules.check("git status; curl https://x").unwrap_err();
    assert_eq!(
        refusal,
        CommandRefusal::NotAllowed {
            command: "curl https://x".into()
        }
    );
    assert_eq!(
        refusal.to_string(),
        "command \"curl https://x\" is not matched by any terminal.allow_commands pattern; \
             add one such as \"curl *\" to allow it"
    );
    assert!(rules.check("git log $(whoami)").is_err());
}

#[test]
fn allow_patterns_do_not_see_through_wrappers() {
    let rules = rules(&["git *"], &[]);
    assert!(rules.check("sudo git push").is_err());
    assert!(rules.check("PATH=/tmp git status").is_err());
    assert!(rules.check("./git status").is_err());
}

#[test]
fn empty_allow_list_allows_everything_not_denied() {
    let rules = rules(&[], &["shutdown*"]);
    assert_eq!(rules.check("anything --goes"), Ok(()));
    assert!(rules.check("shutdown -h now").is_err());
    assert_eq!(CommandRules::default().check("rm -rf /"), Ok(()));
    assert_eq!(CommandRules::default().check(""), Ok(()));
}

#[test]
fn deny_wins_over_allow() {
    let rules = rules(&["*"], &["git push *--force*"]);
    assert_eq!(rules.check("git push origin main"), Ok(()));
    assert!(matches!(
        rules.check("git push origin main --force"),
        Err(CommandRefusal::Denied { .. })
    ));
}

#[test]
fn what_cannot_be_judged_is_not_allowed_by_a_wildcard() {
    let rules = rules(
        &["echo *", "* --version", "python3 *", "awk *", "perl -e *"],
        &[],
    );
    assert!(rules.check("X=echo; $X hi").is_err());
    for line in [
        "$X --version",
        "$(echo echo) --version",
        "${CMD:-git} --version",
        "python3 -c 'import os; os.system(\"id\")'",
        "awk 'BEGIN{system(\"id\")}'",
    ] {
        match rules.check(line) {
            Err(CommandRefusal::Unjudgeable { .. }) => {}
            other => panic!("{line}: {other:?}"),
        }
    }
    let refusal = rules.check("python3 -c 'print(1)'").unwrap_err();
    assert!(refusal.to_string().contains("python3 -c *"), "{refusal}");
    // Named by its option, inline code is allowed; plain use is too.
    assert_eq!(rules.check("perl -e 'print 1'"), Ok(()));
    assert_eq!(rules.check("python3 script.py"), Ok(()));
    assert_eq!(rules.check("awk '{print $1}' data.txt"), Ok(()));
    assert_eq!(rules.check("echo $HOME"), Ok(()));
}

#[test]
fn overly_nested_lines_are_refused() {
    let rules = rules(&["echo *"], &[]);
    let deep = "echo \"$(".repeat(30) + "rm -rf /" + &")\"".repeat(30);
    assert_eq!(rules.check(&deep), Err(CommandRefusal::TooComplex));
    let deny = self::rules(&[], &["rm *"]);
    let evals = "eval ".repeat(12) + "ls";
    assert_eq!(deny.check(&evals), Err(CommandRefusal::TooComplex));
    assert_eq!(deny.check("eval eval ls"), Ok(()));
}

#[test]
fn pattern_errors_name_the_pattern() {
    let error = CommandPattern::parse("curl * | sh").unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("terminal command pattern \"curl * | sh\" spans several commands")
    );
    assert!(
        CommandPattern::parse("  ")
            .unwrap_err()
            .problem
            .contains("empty")
    );
    assert!(CommandPattern::parse("a; b").is_err());
    assert!(CommandPattern::parse("echo $(id)").is_err());
    assert_eq!(pattern(" rm -rf /* ").as_str(), "rm -rf /*");
    assert!("git *".parse::<CommandPattern>().is_ok());
}
