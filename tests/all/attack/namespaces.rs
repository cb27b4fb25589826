//! Attack tests: new namespaces. A command asks for a user or mount
//! namespace of its own (`unshare`), from which it could mount over what
//! its sandbox masks; the kernel sandbox and the container backend alike
//! refuse it.

use serde_json::json;
use toolhost::{Host, HostBuilder};

use crate::Workspace;

fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// Each way of asking, and what it answered.
async fn namespaces_refused(host: &Host) {
    for line in [
        "unshare -Ur true",
        "unshare -m true",
        "unshare -Urm true",
        "python3 -c 'import os; os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS)'",
        "python3 -c 'import os; os.setns(os.open(\"/proc/self/ns/mnt\", os.O_RDONLY), 0)'",
    ] {
        let ran = match host.call("run_command", json!({ "command": line })).await {
            Ok(result) => result.get().to_string(),
            Err(e) => e.to_string(),
        };
        assert!(
            !ran.contains("\"exit_code\":0"),
            "`{line}` got a namespace: {ran}"
        );
    }
}

#[tokio::test]
async fn a_command_gets_no_namespace_of_its_own() {
    let ws = Workspace::new(bundled);
    let host = ws
        .host("allow = [\"terminal:*\"]\nfile.read = [\".\"]\nterminal.dangerous = \"allow\"\n")
        .await;
    namespaces_refused(&host).await;
}

#[tokio::test]
async fn in_a_container_a_command_gets_no_namespace_of_its_own() {
    let _alone = crate::container::ONE_AT_A_TIME.lock().await;
    let Some(_socket) = crate::container::engine().await else {
        return;
    };
    let ws = Workspace::new(bundled);
    let host = ws
        .host(&crate::container::profile(
            "terminal.dangerous = \"allow\"\n",
        ))
        .await;
    namespaces_refused(&host).await;
}
