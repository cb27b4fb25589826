//! Unit tests of `capability/file/rules`.

use super::*;

fn rules(read: &[&str], write: &[&str], deny: &[&str]) -> PathRules {
    PathRules::new(read, write, deny).expect("valid test rules")
}

/// The developer profile from the design, resolved against `/w`.
fn workspace() -> PathRules {
    rules(
        &["/w/workspace/**"],
        &["/w/workspace/**"],
        &["/w/workspace/.env", "/w/workspace/secrets/**", "**/*.pem"],
    )
}

fn read(rules: &PathRules, path: &str) -> Result<(), PathRefusal> {
    rules.check(Path::new(path), Access::Read)
}

fn write(rules: &PathRules, path: &str) -> Result<(), PathRefusal> {
    rules.check(Path::new(path), Access::Write)
}

#[test]
fn normalize_resolves_dots_lexically() {
    let cases = [
        ("/a/b/../c", "/a/c"),
        ("/a/./b/", "/a/b"),
        ("//a//b", "/a/b"),
        ("/..", "/"),
        ("/../../etc/passwd", "/etc/passwd"),
        ("/a/b/../../..", "/"),
        ("/", "/"),
        ("a/../..", ".."),
        ("a/..", "."),
        ("./a", "a"),
    ];
    for (input, expected) in cases {
        assert_eq!(normalize(Path::new(input)), Path::new(expected), "{input}");
    }
}

#[test]
fn grants_allow_paths_inside_them() {
    let rules = workspace();
    assert_eq!(read(&rules, "/w/workspace"), Ok(()));
    assert_eq!(read(&rules, "/w/workspace/src/main.rs"), Ok(()));
    assert_eq!(write(&rules, "/w/workspace/out/report.txt"), Ok(()));
}

#[test]
fn paths_outside_grants_are_refused() {
    let rules = workspace();
    assert_eq!(
        read(&rules, "/etc/passwd"),
        Err(PathRefusal::NotGranted {
            path: "/etc/passwd".into(),
            access: Access::Read
        })
    );
    assert!(read(&rules, "/w").is_err());
    assert!(read(&rules, "/").is_err());
}

#[test]
fn sibling_with_a_common_prefix_is_not_inside() {
    let rules = workspace();
    assert!(read(&rules, "/w/workspace-evil/x").is_err());
    assert!(read(&rules, "/w/workspace2").is_err());
    assert!(write(&rules, "/w/workspace.bak").is_err());
}

#[test]
fn dot_dot_cannot_escape_a_grant() {
    let rules = workspace();
    assert!(read(&rules, "/w/workspace/../secret.txt").is_err());
    assert!(read(&rules, "/w/workspace/a/../../workspace-evil").is_err());
    assert!(write(&rules, "/w/workspace/../../etc/passwd").is_err());
    assert_eq!(read(&rules, "/w/workspace/a/../b"), Ok(()));
    assert_eq!(read(&rules, "/w/other/../workspace/b"), Ok(()));
}

#[test]
fn write_implies_read_but_not_the_reverse() {
    let rules = rules(&["/data"], &["/out"], &[]);
    assert_eq!(read(&rules, "/out/x"), Ok(()));
    assert_eq!(write(&rules, "/out/x"), Ok(()));
    assert_eq!(read(&rules, "/data/x"), Ok(()));
    let refusal = write(&rules, "/data/x").unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "path \"/data/x\" is outside the profile's file.write directories; \
             add a directory containing it to file.write to allow writing it"
    );
}

#[test]
fn nested_grants_keep_their_own_access() {
    let rules = rules(&["/w"], &["/w/out"], &[]);
    assert_eq!(write(&rules, "/w/out/a"), Ok(()));
    assert!(write(&rules, "/w/in/a").is_err());
    assert_eq!(read(&rules, "/w/in/a"), Ok(()));
}

#[test]
fn denied_files_are_refused_inside_grants() {
    let rules = workspace();
    let refusal = read(&rules, "/w/workspace/.env").unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "path \"/w/workspace/.env\" matches file.deny pattern \"/w/workspace/.env\"; \
             remove or narrow that pattern to allow it"
    );
    assert!(write(&rules, "/w/workspace/.env").is_err());
    assert!(read(&rules, "/w/workspace/./src/../.env").is_err());
    assert_eq!(read(&rules, "/w/workspace/.env.example"), Ok(()));
    assert_eq!(read(&rules, "/w/workspace/src/.env"), Ok(()));
}

#[test]
fn denied_directory_covers_itself_and_everything_beneath() {
    let rules = workspace();
    for path in [
        "/w/workspace/secrets",
        "/w/workspace/secrets/",
        "/w/workspace/secrets/a",
        "/w/workspace/secrets/a/b/c.txt",
        "/w/workspace/x/../secrets/a",
    ] {
        assert!(
            matches!(
                read(&rules, path),
                Err(PathRefusal::Denied { ref pattern, .. }) if pattern == "/w/workspace/secrets/**"
            ),
            "{path}"
        );
    }
    assert_eq!(read(&rules, "/w/workspace/secrets-public/a"), Ok(()));
    assert_eq!(read(&rules, "/w/workspace/not-secrets"), Ok(()));
}

#[test]
fn a_plain_directory_glob_denies_descendants() {
    let rules = rules(&["/w"], &[], &["/w/secrets", "**/.git"]);
    assert!(read(&rules, "/w/secrets").is_err());
    assert!(read(&rules, "/w/secrets/key").is_err());
    assert!(read(&rules, "/w/repo/.git/config").is_err());
    assert_eq!(read(&rules, "/w/secretsx"), Ok(()));
    assert_eq!(read(&rules, "/w/repo/.gitignore"), Ok(()));
}

