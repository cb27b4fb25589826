//! Unit tests of `policy/shell`.

use super::words::scan_group;
use super::*;

fn commands(line: &str) -> Vec<String> {
    parse(line).commands().map(|c| c.text.clone()).collect()
}

#[test]
fn case_patterns_and_here_strings_hide_no_command() {
    let found = commands("echo $(case x in x) rm M;; esac)");
    assert!(found.iter().any(|c| c == "rm M"), "{found:?}");
    let found = commands("cat <<< \"`rm M`\"; echo $(case a in (a) touch N;; esac) x");
    assert!(found.iter().any(|c| c == "rm M"), "{found:?}");
    assert!(found.iter().any(|c| c == "touch N"), "{found:?}");
    let chars: Vec<char> = "(case x in x) y;; esac) tail".chars().collect();
    assert_eq!(skip_group_end(&chars), 23);
}

fn skip_group_end(chars: &[char]) -> usize {
    let mut budget = usize::MAX;
    scan_group(chars, 0, &mut budget).unwrap()
}

#[test]
fn a_hash_starts_a_comment_only_where_bash_starts_one() {
    // Not after characters bash does not split words at, nor after a
    // `)` that belongs to a word or closes nothing.
    for line in [
        "printf SAFE\r#x; reboot",
        "printf SAFE\u{a0}#x; reboot",
        "printf @(SAFE)#x; reboot",
        "values=(SAFE)#x; reboot",
        "[[ a =~ [a)# ]]; reboot",
        "[[ a =~ (a)# ]]; reboot",
        "printf '%s' $(printf '%s' then case x in x)#; reboot",
        "printf '%s' $\\\n'\\' #'; reboot",
    ] {
        assert!(commands(line).iter().any(|c| c == "reboot"), "{line:?}");
    }
    // After a blank joined by a backslash-newline, or an operator.
    for line in [
        "printf SAFE \\\n# comment; reboot",
        "(printf SAFE)\\\n# comment; reboot",
        "printf '%s' $\\\n'it\\'s' # comment; reboot",
        "case x in x)# comment; reboot\nprintf SAFE;; esac",
        "safe()# comment; reboot\n{ printf SAFE; }; safe",
    ] {
        assert!(!commands(line).iter().any(|c| c == "reboot"), "{line:?}");
    }
}

#[test]
fn splits_at_separators() {
    assert_eq!(
        commands("a; b && c || d | e & f\ng"),
        ["a", "b", "c", "d", "e", "f", "g"]
    );
    assert_eq!(commands("a |& b"), ["a", "b"]);
    assert_eq!(commands(";;  ;"), Vec::<String>::new());
    assert_eq!(commands(""), Vec::<String>::new());
}

#[test]
fn pipelines_keep_their_stages_together() {
    let parsed = parse("curl x | sh; echo done");
    let shapes: Vec<usize> = parsed.pipelines.iter().map(Vec::len).collect();
    assert_eq!(shapes, [2, 1]);
}

#[test]
fn collapses_whitespace_outside_quotes_only() {
    assert_eq!(commands("  ls   -la\t  /tmp  "), ["ls -la /tmp"]);
    assert_eq!(commands("echo 'a  ;  b'"), ["echo 'a  ;  b'"]);
    assert_eq!(commands("echo \"a | b\" | wc"), ["echo \"a | b\"", "wc"]);
}

#[test]
fn redirections_with_ampersand_and_bar_are_not_separators() {
    assert_eq!(commands("make 2>&1 | tee log"), ["make 2>&1", "tee log"]);
    assert_eq!(commands("make &> log; ls"), ["make &> log", "ls"]);
    assert_eq!(commands("echo x >| f"), ["echo x >| f"]);
    assert_eq!(commands("cat <&3"), ["cat <&3"]);
}

#[test]
fn extracts_substitutions_as_commands() {
    assert_eq!(
        commands("echo $(rm -rf /)"),
        ["rm -rf /", "echo $(rm -rf /)"]
    );
    assert_eq!(commands("echo `whoami`"), ["whoami", "echo `whoami`"]);
    assert_eq!(
        commands("diff <(ls a) >(cat)"),
        ["ls a", "cat", "diff <(ls a) >(cat)"]
    );
    assert_eq!(
        commands("echo \"$(id; date)\""),
        ["id", "date", "echo \"$(id; date)\""]
    );
    let parsed = parse("bash -c \"$(curl -fsSL x)\"");
    let outer = parsed.commands().last().unwrap();
    assert_eq!(outer.substitutions, ["curl -fsSL x"]);
}

