//! Availability: a tool is offered only when its permissions are allowed and
//! its required environment variables are set and passed by the profile; the
//! guest sees only the variables it declared.

use serde_json::Value;
use toolhost::{ErrorKind, Host, Selection};

/// A host with the `shapes` guest under profile `p` written as `profile_toml`.
async fn host_with(profile_toml: &str) -> Host {
    let profile = crate::profile(profile_toml, &std::env::temp_dir());
    Host::builder()
        .bundled(true)
        .plugin_file(toolhost_tests::SHAPES)
        .profile(profile)
        .build()
        .await
        .unwrap()
}

fn hidden_reason(host: &Host, tool: &str) -> Option<String> {
    host.listing(&host.caller(), &Selection::all())
        .unwrap()
        .into_iter()
        .find(|l| l.spec.name == tool)
        .unwrap()
        .hidden
}

#[tokio::test]
async fn a_denied_permission_hides_the_tool_with_the_reason() {
    let host = host_with(
        r#"
        allow = ["*"]
        deny = ["env:*"]
        env.allow = ["SHAPES_TOKEN"]
        "#,
    )
    .await;
    let reason = hidden_reason(&host, "env_probe").expect("env_probe is hidden");
    assert!(reason.contains("env:read"), "{reason}");
    assert!(reason.contains("deny"), "{reason}");
    assert!(
        !host
            .select(&Selection::all())
            .unwrap()
            .iter()
            .any(|t| t.name == "env_probe")
    );
    let error = host.call("env_probe", "{}").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert!(error.message().contains("is not available"), "{error}");
    // Tools without permissions stay available.
    assert_eq!(hidden_reason(&host, "sort_points"), None);
}

#[tokio::test]
async fn a_permission_outside_the_allow_list_hides_the_tool() {
    let host = host_with(
        r#"
        allow = ["file:read"]
        "#,
    )
    .await;
    let reason = hidden_reason(&host, "env_probe").unwrap();
    assert!(
        reason.contains("not in the profile's allow list"),
        "{reason}"
    );
}

#[tokio::test]
async fn required_env_vars_must_be_passed_and_set_and_only_they_reach_the_guest() {
    let not_passed = host_with(
        r#"
        allow = ["env:read"]
        "#,
    )
    .await;
    let reason = hidden_reason(&not_passed, "env_probe").unwrap();
    assert!(reason.contains("does not pass"), "{reason}");
    assert!(reason.contains("env.allow"), "{reason}");

    let profile = r#"
        allow = ["env:read"]
        env.allow = ["SHAPES_*", "HOME", "PATH"]
        "#;
    // SAFETY: only this test reads or writes SHAPES_TOKEN.
    unsafe { std::env::remove_var("SHAPES_TOKEN") };
    let unset = host_with(profile).await;
    let reason = hidden_reason(&unset, "env_probe").unwrap();
    assert!(
        reason.contains("SHAPES_TOKEN, which is not set"),
        "{reason}"
    );

    // SAFETY: as above.
    unsafe { std::env::set_var("SHAPES_TOKEN", "s3cret") };
    let set = host_with(profile).await;
    assert_eq!(hidden_reason(&set, "env_probe"), None);
    let result = set.call("env_probe", "{}").await.unwrap();
    let result: Value = serde_json::from_str(result.get()).unwrap();
    assert_eq!(result["token"], "s3cret");
    // HOME and PATH are passed by the profile but the tool did not ask for them.
    assert_eq!(result["visible"], serde_json::json!(["SHAPES_TOKEN"]));
}
