//! Attack tests: masks. A background process of one session renames a
//! directory back and forth (`mv d e; mv e d`) while commands of the same
//! caller, each in a sandbox (or container) of its own, read what
//! `file.deny` masks in it: the walk of the grants, the mounts and the
//! command race the renames, and the masked content must never appear. A
//! command whose sandbox could not be built to the plan is refused.

use serde_json::json;
use toolhost::{Host, HostBuilder};

use crate::Workspace;
use crate::mcp::connect;
use crate::sessions::{tool, wait_running};

fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// What the masked file holds; the commands search for its first part.
const SECRET: &str = "race-secret-8152";

/// A workspace with `d/.env` (masked) and `d/public.txt`.
fn workspace() -> Workspace {
    let ws = Workspace::new(bundled);
    ws.write("d/.env", format!("TOKEN={SECRET}\n"));
    ws.write("d/public.txt", "public\n");
    ws
}

/// Reads the masked file by both names and searches the whole workspace;
/// runs alone, each time in a sandbox of its own. Whether it ran.
async fn read_once(host: &Host) -> bool {
    let line = "cat d/.env e/.env 2>/dev/null; grep -rs race-secret . ; true";
    match host.call("run_command", json!({ "command": line })).await {
        Ok(result) => {
            let text = result.get();
            assert!(!text.contains(SECRET), "the masked file was read: {text}");
            true
        }
        Err(e) => {
            assert!(!e.to_string().contains(SECRET), "{e}");
            false
        }
    }
}

#[tokio::test]
async fn a_mask_holds_while_its_directory_is_renamed_back_and_forth() {
    let ws = workspace();
    let host = ws
        .host(
            r#"
allow = ["terminal:*", "file:read", "file:write"]
file.read = ["."]
file.write = ["."]
file.deny = ["**/.env"]
terminal.dangerous = "allow"
"#,
        )
        .await;
    let (renamer, _) = connect(host.clone(), None).await;
    tool(
        &renamer,
        "process_start",
        json!({ "command": "while :; do mv d e; sleep 0.02; mv e d; sleep 0.0201; done" }),
    )
    .await;
    wait_running("sleep 0.0201").await;
    let mut ran = 0;
    for _ in 0..50 {
        ran += usize::from(read_once(&host).await);
    }
    renamer.cancel().await.unwrap();
    assert!(ran > 0, "every command was refused");
}

#[tokio::test]
async fn in_a_container_a_mask_holds_while_its_directory_is_renamed() {
    let _alone = crate::container::ONE_AT_A_TIME.lock().await;
    let Some(_socket) = crate::container::engine().await else {
        return;
    };
    let ws = workspace();
    let profile = crate::container::profile(
        "file.write = [\".\"]\nfile.deny = [\"**/.env\"]\nterminal.dangerous = \"allow\"\n",
    );
    let host = ws.host(&profile).await;
    let (renamer, _) = connect(host.clone(), None).await;
    tool(
        &renamer,
        "process_start",
        json!({ "command": "while :; do mv d e; sleep 0.3; mv e d; sleep 0.31; done" }),
    )
    .await;
    wait_running("sleep 0.31").await;
    let mut ran = 0;
    for _ in 0..12 {
        ran += usize::from(read_once(&host).await);
    }
    renamer.cancel().await.unwrap();
    assert!(ran > 0, "every command was refused");
}
