//! A stateful to-do list per session: each session (task) id gets its own list,
//! kept in the plugin instance that serves that session.

use std::cell::RefCell;

use toolhost_sdk::prelude::*;

/// Status of a to-do item.
#[derive(Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Status {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Finished.
    Done,
}

#[derive(Clone, Serialize)]
struct Item {
    id: u32,
    text: String,
    status: Status,
}

thread_local! {
    static ITEMS: RefCell<Vec<Item>> = const { RefCell::new(Vec::new()) };
}

/// What to do with the list.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Action {
    /// Add an item (needs `text`).
    Add,
    /// Change an item's status or text (needs `id`).
    Update,
    /// Show the list.
    List,
    /// Remove every item.
    Clear,
}

/// Arguments of `todo`.
#[derive(Deserialize, JsonSchema)]
struct TodoArgs {
    /// The action.
    action: Action,
    /// Item text, for `add` and `update`.
    #[serde(default)]
    text: Option<String>,
    /// Item id, for `update`.
    #[serde(default)]
    id: Option<u32>,
    /// New status, for `update`.
    #[serde(default)]
    status: Option<Status>,
}

/// Keep a to-do list for the current task: add, update, list and clear items.
/// The list lives as long as the session.
#[tool(toolset = "tasks", emoji = "📝")]
fn todo(args: TodoArgs) -> Result<Value, ToolError> {
    ITEMS.with_borrow_mut(|items| {
        match args.action {
            Action::Add => {
                let text = args
                    .text
                    .ok_or_else(|| ToolError::invalid_arguments("add needs text"))?;
                let id = items.iter().map(|i| i.id).max().unwrap_or(0) + 1;
                items.push(Item {
                    id,
                    text,
                    status: Status::Pending,
                });
            }
            Action::Update => {
                let id = args
                    .id
                    .ok_or_else(|| ToolError::invalid_arguments("update needs id"))?;
                let item = items
                    .iter_mut()
                    .find(|i| i.id == id)
                    .ok_or_else(|| ToolError::invalid_arguments(format!("no item with id {id}")))?;
                if let Some(text) = args.text {
                    item.text = text;
                }
                if let Some(status) = args.status {
                    item.status = status;
                }
            }
            Action::List => {}
            Action::Clear => items.clear(),
        }
        let done = items.iter().filter(|i| i.status == Status::Done).count();
        Ok(json!({ "items": *items, "done": done, "total": items.len() }))
    })
}

fn setup(session: &str) -> Result<(), String> {
    toolhost_sdk::log::debug(format!("todo list for session {session} started"));
    Ok(())
}

fn teardown() {
    let count = ITEMS.with_borrow(Vec::len);
    toolhost_sdk::log::debug(format!("todo list with {count} items discarded"));
}

export_plugin!(stateful(setup = setup, teardown = teardown); todo);