#[test]
fn any_depth_globs_match_everywhere() {
    let rules = workspace();
    assert!(read(&rules, "/w/workspace/key.pem").is_err());
    assert!(read(&rules, "/w/workspace/a/b/c/key.pem").is_err());
    assert_eq!(read(&rules, "/w/workspace/key.pem.txt"), Ok(()));
    let env = self::rules(&["/w"], &[], &["**/.env"]);
    assert!(read(&env, "/w/.env").is_err());
    assert!(read(&env, "/w/deep/er/.env").is_err());
    assert_eq!(read(&env, "/w/deep/.envrc"), Ok(()));
}

#[test]
fn single_star_stays_within_a_component() {
    let rules = rules(&["/w"], &[], &["/w/*.key"]);
    assert!(read(&rules, "/w/a.key").is_err());
    assert_eq!(read(&rules, "/w/sub/a.key"), Ok(()));
}

#[test]
fn is_denied_names_the_pattern_for_listing_filters() {
    let rules = workspace();
    assert_eq!(
        rules.is_denied(Path::new("/w/workspace/secrets")),
        Some("/w/workspace/secrets/**")
    );
    assert_eq!(
        rules.is_denied(Path::new("/w/workspace/a.pem")),
        Some("**/*.pem")
    );
    assert_eq!(rules.is_denied(Path::new("/w/workspace/src")), None);
    assert_eq!(rules.deny_patterns().count(), 3);
}

#[test]
fn first_deny_pattern_in_config_order_is_reported() {
    let rules = rules(&["/w"], &[], &["**/*.pem", "/w/keys/**"]);
    assert_eq!(
        rules.is_denied(Path::new("/w/keys/a.pem")),
        Some("**/*.pem")
    );
    assert_eq!(
        rules.is_denied(Path::new("/w/keys/a.txt")),
        Some("/w/keys/**")
    );
}

#[test]
fn grants_are_listed_for_preopening_once_each() {
    let rules = rules(
        &["/w/workspace/**", "/data", "/data/"],
        &["/w/workspace"],
        &[],
    );
    let grants: Vec<_> = rules.grants().collect();
    assert_eq!(
        grants,
        [
            (Path::new("/w/workspace"), Access::Write),
            (Path::new("/data"), Access::Read)
        ]
    );
}

#[test]
fn no_grants_means_nothing_is_reachable() {
    let rules = PathRules::default();
    assert!(read(&rules, "/").is_err());
    assert_eq!(rules.is_denied(Path::new("/x")), None);
    assert_eq!(rules.grants().count(), 0);
}

#[test]
fn relative_paths_are_refused() {
    let rules = workspace();
    assert!(matches!(
        read(&rules, "workspace/a"),
        Err(PathRefusal::NotAbsolute { .. })
    ));
}

#[test]
fn config_errors_name_the_key_and_entry() {
    let relative = PathRules::new(["workspace"], Vec::<&str>::new(), Vec::<&str>::new());
    assert_eq!(
        relative.unwrap_err().to_string(),
        "file.read entry \"workspace\" is not an absolute path; resolve it against the config directory"
    );
    let glob = PathRules::new(Vec::<&str>::new(), ["/w/*.txt"], Vec::<&str>::new());
    assert!(matches!(
        glob,
        Err(PathRuleError::GlobInGrant {
            key: "file.write",
            ..
        })
    ));
    let deny = PathRules::new(["/w"], Vec::<&str>::new(), [".env"]);
    assert!(matches!(deny, Err(PathRuleError::RelativeDeny { .. })));
    let broken = PathRules::new(["/w"], Vec::<&str>::new(), ["/w/[abc"]);
    assert!(matches!(broken, Err(PathRuleError::InvalidDeny { .. })));
}

#[test]
fn deny_patterns_are_normalized_like_paths() {
    let rules = rules(&["/w"], &[], &["/w/./a/../secrets/", "/w//b"]);
    assert!(read(&rules, "/w/secrets/x").is_err());
    assert!(read(&rules, "/w/b").is_err());
    assert_eq!(read(&rules, "/w/a"), Ok(()));
    assert!(PathRules::new(["/w"], Vec::<&str>::new(), ["/w/*/../x"]).is_err());
}

#[test]
fn root_deny_covers_everything() {
    let rules = rules(&["/w"], &[], &["/**"]);
    assert!(read(&rules, "/w/a").is_err());
    assert!(read(&rules, "/w").is_err());
}

proptest::proptest! {
    /// A directory's deny answer, remembered, is the answer for every
    /// path in it: the memo changes no decision, in any order of checks.
    #[test]
    fn remembered_deny_answers_match_the_full_check(
        paths in proptest::collection::vec(
            proptest::collection::vec(
                proptest::sample::select(vec![
                    "w", "workspace", "secrets", ".env", "a.pem", "src", "..", ".", "x",
                ]),
                0..7,
            ),
            1..40,
        ),
    ) {
        let rules = rules(
            &["/w/workspace/**"],
            &["/w/workspace/src/**"],
            &["/w/workspace/.env", "/w/workspace/secrets/**", "**/*.pem", "**/x/src"],
        );
        let mut memo = DenyMemo::default();
        for names in paths {
            let path = format!("/w/{}", names.join("/"));
            let path = Path::new(&path);
            for access in [Access::Read, Access::Write] {
                proptest::prop_assert_eq!(
                    rules.check_remembering(path, access, Some(&mut memo)),
                    rules.check(path, access),
                    "{}", path.display()
                );
            }
        }
    }
}
