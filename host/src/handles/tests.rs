use super::*;

fn handles(settings: HandleSettings) -> Handles {
    Handles::new(settings, Duration::from_secs(600), Arc::default())
}

fn profile(name: &str) -> Arc<Profile> {
    Arc::new(Profile::deny_all(name, "/"))
}

/// A handle of `tenant` whose first call kept state: its text.
fn kept(handles: &Handles, tenant: Option<&str>, profile: &Arc<Profile>) -> String {
    let mut minted = handles.mint(tenant, profile).unwrap();
    minted.record("todo", "abc");
    assert!(minted.settle(true));
    minted.text.clone()
}

#[test]
fn a_minted_handle_is_claimed_by_its_owner_and_nobody_else() {
    let handles = handles(HandleSettings::default());
    let (reader, other) = (profile("reader"), profile("writer"));
    let text = kept(&handles, Some("alpha"), &reader);
    assert!(text.starts_with(PREFIX) && text.len() == TEXT_LEN, "{text}");
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
    let text = kept(&handles, None, &reader);
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
    let text = kept(&one, None, &reader);
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
    let text = kept(&before, Some("a"), &reader);
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
    let first = kept(&handles, Some("a"), &reader);
    let second = kept(&handles, Some("a"), &reader);
    // Another tenant's handles do not count.
    kept(&handles, Some("b"), &reader);
    // A new conversation whose call kept nothing takes no one's place.
    let refused_call = handles.mint(Some("a"), &reader).unwrap();
    drop(refused_call);
    assert_eq!(handles.held(Some("a")), 2);
    assert!(handles.claim(&first, Some("a"), &reader).is_ok());
    // One that kept state takes the least recently used one's.
    let third = kept(&handles, Some("a"), &reader);
    assert_eq!(handles.held(Some("a")), 2);
    let refused = handles.claim(&second, Some("a"), &reader).err().unwrap();
    assert_eq!(refused.kind, "state_lost");
    // New conversations whose first calls all still run are capped.
    let running = [
        handles.mint(Some("a"), &reader).unwrap(),
        handles.mint(Some("a"), &reader).unwrap(),
    ];
    let refused = handles.mint(Some("a"), &reader).err().unwrap();
    assert_eq!(refused.kind, "too_many_handles", "{refused}");
    drop((running, third));
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
