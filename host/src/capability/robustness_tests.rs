//! Every parser and check in the policy must return, never panic, on any
//! input: tricky fragments, hostile nesting and repetition, deterministic fuzz.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use super::file::rules::{self as paths, PathRules};
use super::network::{HostPattern, HostRules};
use super::terminal::rules::{commands, dangerous};
use super::terminal::{CommandPattern, CommandRefusal, CommandRules};
use crate::policy::{Access, PermissionPattern, PermissionRules};

/// Fragments that have tripped up shell, glob and host parsers.
#[rustfmt::skip]
const TRICKY: &[&str] = &[
    "", " ", "\n", "\r\n\t", "\\", "'", "\"", "`", "$", "$(", "$((", "((", "))", "$[", "${",
    "$'", "$'\\", "$'\\x", "$'\\u{", "$'\\777", "<(", ">(", "<<", "<<-", "<<<", "<<EOF",
    "<<'EOF", "<<\\", "&", "&&", "|", "||", ";", ";;", "(", ")", "{", "}", "#", "!", "[", "]",
    "*", "**", "/", "//", "..", "/..", "~", "~/", "$HOME", "${HOME", "'unbalanced",
    "\"unbalanced", "echo \"$(", "echo `", "a $(b \"c)", "((1<<2", "f(){", "function",
    "function f", ":(){ :|:& };:", "rm -", "rm --", "kill -", "kill -s", "git -C", "git",
    "find -exec", "chmod", "chmod -R", "dd of=", "tee", "sed -i", "systemctl", "env -S",
    "sudo -u", "timeout", "xargs -n", "{,}", "{a,}", "delete from", "drop", "truncate",
    "where", "[::1", "]:", ":", "::", ":::", "1.2.3.4:", "*.", "*.*", "a..b", "0.0.0.0/", "/99",
    "fe80::1%eth0", "[fe80::1%eth0]:80", "xn--", "-", "ünïcödé ✓ 日本語", "rm -rf /日本",
    "echo \u{0}\u{1}\u{7f}", "\u{feff}ls", "l\u{200b}s",
];

fn tricky_inputs() -> Vec<String> {
    let mut inputs: Vec<String> = TRICKY.iter().map(|s| s.to_string()).collect();
    let repeated: [(&str, usize); 17] = [
        ("$(", 5000),
        ("\"$(", 2000),
        ("`", 3001),
        ("((", 3000),
        ("${", 3000),
        ("<<E\n", 500),
        ("f(){ ", 2000),
        ("delete from ", 2000),
        ("eval ", 200),
        ("eval $(", 2000),
        ("bash -c \"$(eval ", 1000),
        ("sh|", 5000),
        ("rm -rf / ; ", 2000),
        ("a", 100_000),
        ("é", 10_000),
        ("x=$((1<<2)) ", 1000),
        ("echo rm -rf /|sh|", 1000),
    ];
    inputs.extend(repeated.iter().map(|(unit, count)| unit.repeat(*count)));
    inputs
}

/// A tiny deterministic generator (xorshift), so failures reproduce exactly.
fn fuzz_inputs(count: usize) -> Vec<String> {
    const ALPHABET: &[&str] = &[
        "a",
        "rm",
        " ",
        "-rf",
        "/",
        "'",
        "\"",
        "`",
        "$",
        "(",
        ")",
        "{",
        "}",
        "[",
        "]",
        "\\",
        ";",
        "&",
        "|",
        "<",
        ">",
        "<<",
        "\n",
        "#",
        "=",
        "*",
        "~",
        ":",
        ".",
        "é",
        "sh -c ",
        "EOF",
        "$(",
        "${",
        "$'",
        "sudo ",
        "curl x",
        "DROP TABLE",
        "where",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..count)
        .map(|_| {
            let len = next() % 40;
            (0..len)
                .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                .collect()
        })
        .collect()
}

fn exercise(input: &str, command_rules: &CommandRules, host_rules: &HostRules) {
    let _ = commands::split_commands(input);
    let _ = command_rules.check(input);
    let _ = CommandPattern::parse(input);
    let _ = dangerous::detect(input);
    let _ = PermissionPattern::parse(input);
    let _ = PermissionRules::parse(&[input], &[input], &[input]);
    let _ = HostPattern::parse(input);
    let _ = host_rules.check_host(input, 443);
    let _ = host_rules.check_address(input, 80, IpAddr::V4(Ipv4Addr::LOCALHOST));
    let _ = paths::normalize(Path::new(input));
    if let Ok(rules) = PathRules::new([input], [input], [input]) {
        let _ = rules.check(Path::new(input), Access::Read);
        let _ = rules.is_denied(Path::new(input));
    }
}

#[test]
fn no_input_makes_any_check_panic() {
    let command_rules = CommandRules::parse(&["git *", "ls*"], &["rm -rf /*"]).unwrap();
    let host_rules = HostRules::parse(&["*.example.com", "10.0.0.0/8"]).unwrap();
    for input in tricky_inputs().iter().chain(&fuzz_inputs(3000)) {
        exercise(input, &command_rules, &host_rules);
    }
}

#[test]
fn hostile_nesting_is_refused_rather_than_ignored() {
    let rules = CommandRules::parse(&["echo *"], &[]).unwrap();
    let hidden = "echo \"$(".repeat(100) + "rm -rf /";
    assert_eq!(rules.check(&hidden), Err(CommandRefusal::TooComplex));
    assert!(!dangerous::detect(&hidden).is_empty());
    let evals = "eval $(".repeat(2000) + "rm -rf /";
    assert!(!dangerous::detect(&evals).is_empty());
}
