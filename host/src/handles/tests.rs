use super::*;

fn handles(settings: HandleSettings) -> Handles {
    Handles::new(settings, Duration::from_secs(600), Arc::default())
}

fn profile(name: &str) -> Arc<Profile> {
    Arc::new(Profile::deny_all(name, "/"))
}

#[test]
fn a_minted_handle_is_claimed_by_its_owner_and_nobody_else() {
    let handles = handles(HandleSettings::default());
    let (reader, other) = (profile("reader"), profile("writer"));
    let minted = handles.mint(Some("alpha"), &reader).unwrap();
    let text = minted.text.clone();
    assert!(text.starts_with(PREFIX) && text.len() == TEXT_LEN, "{text}");
    minted.record("todo", "abc");
    drop(minted);
    let claimed = handles.claim(&text, Some("alpha"), &reader).unwrap();
    assert_eq!(claimed.parts.get("todo").map(String::as_str), Some("abc"));
    assert!(claimed.session().starts_with("h:") && !claimed.session().contains(&text[3..]));
    drop(claimed);
    // Another tenant, another profile, the local caller, an altered text:
    // one error, with nothing that tells them apart.
    let refusals: Vec<HandleError> = [
        handles.claim(&text, Some("beta"), &reader).err(),
        handles.claim(&text, Some("alpha"), &other).err(),
        handles.claim(&text, None, &reader).err(),
        handles.claim(&altered(&text), Some("alpha"), &reader).err(),
    ]
    .into_iter()
    .map(Option::unwrap)
    .collect();
    for refusal in &refusals {
        assert_eq!(refusal.kind, "invalid_handle");
        assert_eq!(
            refusal.message.replace(&shown(&text[..text.len() - 1]), ""),
            refusals[0]
                .message
                .replace(&shown(&text[..text.len() - 1]), "")
        );
    }
}

#[test]
fn an_expired_handle_is_refused_as_expired() {
    let handles = handles(HandleSettings {
        max_age: Duration::ZERO,
        ..HandleSettings::default()
    });
    let reader = profile("reader");
    let text = handles.mint(None, &reader).unwrap().text.clone();
    let refused = handles.claim(&text, None, &reader).err().unwrap();
    assert_eq!(refused.kind, "handle_expired", "{refused}");
    assert!(refused.message.contains("handle_max_age"), "{refused}");
}

#[test]
fn a_handle_of_another_replica_says_which() {
    let key = KeySource::Key([5; 32]);
    let one = handles(HandleSettings {
        key: key.clone(),
        replica: 1,
        ..HandleSettings::default()
    });
    let two = handles(HandleSettings {
        key,
        replica: 2,
        ..HandleSettings::default()
    });
    let reader = profile("reader");
    let text = one.mint(None, &reader).unwrap().text.clone();
    assert_eq!(
        two.claim(&text, None, &reader).err().unwrap().kind,
        "wrong_replica"
    );
}

#[test]
fn a_restarted_host_with_the_same_key_says_the_state_is_lost() {
    let key = KeySource::Key([6; 32]);
    let reader = profile("reader");
    let before = handles(HandleSettings {
        key: key.clone(),
        ..HandleSettings::default()
    });
    let text = before.mint(Some("a"), &reader).unwrap().text.clone();
    let after = handles(HandleSettings {
        key,
        ..HandleSettings::default()
    });
    let refused = after.claim(&text, Some("a"), &reader).err().unwrap();
    assert_eq!(refused.kind, "state_lost");
    assert!(refused.message.contains("restarted"), "{refused}");
}

#[test]
fn a_tenant_over_its_cap_loses_its_least_recently_used_handle() {
    let handles = handles(HandleSettings {
        max_per_tenant: 2,
        ..HandleSettings::default()
    });
    let reader = profile("reader");
    let first = handles.mint(Some("a"), &reader).unwrap().text.clone();
    let second = handles.mint(Some("a"), &reader).unwrap().text.clone();
    // Another tenant's handles do not count.
    let _other = handles.mint(Some("b"), &reader).unwrap();
    let third = handles.mint(Some("a"), &reader).unwrap();
    assert_eq!(handles.held(Some("a")), 2);
    let refused = handles.claim(&first, Some("a"), &reader).err().unwrap();
    assert_eq!(refused.kind, "state_lost");
    // Both left have a call in flight: the next is refused.
    let busy = handles.claim(&second, Some("a"), &reader).unwrap();
    let refused = handles.mint(Some("a"), &reader).err().unwrap();
    assert_eq!(refused.kind, "too_many_handles", "{refused}");
    drop((busy, third));
}

#[test]
fn durations_read_as_config_spans() {
    assert_eq!(show_duration(Duration::from_secs(600)), "10m");
    assert_eq!(show_duration(Duration::from_secs(86_400)), "24h");
    assert_eq!(show_duration(Duration::from_secs(42)), "42s");
    assert_eq!(show_duration(Duration::from_secs(5400)), "1h30m");
}

/// `text` with one character of its body changed (never to itself: the
/// last character carries padding bits, so a middle one is changed).
fn altered(text: &str) -> String {
    let at = text.len() / 2;
    let was = text.as_bytes()[at];
    let now = if was == b'A' { 'B' } else { 'A' };
    format!("{}{now}{}", &text[..at], &text[at + 1..])
}
