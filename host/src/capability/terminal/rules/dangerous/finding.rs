//! What the detector reports: the kinds of harm, and a danger found in a
//! command line.

use std::fmt;

/// What kind of harm a dangerous command can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DangerCategory {
    /// `rm -r` in any spelling.
    RecursiveDelete,
    /// `rm` of `/`, `/*`, a home directory or a top-level system directory.
    DeleteRoot,
    /// `chmod` giving others write access (`777`, `o+w`, `a+w`).
    WorldWritable,
    /// `chmod` setting the setuid or setgid bit, or `setcap` giving a
    /// program capabilities.
    Setuid,
    /// `chown -R` / `chgrp -R`.
    RecursiveChown,
    /// `mkfs`, `wipefs -a`, partition table edits, volume removal.
    DiskFormat,
    /// `dd of=/dev/sda`, `> /dev/sda`, `cp x /dev/nvme0n1`.
    RawDiskWrite,
    /// Writing, editing or deleting system files (`/etc`, `/boot`, `/usr`, ...),
    /// SSH configuration or shell startup files; changing the running
    /// kernel (`insmod`, `sysctl -w`, `kexec`).
    SystemWrite,
    /// `shred`, `wipe`, `srm`.
    SecureErase,
    /// `DROP TABLE`, `TRUNCATE`, `DELETE FROM` without `WHERE`, `FLUSHALL`.
    DestructiveSql,
    /// `systemctl stop|disable|mask`, `service x stop`, `launchctl unload`.
    ServiceStop,
    /// `shutdown`, `reboot`, `halt`, `poweroff`, `init 0`.
    Shutdown,
    /// `kill -9 -1`, `killall`, `pkill -9`.
    KillAll,
    /// `:(){ :|:& };:` and its relatives.
    ForkBomb,
    /// Downloaded content run by a shell or interpreter (`curl | sh`).
    RemoteScript,
    /// Decoded content run by a shell or interpreter (`base64 -d | sh`).
    DecodedScript,
    /// Commands piped into a shell or interpreter, a command string run as
    /// another user (`su -c`), or command strings too deep to inspect.
    /// (`sh -c STRING`, `eval` and here-documents fed to a shell are judged
    /// by the commands inside.)
    ShellIndirection,
    /// `find -delete`, `find -exec rm`, `xargs rm`.
    BulkDelete,
    /// `git reset --hard`, `git push --force`, `git clean -f`, `git branch -D`.
    GitDestructive,
    /// A program computed when the line runs (`$X`, `$(...)`, `${SHELL}`):
    /// what it is cannot be judged from the line.
    ComputedProgram,
    /// Code an interpreter is handed inline (`python3 -c`, `perl -e`,
    /// `node -e`, `bun -e`, `deno eval`, a here-document, `awk` with
    /// `system`): what it does cannot be judged.
    InlineCode,
    /// `rm -f` of a path outside the working directory (absolute, `~`,
    /// `..` or computed).
    ForcedDelete,
    /// Writing or deleting credentials: `~/.ssh`, `~/.aws`, `~/.gnupg`,
    /// `~/.kube`, `~/.docker`, `~/.azure`, `~/.config/gh`, `~/.netrc`,
    /// `.env` files.
    CredentialWrite,
    /// Writing an agent's own configuration (`~/.hermes`, `~/.codex`,
    /// `~/.claude`, `$CODEX_HOME`, ...), which may turn off its approvals.
    AgentConfigWrite,
    /// `history -c`, `unset HISTFILE`, overwriting `~/.bash_history`.
    HistoryWipe,
    /// `dd if=/dev/sda`: reading a whole disk.
    RawDiskRead,
    /// `npm uninstall`, `pip uninstall`, `apt remove`, `brew rm`, ...
    PackageRemoval,
    /// `docker run --privileged`, `-v /:/host`, `--pid=host`, a container
    /// CLI driving another daemon (`-H`, `DOCKER_HOST=`), or entering or
    /// making namespaces (`nsenter`, `unshare`).
    ContainerEscape,
    /// `docker stop|restart|rm|prune`, `docker compose down`, `kubectl delete`,
    /// `terraform destroy`, `aws s3 rm`, `gcloud ... delete`.
    InfraDestroy,
    /// `crontab`, `systemctl enable`, `at`, `launchctl load`.
    Persistence,
    /// `nc -e /bin/sh`, `socat ... exec:`, redirections to `/dev/tcp/`.
    ReverseShell,
    /// A cloud instance metadata address (`169.254.169.254`,
    /// `metadata.google.internal`), which hands out credentials.
    CloudMetadata,
    /// Password crackers, brute-forcers and network scanners (`john`,
    /// `hashcat`, `hydra`, `nmap`).
    AttackTool,
    /// An option, setting or variable that makes a tool run another program
    /// (`rg --pre`, `sort --compress-program`, `tar --to-command`, `git -c
    /// core.pager=`, `LD_PRELOAD=`), or `find -exec`/`xargs` running the
    /// files they are given as programs.
    ExecOption,
    /// Listening for connections or tunnelling them (`nc -l`, `socat
    /// TCP-LISTEN`, `ssh -R/-L/-D`, `ngrok`).
    NetworkListener,
    /// Attaching to another process or reading its memory or environment
    /// (`gdb -p`, `strace -p`, `gcore`, `/proc/PID/mem`).
    ProcessAccess,
    /// A secret file (a key, `~/.aws/credentials`, `.env`, `*.pem`) sent over
    /// the network (`curl -d @F`, `nc < F`, `scp F host:`, `$(cat F)` in a
    /// request).
    SecretExfiltration,
}