#[test]
fn nested_substitutions_are_all_found() {
    assert_eq!(
        commands("a $(b $(c) `d`)"),
        ["c", "d", "b $(c) `d`", "a $(b $(c) `d`)"]
    );
}

#[test]
fn arithmetic_is_not_a_command_but_its_substitutions_are() {
    assert_eq!(commands("echo $((1 + 2))"), ["echo $((1 + 2))"]);
    assert_eq!(
        commands("echo $(( $(wc -l < f) + 1 ))"),
        ["wc -l < f", "echo $(( $(wc -l < f) + 1 ))"]
    );
    // `$((cmd) )` is a subshell in a command substitution, not arithmetic.
    assert_eq!(
        commands("echo $((rm -rf /) )"),
        ["rm -rf /", "echo $((rm -rf /) )"]
    );
    assert_eq!(commands("((x = 1 << 2))\nrm -rf /"), ["rm -rf /"]);
    assert_eq!(
        commands("echo $((1<<2))\nrm -rf /"),
        ["echo $((1<<2))", "rm -rf /"]
    );
    assert_eq!(commands("echo $[1<<2]; ls"), ["echo $[1<<2]", "ls"]);
    assert_eq!(commands("(( $(id) ))"), ["id"]);
}

#[test]
fn single_quotes_hide_everything() {
    assert_eq!(commands("echo '$(rm -rf /); x'"), ["echo '$(rm -rf /); x'"]);
}

#[test]
fn ansi_c_quotes_cannot_desync_quoting() {
    assert_eq!(
        commands("echo $'it\\'s'; rm -rf /"),
        ["echo $'it\\'s'", "rm -rf /"]
    );
}

#[test]
fn comments_start_at_word_boundaries_only() {
    assert_eq!(
        commands("ls # it's a comment\nrm -rf /"),
        ["ls", "rm -rf /"]
    );
    assert_eq!(commands("echo a#b; ls"), ["echo a#b", "ls"]);
    assert_eq!(commands("echo a\\ #b; ls"), ["echo a\\ #b", "ls"]);
    assert_eq!(commands("echo ${#x}; ls"), ["echo ${#x}", "ls"]);
    assert_eq!(commands("echo a >#b\nls"), ["echo a >", "ls"]);
}

#[test]
fn braced_parameters_keep_separators_literal() {
    assert_eq!(commands("echo ${x//;/}; ls"), ["echo ${x//;/}", "ls"]);
    assert_eq!(commands("echo ${x:-$(id)}"), ["id", "echo ${x:-$(id)}"]);
}

#[test]
fn line_continuations_join() {
    assert_eq!(commands("r\\\nm -rf /"), ["rm -rf /"]);
}

#[test]
fn keywords_and_groups_are_peeled() {
    assert_eq!(commands("if true; then rm -rf /; fi"), ["true", "rm -rf /"]);
    assert_eq!(commands("{ ls; } && ( cd x; pwd )"), ["ls", "cd x", "pwd"]);
    assert_eq!(
        commands("while read l; do echo $l; done < f"),
        ["read l", "echo $l", "< f"]
    );
    assert_eq!(commands("! grep x f"), ["grep x f"]);
    assert_eq!(commands("function f { rm -rf /; }; f"), ["rm -rf /", "f"]);
    assert_eq!(commands("f() { rm -rf /; }"), ["f", "rm -rf /"]);
}

#[test]
fn heredoc_bodies_are_not_commands_but_are_kept() {
    let parsed = parse("cat <<EOF > out\nit's $(id)\nEOF\nrm -rf /");
    let texts: Vec<_> = parsed.commands().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["cat <<EOF > out", "id", "rm -rf /"]);
    let cat = parsed.commands().next().unwrap();
    assert_eq!(cat.heredocs, ["it's $(id)\n"]);
}

#[test]
fn quoted_heredoc_bodies_are_literal() {
    let parsed = parse("sh <<'EOF'\n$(id)\nEOF\nls");
    let texts: Vec<_> = parsed.commands().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["sh <<'EOF'", "ls"]);
    assert_eq!(parsed.commands().next().unwrap().heredocs, ["$(id)\n"]);
}

