//! Attack tests: git. A command with a writable grant plants metadata in a
//! repository that was there when its sandbox was built, by a route around
//! the read-only files: `.git` or the work tree renamed away and made
//! again, a `commondir`, a linked worktree's metadata or `gitdir:` file, a
//! file the configuration includes or names as hooks, a `config.worktree`,
//! a background process after the command. Then git runs on the host in
//! the repository, as its owner would (`status`, `diff`, `commit`, an ssh
//! fetch), and must run nothing the command planted. On the kernel sandbox
//! and the container backend.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use toolhost::{Host, HostBuilder};

use crate::Workspace;
use crate::mcp::{Client, connect};
use crate::sessions::tool;

fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// Commands may read and write the whole workspace.
const WRITABLE: &str = r#"
allow = ["terminal:*", "file:read", "file:write"]
file.read = ["."]
file.write = ["."]
terminal.dangerous = "allow"
"#;

/// A workspace, the repositories made in it by host git, and a mark that
/// anything planted would leave (outside every grant).
struct Scene {
    ws: Workspace,
    outside: tempfile::TempDir,
}

impl Scene {
    fn new() -> Self {
        let scene = Self {
            ws: Workspace::new(bundled),
            outside: tempfile::tempdir().unwrap(),
        };
        // What a command would plant: a configuration that runs the mark
        // from every program git takes from it, and hooks that do.
        let mark = scene.mark();
        let hooks = scene.ws.mkdir("planted-hooks");
        let hook = hooks.join("pre-commit");
        std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", mark.display())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        scene.ws.write(
            "planted.cfg",
            format!(
                "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\
                 \tfsmonitor = touch {mark}; false\n\tsshCommand = touch {mark}; false\n\
                 \thooksPath = {hooks}\n[filter \"x\"]\n\tclean = touch {mark}; cat\n",
                mark = mark.display(),
                hooks = hooks.display()
            ),
        );
        scene
    }

    /// Where a planted program leaves its mark.
    fn mark(&self) -> PathBuf {
        self.outside.path().join("ran")
    }

    /// A repository at `dir` of the workspace, with a commit, made as its
    /// owner would.
    fn repo(&self, dir: &str) -> PathBuf {
        let root = self.ws.mkdir(dir);
        self.git(&root, &["init", "-q"]);
        std::fs::write(root.join("a.txt"), "a\n").unwrap();
        std::fs::write(root.join(".gitattributes"), "* filter=x\n").unwrap();
        self.git(&root, &["add", "."]);
        self.git(&root, &["commit", "-q", "-m", "first"]);
        // A change for `status` and `diff` to look at.
        std::fs::write(root.join("a.txt"), "changed\n").unwrap();
        root
    }

    /// Host git in `dir`, as its owner (no configuration of the test's
    /// user or system; ownership not in the way).
    fn git(&self, dir: &Path, args: &[&str]) -> std::process::Output {
        std::process::Command::new("git")
            .args([
                "-c",
                "safe.directory=*",
                "-c",
                "user.name=o",
                "-c",
                "user.email=o@o",
            ])
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.outside.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap()
    }

    /// Runs git in `dir` as its owner would after a command: nothing the
    /// command planted may run.
    fn host_git_runs_nothing(&self, dir: &Path, after: &str) {
        for args in [
            &["status"][..],
            &["diff"],
            &["commit", "-q", "--allow-empty", "-m", "after"],
            &["ls-remote", "ssh://127.0.0.1:9/x"],
        ] {
            self.git(dir, args);
            assert!(
                !self.mark().exists(),
                "host `git {}` in {} ran what `{after}` planted",
                args.join(" "),
                dir.display()
            );
        }
    }

    /// The planted configuration does run from a repository's own
    /// metadata: what the tests look for is there to be found.
    fn planting_would_run(&self) {
        let root = self.repo("control");
        std::fs::copy(self.ws.join("planted.cfg"), root.join(".git/config")).unwrap();
        self.git(&root, &["status"]);
        assert!(
            self.mark().exists(),
            "the planted configuration ran nothing"
        );
        std::fs::remove_file(self.mark()).unwrap();
        std::fs::remove_dir_all(root).unwrap();
    }
}

