use std::sync::Arc;

use super::*;
use crate::config::HandleSettings;

fn handles() -> Handles {
    Handles::new(
        HandleSettings::default(),
        Duration::from_secs(600),
        Arc::default(),
    )
}

fn profile(name: &str) -> Arc<Profile> {
    Arc::new(Profile::deny_all(name, "/"))
}

fn settings(max: usize) -> TaskSettings {
    TaskSettings {
        max_per_tenant: max,
        ..TaskSettings::default()
    }
}

#[test]
fn a_task_is_found_by_its_owner_only_and_one_error_says_so_for_everyone_else() {
    let (tasks, handles, reader) = (Tasks::default(), handles(), profile("reader"));
    let made = tasks
        .create(
            &handles,
            &settings(4),
            Some("alpha"),
            &reader,
            "run_command",
            &|| None,
        )
        .unwrap();
    assert!(
        made.id.starts_with(crate::handles::TASK_PREFIX),
        "{}",
        made.id
    );
    let view = tasks
        .get(&handles, &made.id, Some("alpha"), &reader)
        .unwrap();
    assert_eq!(
        (view.status, view.tool.as_str()),
        (Status::Working, "run_command")
    );
    let mut altered: Vec<char> = made.id.chars().collect();
    let at = altered.len() / 2;
    altered[at] = if altered[at] == 'A' { 'B' } else { 'A' };
    let altered: String = altered.into_iter().collect();
    for (id, tenant, profile) in [
        (made.id.as_str(), Some("beta"), &reader),
        (made.id.as_str(), None, &reader),
        (made.id.as_str(), Some("alpha"), &profile("writer")),
        (altered.as_str(), Some("alpha"), &reader),
        ("tk_", Some("alpha"), &reader),
    ] {
        assert_eq!(
            tasks.get(&handles, id, tenant, profile).err(),
            Some(TaskError::NotFound)
        );
        assert_eq!(
            tasks.cancel(&handles, id, tenant, profile).err(),
            Some(TaskError::NotFound)
        );
    }
    assert!(!made.cancel.is_cancelled());
    // A handle or request state is not a task id, nor the other way.
    let handle = handles.mint(Some("alpha"), &reader).unwrap();
    assert!(
        tasks
            .get(&handles, &handle.text, Some("alpha"), &reader)
            .is_err()
    );
}

#[test]
fn a_tenant_past_its_cap_is_refused_and_others_are_not() {
    let (tasks, handles, reader) = (Tasks::default(), handles(), profile("reader"));
    for _ in 0..2 {
        tasks
            .create(&handles, &settings(2), Some("alpha"), &reader, "t", &|| {
                None
            })
            .unwrap();
    }
    let refused = tasks
        .create(&handles, &settings(2), Some("alpha"), &reader, "t", &|| {
            None
        })
        .err()
        .unwrap();
    assert!(
        refused
            .to_string()
            .starts_with("too_many_tasks: tenant \"alpha\" has 2 tasks running")
            && refused.to_string().contains("[tasks] max_per_tenant"),
        "{refused}"
    );
    assert!(
        tasks
            .create(&handles, &settings(2), Some("beta"), &reader, "t", &|| None)
            .is_ok()
    );
    // A task that ended makes room: the one that ended first goes.
    let ids: Vec<String> = tasks
        .list(Some("alpha"), &reader)
        .into_iter()
        .map(|v| v.id)
        .collect();
    tasks
        .cancel(&handles, &ids[1], Some("alpha"), &reader)
        .unwrap();
    tasks
        .create(&handles, &settings(2), Some("alpha"), &reader, "t", &|| {
            None
        })
        .unwrap();
    assert_eq!(
        tasks.get(&handles, &ids[1], Some("alpha"), &reader).err(),
        Some(TaskError::NotFound)
    );
    assert_eq!(tasks.list(Some("alpha"), &reader).len(), 2);
}

#[test]
fn cancel_ends_the_call_and_a_later_result_does_not_undo_it() {
    let (tasks, handles, reader) = (Tasks::default(), handles(), profile("reader"));
    let made = tasks
        .create(&handles, &settings(2), None, &reader, "t", &|| None)
        .unwrap();
    tasks.cancel(&handles, &made.id, None, &reader).unwrap();
    assert!(made.cancel.is_cancelled());
    tasks.finish(&made.key, Payload::Result(serde_json::json!("late")), None);
    let view = tasks.get(&handles, &made.id, None, &reader).unwrap();
    assert_eq!(
        (view.status, view.payload),
        (Status::Cancelled, Payload::None)
    );
    // Cancelling again is the same empty answer.
    tasks.cancel(&handles, &made.id, None, &reader).unwrap();
}