#[test]
fn heredoc_with_tabs_and_trailing_commands() {
    let parsed = parse("cat <<-END; echo after\n\tbody\n\tEND\nls");
    let texts: Vec<_> = parsed.commands().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["cat <<-END", "echo after", "ls"]);
    assert_eq!(parsed.commands().next().unwrap().heredocs, ["\tbody\n"]);
    let unterminated = parse("cat <<EOF\nno end");
    assert_eq!(unterminated.commands().next().unwrap().heredocs, ["no end"]);
}

#[test]
fn heredocs_in_substitutions_may_end_at_the_closing_paren() {
    // bash ends the body at `EOF)` inside `$(...)` and `<(...)`.
    assert_eq!(
        commands("echo $(cat <<EOF\nhi\nEOF) && rm x"),
        ["cat <<EOF", "echo $(cat <<EOF hi EOF)", "rm x"]
    );
    assert!(commands("echo ${x:-$(cat <<-EOF\n\thi\n\tEOF)} && rm x").contains(&"rm x".into()));
    assert!(commands("cat <(cat <<EOF\nhi\nEOF) ; rm x").contains(&"rm x".into()));
}

#[test]
fn backtick_bodies_are_unescaped_then_parsed() {
    // `\$(...)` in backticks is a substitution once the backslash goes.
    assert!(commands("a=`echo \"\\$(rm x)\"`").contains(&"rm x".into()));
    assert!(commands("echo `echo \\`rm x\\``").contains(&"rm x".into()));
    // A quote does not hide the closing backtick.
    assert!(commands("echo `echo '`; rm x").contains(&"rm x".into()));
    // A here-document inside ends with the body.
    assert!(commands("echo `cat <<'EOF'\n$(a)\nEOF` | b\nrm x").contains(&"rm x".into()));
    assert_eq!(
        commands("echo `echo \\\\$HOME`"),
        ["echo \\$HOME", "echo `echo \\$HOME`"]
    );
}

#[test]
fn single_quotes_in_arithmetic_hide_no_substitution() {
    assert_eq!(commands("(( '$(rm x)' ))"), ["rm x"]);
    assert_eq!(
        commands("echo $(( '`rm x`' ))"),
        ["rm x", "echo $(( '`rm x`' ))"]
    );
    // The quote still hides a parenthesis from the arithmetic's end.
    assert_eq!(commands("(( ')' )); rm x"), ["rm x"]);
}

#[test]
fn single_quotes_inside_quoted_parameters_and_old_arithmetic_hide_nothing() {
    assert!(commands("echo \"${x:-'$(rm x)'}\"").contains(&"rm x".into()));
    assert!(commands("echo $[ '$(rm x)' ]").contains(&"rm x".into()));
    // Unquoted, they quote.
    assert_eq!(commands("echo ${x:-'$(rm x)'}"), ["echo ${x:-'$(rm x)'}"]);
}

#[test]
fn heredocs_in_substitutions_end_at_the_delimiter_as_a_token() {
    let line = "echo $(case x in x) cat <<'EOF'\n$(a)\nEOF;; esac) & rm x";
    assert!(
        commands(line).contains(&"rm x".into()),
        "{:?}",
        commands(line)
    );
    // Not at a longer word.
    let line = "echo $(cat <<EOF\nEOFX\nrm x)";
    assert!(
        !commands(line).contains(&"rm x".into()),
        "{:?}",
        commands(line)
    );
}

#[test]
fn a_hash_in_arithmetic_is_no_comment() {
    assert_eq!(commands("((x\n# y)) ; rm -rf /"), ["rm -rf /"]);
    assert_eq!(
        commands("echo $((2#101)); rm x"),
        ["echo $((2#101))", "rm x"]
    );
}

#[test]
fn nesting_past_the_limit_is_reported() {
    let deep = "$(".repeat(40) + "id" + &")".repeat(40);
    assert!(parse(&deep).too_complex);
    assert!(!parse("$($($(id)))").too_complex);
    let quoted = "echo \"$(".repeat(40);
    assert!(parse(&quoted).too_complex);
    let parens = "((".repeat(3000);
    assert!(parse(&parens).too_complex);
    assert!(!parse("echo $((1 + $((2 * 3)))) && ((i++))").too_complex);
}