/// Runs `line` alone in a sandbox of its own; whatever it printed, or the
/// error.
async fn run(host: &Host, line: &str) -> String {
    match host.call("run_command", json!({ "command": line })).await {
        Ok(result) => result.get().to_string(),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn git_renamed_away_and_made_again_runs_nothing_on_the_host() {
    let scene = Scene::new();
    scene.planting_would_run();
    let host = scene.ws.host(WRITABLE).await;
    let lines = [
        "mv .git .git.orig && mkdir .git && cp -r .git.orig/. .git/ && cp ../planted.cfg .git/config",
        "mkdir ../away && mv .git ../away/ && cp -r ../away/.git . && cp ../planted.cfg .git/config",
        "rm -rf .git; mkdir -p .git && cp ../planted.cfg .git/config",
    ];
    for (n, line) in lines.iter().enumerate() {
        let root = scene.repo(&format!("r{n}"));
        run(&host, &format!("cd r{n} && {line}")).await;
        scene.host_git_runs_nothing(&root, line);
    }
    // Around the repository too: the directories down to it stay.
    let root = scene.repo("a/b/repo");
    for line in [
        "mv a a.orig && mkdir -p a/b && cp -r a.orig/b/repo a/b/ && cp planted.cfg a/b/repo/.git/config",
        "mv a/b/repo a/b/old && cp -r a/b/old a/b/repo && cp planted.cfg a/b/repo/.git/config",
    ] {
        run(&host, line).await;
        scene.host_git_runs_nothing(&root, line);
    }
}

#[tokio::test]
async fn metadata_git_reads_that_was_not_there_is_put_back() {
    let scene = Scene::new();
    let host = scene.ws.host(WRITABLE).await;
    let root = scene.repo("repo");
    // The owner's configuration reads a worktree configuration, which the
    // repository does not have (yet).
    scene.git(&root, &["config", "extensions.worktreeConfig", "true"]);
    for line in [
        "mkdir evil && cp -r .git/objects .git/refs .git/HEAD evil/ && cp ../planted.cfg evil/config \
         && echo ../evil > .git/commondir",
        "cp ../planted.cfg .git/config.worktree",
    ] {
        let result = run(&host, &format!("cd repo && {line}")).await;
        scene.host_git_runs_nothing(&root, line);
        assert!(
            result.contains("put it back") || result.contains("ended"),
            "{line}: {result}"
        );
    }
    assert!(!root.join(".git/commondir").exists());
    assert!(!root.join(".git/config.worktree").exists());
    // Ordinary work in the repository still runs, and its metadata is the
    // owner's.
    let work = run(
        &host,
        "cd repo && git add a.txt && git status --short && git -c user.name=a -c user.email=a@a \
         commit -qm second && git branch b && git checkout -q b && git gc -q && git log --oneline",
    )
    .await;
    assert!(
        work.contains("M  a.txt") && work.contains("second") && work.contains("\"exit_code\":0"),
        "{work}"
    );
}

#[tokio::test]
async fn a_linked_worktree_keeps_its_metadata() {
    let scene = Scene::new();
    let host = scene.ws.host(WRITABLE).await;
    let root = scene.repo("repo");
    let linked = scene.ws.join("linked");
    let added = scene.git(&root, &["worktree", "add", "-q", linked.to_str().unwrap()]);
    assert!(added.status.success(), "{added:?}");
    // A repository of the command's, with the planted configuration.
    let evil = "cp -r repo/.git evil && cp planted.cfg evil/config";
    for line in [
        format!("{evil} && echo ../../../../evil > repo/.git/worktrees/linked/commondir"),
        format!("{evil} && echo \"gitdir: $PWD/evil\" > linked/.git"),
        format!(
            "{evil} && mv repo/.git/worktrees/linked repo/.git/worktrees/old \
             && mkdir repo/.git/worktrees/linked \
             && cp -r repo/.git/worktrees/old/. repo/.git/worktrees/linked/ \
             && echo ../../../../evil > repo/.git/worktrees/linked/commondir"
        ),
    ] {
        std::fs::remove_dir_all(scene.ws.join("evil")).ok();
        let line = line.as_str();
        run(&host, line).await;
        scene.host_git_runs_nothing(&linked, line);
        scene.host_git_runs_nothing(&root, line);
    }
}

#[tokio::test]
async fn what_the_configuration_includes_or_runs_from_the_work_tree_stays() {
    let scene = Scene::new();
    let host = scene.ws.host(WRITABLE).await;
    let root = scene.repo("repo");
    // The owner's configuration takes hooks and more configuration from
    // files of the work tree, one of them not there yet.
    std::fs::create_dir(root.join(".githooks")).unwrap();
    std::fs::write(root.join("shared.cfg"), "").unwrap();
    scene.git(&root, &["config", "core.hooksPath", ".githooks"]);
    scene.git(&root, &["config", "--add", "include.path", "../shared.cfg"]);
    scene.git(&root, &["config", "--add", "include.path", "../later.cfg"]);
    let mark = scene.mark();
    for line in [
        "cp planted.cfg repo/shared.cfg".to_string(),
        "cp planted.cfg repo/later.cfg".to_string(),
        format!(
            "printf '#!/bin/sh\\ntouch {}\\n' > repo/.githooks/pre-commit; chmod +x repo/.githooks/pre-commit",
            mark.display()
        ),
        "mv repo/.githooks repo/old-hooks; cp -r planted-hooks repo/.githooks".to_string(),
    ] {
        run(&host, &line).await;
        scene.host_git_runs_nothing(&root, &line);
    }
}

/// Waits up to ten seconds for a process whose command line holds
/// `marker` to be gone; whether it went.
async fn gone(marker: &str) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if crate::processes_with(marker).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// A session's background process plants a `commondir` after its command
/// returned: it is put back as soon as it appears, and the session's
/// sandbox (with the process) ends; the session's next command runs.
async fn a_background_plant_is_put_back(client: &Client, scene: &Scene, root: &Path) {
    let line = "sleep 8471 & sleep 0.3; mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD \
                evil/ && cp ../planted.cfg evil/config && echo ../evil > .git/commondir; wait";
    tool(
        client,
        "process_start",
        json!({ "command": line, "cwd": "repo" }),
    )
    .await;
    crate::sessions::wait_running("sleep 8471").await;
    let ended = gone("sleep 8471").await;
    scene.host_git_runs_nothing(root, line);
    assert!(ended, "the planting process was left running");
    assert!(!root.join(".git/commondir").exists());
    let next: Value = tool(client, "run_command", json!({ "command": "echo next" })).await;
    assert_eq!(next["stdout"], "next\n", "{next}");
}

#[tokio::test]
async fn a_background_process_planting_later_is_put_back_and_ended() {
    let scene = Scene::new();
    let root = scene.repo("repo");
    let (client, _) = connect(scene.ws.host(WRITABLE).await, None).await;
    a_background_plant_is_put_back(&client, &scene, &root).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn in_a_container_metadata_cannot_be_replaced_nor_planted() {
    let _alone = crate::container::ONE_AT_A_TIME.lock().await;
    let Some(_socket) = crate::container::engine().await else {
        return;
    };
    let scene = Scene::new();
    scene.planting_would_run();
    let root = scene.repo("repo");
    crate::container::give_to_sandbox(&scene.ws.path);
    let profile = crate::container::profile("file.write = [\".\"]\n");
    let (client, _) = connect(scene.ws.host(&profile).await, None).await;
    for line in [
        "cd repo && mv .git .git.orig && mkdir .git && cp -r .git.orig/. .git/ && cp ../planted.cfg .git/config",
        "cd repo && mkdir evil && cp -r .git/objects .git/refs .git/HEAD evil/ \
         && cp ../planted.cfg evil/config && echo ../evil > .git/commondir",
    ] {
        let _ = client
            .call_tool(crate::mcp::call("run_command", json!({ "command": line })))
            .await;
        scene.host_git_runs_nothing(&root, line);
    }
    assert!(!root.join(".git/commondir").exists());
    a_background_plant_is_put_back(&client, &scene, &root).await;
    client.cancel().await.unwrap();
}

/// The file tools of the same profile write no more of a repository's
/// metadata than its commands may: its configuration, hooks and info.
#[tokio::test]
async fn the_file_tools_write_no_metadata_git_runs_programs_from() {
    let scene = Scene::new();
    scene.planting_would_run();
    let host = scene.ws.host(WRITABLE).await;
    let root = scene.repo("r");
    let planted = std::fs::read_to_string(scene.ws.join("planted.cfg")).unwrap();
    for (tool, path) in [
        ("write_file", "r/.git/config"),
        ("write_file", "r/.git/hooks/pre-commit"),
        ("write_file", "r/.git/info/attributes"),
        ("edit_file", "r/.git/config"),
    ] {
        let refused = write_planted(&host, tool, path, &planted).await;
        assert!(refused.contains("denied"), "{tool} {path}: {refused}");
        scene.host_git_runs_nothing(&root, path);
    }
    // Its work stays open to them.
    let wrote = host
        .call(
            "write_file",
            json!({ "path": "r/notes.txt", "content": "n" }),
        )
        .await;
    assert!(wrote.is_ok(), "{wrote:?}");
}

/// What `tool` (`write_file`, or `edit_file` of its `[core]` line) answered
/// when asked to write `planted` to `path`, or the error.
async fn write_planted(host: &Host, tool: &str, path: &str, planted: &str) -> String {
    let arguments = match tool {
        "edit_file" => json!({ "path": path, "old_text": "[core]", "new_text": planted }),
        _ => json!({ "path": path, "content": planted }),
    };
    match host.call(tool, arguments).await {
        Ok(result) => result.get().to_string(),
        Err(e) => e.to_string(),
    }
}

/// A git directory not named `.git` (`--separate-git-dir`, a bare
/// repository) is one for the file tools as it is for the terminal's
/// planner: known by what it holds, its configuration and hooks are not
/// theirs to write. A directory that merely has a `config` is not one.
#[tokio::test]
async fn the_file_tools_write_no_metadata_of_a_git_directory_not_named_git() {
    let scene = Scene::new();
    scene.planting_would_run();
    let host = scene.ws.host(WRITABLE).await;
    let proj = scene.ws.join("proj");
    let gitdir = scene.ws.join("proj.gitdir");
    scene.git(
        scene.outside.path(),
        &[
            "init",
            "-q",
            "--separate-git-dir",
            gitdir.to_str().unwrap(),
            proj.to_str().unwrap(),
        ],
    );
    std::fs::write(proj.join("a.txt"), "a\n").unwrap();
    let bare = scene.ws.join("srv.git");
    scene.git(
        scene.outside.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    let planted = std::fs::read_to_string(scene.ws.join("planted.cfg")).unwrap();
    for (tool, path) in [
        ("edit_file", "proj.gitdir/config"),
        ("write_file", "proj.gitdir/hooks/pre-commit"),
        ("edit_file", "srv.git/config"),
        ("write_file", "srv.git/info/attributes"),
        // The `gitdir:` file that says where proj's metadata is.
        ("write_file", "proj/.git"),
    ] {
        let refused = write_planted(&host, tool, path, &planted).await;
        assert!(refused.contains("denied"), "{tool} {path}: {refused}");
    }
    scene.host_git_runs_nothing(&proj, "proj.gitdir/config");
    // A directory with a `config` of its own is no git directory.
    scene.ws.write("app/config", "port = 80\n");
    let wrote = host
        .call(
            "write_file",
            json!({ "path": "app/config", "content": "port = 81\n" }),
        )
        .await;
    assert!(wrote.is_ok(), "{wrote:?}");
}

/// The owner's `.git/config` is a link to a file in the workspace that is
/// not there yet (a shared configuration not deployed): a command writing
/// that file would give the owner's git a configuration. Where a kept link
/// leads nowhere, that name is kept absent: what a command writes there is
/// set aside.
#[tokio::test]
async fn a_kept_link_leading_nowhere_keeps_where_it_leads_absent() {
    let scene = Scene::new();
    scene.planting_would_run();
    let host = scene.ws.host(WRITABLE).await;
    let root = scene.repo("r");
    // Where it leads, and the same in a directory not made yet.
    for (text, line, made) in [
        (
            "../../gitcfg",
            "cp planted.cfg gitcfg; echo wrote",
            "gitcfg",
        ),
        (
            "../../cfgdir/gitcfg",
            "mkdir -p cfgdir && cp planted.cfg cfgdir/gitcfg; echo wrote",
            "cfgdir/gitcfg",
        ),
    ] {
        std::fs::remove_file(root.join(".git/config")).unwrap();
        std::os::unix::fs::symlink(text, root.join(".git/config")).unwrap();
        let wrote = run(&host, line).await;
        assert!(!scene.ws.join(made).exists(), "{text}: {wrote}");
        scene.host_git_runs_nothing(&root, line);
    }
}

/// What the terminal's plan keeps of a repository beyond its git directory
/// (where a link of its metadata leads, a file its configuration includes)
/// the file tools do not write either: one decision for both doors. The
/// owner's `.git/config` is a link into the workspace (there, not there
/// yet, in a directory not made yet), and its configuration includes a
/// shared file.
#[tokio::test]
async fn the_file_tools_write_nothing_the_plan_keeps_outside_a_git_directory() {
    let scene = Scene::new();
    scene.planting_would_run();
    let host = scene.ws.host(WRITABLE).await;
    let root = scene.repo("r");
    let planted = std::fs::read_to_string(scene.ws.join("planted.cfg")).unwrap();
    let config = root.join(".git/config");
    let own = std::fs::read_to_string(&config).unwrap();
    for (text, written) in [
        ("../../gitcfg", Some("gitcfg")),
        ("../../gitcfg", None),
        ("../../cfgdir/gitcfg", None),
    ] {
        let _ = std::fs::remove_file(scene.ws.join("gitcfg"));
        if let Some(name) = written {
            std::fs::write(scene.ws.join(name), &own).unwrap();
        }
        std::fs::remove_file(&config).unwrap();
        std::os::unix::fs::symlink(text, &config).unwrap();
        let target = text.trim_start_matches("../../");
        let refused = write_planted(&host, "write_file", target, &planted).await;
        assert!(refused.contains("denied"), "{text}: {refused}");
        scene.host_git_runs_nothing(&root, target);
    }
    // A file the configuration includes.
    std::fs::remove_file(&config).unwrap();
    std::fs::write(
        &config,
        format!("{own}[include]\n\tpath = ../../shared.cfg\n"),
    )
    .unwrap();
    scene.ws.write("shared.cfg", "[user]\n\tname = o\n");
    let refused = write_planted(&host, "write_file", "shared.cfg", &planted).await;
    assert!(refused.contains("denied"), "{refused}");
    scene.host_git_runs_nothing(&root, "shared.cfg");
    // The rest of the repository and the workspace stays the tools' to write.
    for path in ["r/a.txt", "other.cfg", "cfgdir/notes.txt"] {
        let wrote = host
            .call("write_file", json!({ "path": path, "content": "x\n" }))
            .await;
        assert!(wrote.is_ok(), "{path}: {wrote:?}");
    }
}