impl DangerCategory {
    /// Every category, in declaration order.
    pub const ALL: [DangerCategory; 37] = [
        Self::RecursiveDelete,
        Self::DeleteRoot,
        Self::WorldWritable,
        Self::Setuid,
        Self::RecursiveChown,
        Self::DiskFormat,
        Self::RawDiskWrite,
        Self::SystemWrite,
        Self::SecureErase,
        Self::DestructiveSql,
        Self::ServiceStop,
        Self::Shutdown,
        Self::KillAll,
        Self::ForkBomb,
        Self::RemoteScript,
        Self::DecodedScript,
        Self::ShellIndirection,
        Self::BulkDelete,
        Self::GitDestructive,
        Self::ComputedProgram,
        Self::InlineCode,
        Self::ForcedDelete,
        Self::CredentialWrite,
        Self::AgentConfigWrite,
        Self::HistoryWipe,
        Self::RawDiskRead,
        Self::PackageRemoval,
        Self::ContainerEscape,
        Self::InfraDestroy,
        Self::Persistence,
        Self::ReverseShell,
        Self::CloudMetadata,
        Self::AttackTool,
        Self::ExecOption,
        Self::NetworkListener,
        Self::ProcessAccess,
        Self::SecretExfiltration,
    ];

    /// A stable snake_case name, e.g. for "approve for this session" keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RecursiveDelete => "recursive_delete",
            Self::DeleteRoot => "delete_root",
            Self::WorldWritable => "world_writable",
            Self::Setuid => "setuid",
            Self::RecursiveChown => "recursive_chown",
            Self::DiskFormat => "disk_format",
            Self::RawDiskWrite => "raw_disk_write",
            Self::SystemWrite => "system_write",
            Self::SecureErase => "secure_erase",
            Self::DestructiveSql => "destructive_sql",
            Self::ServiceStop => "service_stop",
            Self::Shutdown => "shutdown",
            Self::KillAll => "kill_all",
            Self::ForkBomb => "fork_bomb",
            Self::RemoteScript => "remote_script",
            Self::DecodedScript => "decoded_script",
            Self::ShellIndirection => "shell_indirection",
            Self::BulkDelete => "bulk_delete",
            Self::GitDestructive => "git_destructive",
            Self::ComputedProgram => "computed_program",
            Self::InlineCode => "inline_code",
            Self::ForcedDelete => "forced_delete",
            Self::CredentialWrite => "credential_write",
            Self::AgentConfigWrite => "agent_config_write",
            Self::HistoryWipe => "history_wipe",
            Self::RawDiskRead => "raw_disk_read",
            Self::PackageRemoval => "package_removal",
            Self::ContainerEscape => "container_escape",
            Self::InfraDestroy => "infra_destroy",
            Self::Persistence => "persistence",
            Self::ReverseShell => "reverse_shell",
            Self::CloudMetadata => "cloud_metadata",
            Self::AttackTool => "attack_tool",
            Self::ExecOption => "exec_option",
            Self::NetworkListener => "network_listener",
            Self::ProcessAccess => "process_access",
            Self::SecretExfiltration => "secret_exfiltration",
        }
    }
}

impl fmt::Display for DangerCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One dangerous thing found in a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Danger {
    /// The kind of harm.
    pub category: DangerCategory,
    /// What the command does, for a human deciding whether to approve it,
    /// e.g. "recursive delete (rm -r)".
    pub reason: String,
    /// The offending simple command, pipeline or line (at most 200 characters).
    pub matched: String,
}

impl fmt::Display for Danger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {:?}", self.reason, self.matched)
    }
}

/// One dangerous thing a command does, before it is tied to the text it was
/// found in.
pub(in crate::capability::terminal::rules) struct Finding {
    pub(in crate::capability::terminal::rules) category: DangerCategory,
    pub(in crate::capability::terminal::rules) reason: String,
}

impl Finding {
    pub(super) fn new(category: DangerCategory, reason: impl Into<String>) -> Self {
        Self {
            category,
            reason: reason.into(),
        }
    }
}