#[test]
fn a_question_is_answered_once_by_its_key() {
    let (tasks, handles, reader) = (Tasks::default(), handles(), profile("reader"));
    let made = tasks
        .create(&handles, &settings(2), None, &reader, "t", &|| None)
        .unwrap();
    let (sender, mut got) = tokio::sync::mpsc::unbounded_channel();
    tasks.ask(
        &made.key,
        "approval-1".into(),
        serde_json::json!({}),
        Box::new(move |answer| {
            let _ = sender.send(answer.clone());
        }),
    );
    let view = tasks.get(&handles, &made.id, None, &reader).unwrap();
    assert_eq!(view.status, Status::InputRequired);
    let other = serde_json::json!({"approval-9": 1})
        .as_object()
        .unwrap()
        .clone();
    tasks
        .answer(&handles, &made.id, None, &reader, &other)
        .unwrap();
    assert!(got.try_recv().is_err());
    let right = serde_json::json!({"approval-1": 2})
        .as_object()
        .unwrap()
        .clone();
    tasks
        .answer(&handles, &made.id, None, &reader, &right)
        .unwrap();
    tasks
        .answer(&handles, &made.id, None, &reader, &right)
        .unwrap();
    assert_eq!(got.try_recv().ok(), Some(serde_json::json!(2)));
    assert!(got.try_recv().is_err());
    let view = tasks.get(&handles, &made.id, None, &reader).unwrap();
    assert_eq!(view.status, Status::Working);
}

#[test]
fn a_finished_task_is_kept_for_keep_then_expires() {
    let (tasks, handles, reader) = (Tasks::default(), handles(), profile("reader"));
    let quick = TaskSettings {
        keep: Duration::from_millis(1),
        ..settings(2)
    };
    let made = tasks
        .create(&handles, &quick, None, &reader, "t", &|| None)
        .unwrap();
    tasks.finish(&made.key, Payload::Result(serde_json::json!(1)), None);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(
        tasks.get(&handles, &made.id, None, &reader).err(),
        Some(TaskError::NotFound)
    );
    assert!(tasks.list(None, &reader).is_empty());
}

#[test]
fn a_task_past_its_ttl_says_it_expired_and_one_still_kept_does_not() {
    let (tasks, handles, reader) = (Tasks::default(), handles(), profile("reader"));
    let short = TaskSettings {
        ttl: Duration::from_secs(1),
        keep: Duration::from_secs(1),
        ..settings(2)
    };
    let gone = tasks
        .create(&handles, &short, None, &reader, "t", &|| None)
        .unwrap();
    tasks.finish(&gone.key, Payload::Result(serde_json::json!(1)), None);
    let running = tasks
        .create(&handles, &short, None, &reader, "t", &|| None)
        .unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(
        tasks.get(&handles, &gone.id, None, &reader).err(),
        Some(TaskError::Expired)
    );
    assert_eq!(
        tasks
            .get(&handles, &gone.id, None, &reader)
            .err()
            .unwrap()
            .to_string(),
        "Failed to retrieve task: Task has expired"
    );
    // A task still running is not dropped for its age: its call's own
    // limits end it.
    let view = tasks.get(&handles, &running.id, None, &reader).unwrap();
    assert_eq!(view.status, Status::Working);
}

#[test]
fn an_answer_under_another_profile_cancels_the_task_instead() {
    let (tasks, handles) = (Tasks::default(), handles());
    let (before, after) = (profile("reader"), profile("reader"));
    let made = tasks
        .create(&handles, &settings(2), None, &before, "t", &|| None)
        .unwrap();
    let answered = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = answered.clone();
    tasks.ask(
        &made.key,
        "approval-1".into(),
        serde_json::json!({}),
        Box::new(move |_| seen.store(true, std::sync::atomic::Ordering::SeqCst)),
    );
    let once = serde_json::json!({"approval-1": {"action": "accept"}});
    let refused = tasks.answer(&handles, &made.id, None, &after, once.as_object().unwrap());
    assert_eq!(refused, Err(TaskError::ProfileChanged));
    assert!(!answered.load(std::sync::atomic::Ordering::SeqCst));
    assert!(made.cancel.is_cancelled());
    let view = tasks.get(&handles, &made.id, None, &after).unwrap();
    assert_eq!(view.status, Status::Cancelled);
}
