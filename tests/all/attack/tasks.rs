//! Tasks against other tenants and floods: another tenant's `tasks/get`
//! and `tasks/cancel` of a task id get the error an unknown id gets (and
//! the task runs on); forged and altered ids are unknown; a tenant past
//! `[tasks] max_per_tenant` is refused before anything runs, others not,
//! and a task that ended makes room.

use serde_json::{Value, json};

use crate::mcp_handles::{ALPHA, serve};
use crate::mcp_tasks::{EVERY_CALL, run, task, task_id};

const BETA: &str = "beta-token";

fn unknown(answer: &Value) -> &str {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    answer["error"]["message"].as_str().unwrap()
}

#[tokio::test]
async fn another_tenant_cannot_see_or_cancel_a_task_and_forged_ids_are_unknown() {
    let served = serve(EVERY_CALL, "").await;
    let id = task_id(&run(&served, ALPHA, "sleep 1; echo mine").await);
    let not_found = "Failed to retrieve task: Task not found";
    assert_eq!(unknown(&task(&served, BETA, "get", &id).await), not_found);
    assert_eq!(
        unknown(&task(&served, BETA, "cancel", &id).await),
        not_found
    );
    let mut altered: Vec<char> = id.chars().collect();
    let at = altered.len() / 2;
    altered[at] = if altered[at] == 'A' { 'B' } else { 'A' };
    let altered: String = altered.into_iter().collect();
    let forged = format!("tk_{}", "A".repeat(id.len() - 3));
    for id in [altered.as_str(), forged.as_str(), "tk_", "1"] {
        assert_eq!(unknown(&task(&served, ALPHA, "get", id).await), not_found);
        assert_eq!(
            unknown(&task(&served, ALPHA, "cancel", id).await),
            not_found
        );
    }
    // The owner's task ran on, untouched by the other tenant's cancel.
    let done = crate::mcp_tasks::poll(&served, ALPHA, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
}

#[tokio::test]
async fn a_flood_of_tasks_past_the_tenants_cap_is_refused_before_it_runs() {
    let served = serve(&format!("{EVERY_CALL}max_per_tenant = 2\n"), "").await;
    let marker = format!("tasks-flood-{}", std::process::id());
    let mut ids = Vec::new();
    for _ in 0..2 {
        ids.push(task_id(&run(&served, ALPHA, "sleep 20").await));
    }
    let refused = run(&served, ALPHA, &format!("echo {marker} > flood.txt")).await;
    assert_eq!(refused["isError"], json!(true), "{refused}");
    let text = refused["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("too_many_tasks: tenant \"alpha\" has 2 tasks running")
            && text.contains("[tasks] max_per_tenant = 2"),
        "{text}"
    );
    assert!(
        !served.root.join("alpha/flood.txt").exists(),
        "the refused call ran"
    );
    // Another tenant has its own cap.
    task_id(&run(&served, BETA, "sleep 0.1").await);
    // A task that ended makes room (here: a cancelled one).
    task(&served, ALPHA, "cancel", &ids[0]).await;
    let made = task_id(&run(&served, ALPHA, "sleep 20").await);
    for id in [&ids[1], &made] {
        task(&served, ALPHA, "cancel", id).await;
    }
}

#[tokio::test]
async fn a_call_whose_client_gives_up_before_it_is_a_task_keeps_no_place() {
    let served = serve("[tasks]\nafter = \"20s\"\nmax_per_tenant = 1\n", "").await;
    let marker = format!("tasks-gave-up-{}", std::process::id());
    // The client stops waiting while the call could still become a task.
    let params = json!({"name": "run_command", "arguments": {"command": format!("sleep 20; echo {marker}")}});
    let gave_up = tokio::time::timeout(
        std::time::Duration::from_millis(500),
        crate::mcp_tasks::rpc(&served, ALPHA, "tools/call", Some("run_command"), params),
    )
    .await;
    assert!(gave_up.is_err(), "the call answered: {gave_up:?}");
    // Its command ends with it, and the tenant's one place is free again.
    crate::assert_gone(&marker).await;
    let again = run(&served, ALPHA, "echo again").await;
    assert_eq!(crate::mcp_handles::stdout_of(&again), "again\n");
}
