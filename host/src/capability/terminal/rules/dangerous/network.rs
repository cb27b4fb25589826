//! The network, both ways: listeners and tunnels that let connections in or
//! carry them past the network rules (`nc -l`, `socat TCP-LISTEN`,
//! `ssh -R/-L/-D`, `ngrok`), and the pieces for spotting secret files sent
//! out (which files look secret, which programs send, what they send).

use super::args::operands;
use super::targets;
use crate::capability::terminal::rules::shell::Invocation;

/// Programs that open tunnels to or from other machines.
#[rustfmt::skip]
const TUNNELS: &[&str] = &[
    "ngrok", "lt", "localtunnel", "chisel", "frpc", "frps", "bore", "sshuttle", "zrok", "inlets",
    "pagekite", "pagekite.py", "gost", "iodine", "iodined", "dnscat", "dnscat2", "ptunnel",
    "ptunnel-ng", "ligolo", "ligolo-ng",
];

/// netcat's names.
const NETCATS: &[&str] = &["nc", "ncat", "netcat", "nc.traditional", "nc.openbsd"];

/// Options of `scp`, `sftp`, `rsync`, `rclone` and the cloud CLIs that take
/// a value (an identity file or a remote shell is not what is sent).
#[rustfmt::skip]
const COPY_WITH_VALUE: &[&str] = &[
    "-c", "-D", "-F", "-i", "-J", "-l", "-o", "-P", "-S", "-X", "-e", "--rsh", "-f", "--filter",
    "--exclude", "--include", "--rsync-path", "-B", "--block-size", "--port", "-M",
    "--remote-option", "-T", "--temp-dir", "--password-file", "--profile", "--region",
    "--endpoint-url", "--config", "--project",
];

/// `ssh` short options that take a value (the rest of a cluster or the next
/// word).
const SSH_WITH_VALUE: &str = "bcDEeFIiJLlmOopQRSWwB";

/// A listener or tunnel `program` opens with `args`, described.
pub(super) fn listener(program: &str, args: &[String]) -> Option<String> {
    let informs = args.iter().all(|a| {
        matches!(
            a.as_str(),
            "--help" | "-h" | "--version" | "version" | "help"
        )
    });
    if TUNNELS.contains(&program) && !args.is_empty() && !informs {
        return Some(format!(
            "opens a tunnel to or from the internet ({program})"
        ));
    }
    match program {
        p if NETCATS.contains(&p) => args
            .iter()
            .take_while(|a| *a != "--")
            .any(|a| {
                a == "--listen"
                    || a.strip_prefix('-')
                        .is_some_and(|f| !f.starts_with('-') && f.contains(['l', 'L']))
            })
            .then(|| format!("listens for connections ({program} -l)")),
        "socat" => socat(args),
        "ssh" | "autossh" => {
            ssh_forward(args).map(|how| format!("forwards ports through ssh ({program} {how})"))
        }
        "cloudflared" if args.iter().any(|a| a == "tunnel" || a == "access") => {
            Some("opens a tunnel to or from the internet (cloudflared)".to_owned())
        }
        "tailscale" if args.iter().any(|a| a == "funnel" || a == "serve") => {
            Some("exposes a local port (tailscale funnel)".to_owned())
        }
        _ => None,
    }
}

/// `socat` with a listening address, or relaying between two network
/// addresses.
fn socat(args: &[String]) -> Option<String> {
    let kinds: Vec<String> = args
        .iter()
        .filter(|a| !a.starts_with('-') || a.as_str() == "-")
        .map(|a| {
            a.split([':', ','])
                .next()
                .unwrap_or_default()
                .to_ascii_uppercase()
        })
        .collect();
    let listens = kinds.iter().any(|kind| {
        kind.contains("LISTEN")
            || kind.ends_with("-L")
            || kind.contains("-RECV")
            || kind.contains("-ACCEPT")
    });
    if listens {
        return Some("listens for connections (socat ...-LISTEN)".to_owned());
    }
    let network = |kind: &String| {
        [
            "TCP", "UDP", "SCTP", "OPENSSL", "SSL", "SOCKS", "PROXY", "DCCP", "UDPLITE", "IP",
        ]
        .iter()
        .any(|p| kind.starts_with(p))
    };
    (kinds.iter().filter(|kind| network(kind)).count() >= 2)
        .then(|| "relays connections between network addresses (socat)".to_owned())
}

/// The port-forwarding option `ssh` is given (`-L`, `-R`, `-D`, `-w`, in a
/// cluster or as `-o LocalForward=...`), if any.
fn ssh_forward(args: &[String]) -> Option<String> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let Some(cluster) = arg
            .strip_prefix('-')
            .filter(|c| !c.is_empty() && !c.starts_with('-'))
        else {
            if arg.starts_with('-') {
                continue;
            }
            // The destination: the rest is the remote command.
            return None;
        };
        for (at, flag) in cluster.char_indices() {
            if matches!(flag, 'L' | 'R' | 'D' | 'w') {
                return Some(format!("-{flag}"));
            }
            if flag == 'o' {
                let rest = &cluster[at + 1..];
                let value = if rest.is_empty() {
                    iter.next().cloned().unwrap_or_default()
                } else {
                    rest.to_owned()
                };
                let key = value
                    .split(['=', ' '])
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                let setting = value
                    .split_once(['=', ' '])
                    .map(|(_, v)| v.trim().to_ascii_lowercase());
                let forwards = matches!(
                    key.as_str(),
                    "localforward" | "remoteforward" | "dynamicforward"
                ) || (key == "tunnel" && setting.is_some_and(|v| v != "no"));
                if forwards {
                    return Some(format!("-o {value}"));
                }
                break;
            }
            if SSH_WITH_VALUE.contains(flag) {
                if at + flag.len_utf8() == cluster.len() {
                    iter.next();
                }
                break;
            }
        }
    }
    None
}

/// The command `ssh` with `args` runs on the remote host, if it is given
/// one (without one, it runs what arrives on stdin).
pub(super) fn ssh_command(args: &[String]) -> Option<String> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            i += 1;
            break;
        }
        let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) else {
            break;
        };
        i += 1;
        if let Some(at) = cluster.find(|c| SSH_WITH_VALUE.contains(c))
            && at + 1 == cluster.len()
        {
            i += 1;
        }
    }
    let rest = args.get(i + 1..)?;
    (!rest.is_empty()).then(|| rest.join(" "))
}

/// True if `word` names a file whose contents are secret: a key, a
/// credential store, a `.env` file, a password database, a shell history or
/// another process's environment.
pub(super) fn is_secret(word: &str) -> bool {
    let path = word.trim_start_matches(['@', '<']).trim_end_matches('/');
    if path.is_empty() {
        return false;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    if name.ends_with(".pub") || name == "known_hosts" {
        return false;
    }
    let lower = name.to_ascii_lowercase();
    let key_file = [
        ".pem",
        ".key",
        ".p12",
        ".pfx",
        ".jks",
        ".keystore",
        ".kdbx",
        ".ppk",
    ]
    .iter()
    .any(|ext| lower.ends_with(ext));
    let ssh_key = ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_xmss"]
        .iter()
        .any(|prefix| lower.starts_with(prefix));
    #[rustfmt::skip]
    let named = matches!(lower.as_str(),
        ".netrc" | ".git-credentials" | ".pgpass" | ".npmrc" | ".pypirc" | ".htpasswd"
        | "credentials" | "credentials.json" | "credentials.toml" | "credentials.tfrc.json"
        | ".vault-token" | "shadow" | "gshadow" | "master.key" | "secrets.yml" | "secrets.yaml"
        | "secrets.json" | ".bash_history" | ".zsh_history" | "service-account.json");
    let store_dir = path.split('/').any(|part| {
        matches!(
            part,
            ".ssh" | ".aws" | ".gnupg" | ".password-store" | ".kube"
        )
    });
    let system = path.starts_with("/run/secrets/")
        || path.starts_with("/var/run/secrets/")
        || (path.starts_with("/proc/") && path.ends_with("/environ"));
    key_file
        || ssh_key
        || named
        || store_dir
        || system
        || targets::is_env_file(name)
        || targets::credential_store(path).is_some()
}

/// True if `invocation` sends what it reads on stdin over the network:
/// netcat, `socat`, `ssh`, `telnet`, mailers, or `curl`/`wget`/an upload
/// told to read stdin (`-d @-`, `-T -`, `--post-file=/dev/stdin`).
pub(super) fn sends_stdin(invocation: &Invocation) -> bool {
    let program = invocation.program.as_str();
    let args = invocation.args.as_slice();
    if NETCATS.contains(&program)
        || matches!(
            program,
            "socat"
                | "ssh"
                | "telnet"
                | "mail"
                | "mailx"
                | "sendmail"
                | "msmtp"
                | "mutt"
                | "http"
                | "https"
                | "xh"
                | "xhs"
                | "ftp"
                | "tftp"
        )
    {
        return true;
    }
    if program == "openssl" {
        return args.first().is_some_and(|a| a == "s_client");
    }
    let reads_stdin = |arg: &String| {
        arg.ends_with("@-")
            || arg.ends_with("=-")
            || arg == "-"
            || arg.contains("/dev/stdin")
            || arg.ends_with("<-")
    };
    matches!(
        program,
        "curl" | "wget" | "wget2" | "curlie" | "aws" | "gsutil" | "rclone" | "gh"
    ) && args.iter().any(reads_stdin)
}

/// The files `invocation` sends over the network by naming them: `curl -d
/// @F`, `-F x=@F`, `-T F`, `wget --post-file=F`, `http x=@F`, `scp F
/// host:`, `rsync F host:`, `aws s3 cp F s3://...`, `mail -a F`, `gh gist
/// create F`.
pub(super) fn sent_files(invocation: &Invocation) -> Vec<String> {
    let program = invocation.program.as_str();
    let args = invocation.args.as_slice();
    let after = |arg: &str, marker: char| arg.split_once(marker).map(|(_, file)| file.to_owned());
    let mut files = Vec::new();
    match program {
        "curl" | "curlie" => files.extend(curl_files(args)),
        "wget" | "wget2" => files.extend(args.iter().filter_map(|arg| {
            arg.strip_prefix("--post-file=")
                .or_else(|| arg.strip_prefix("--body-file="))
                .map(str::to_owned)
        })),
        "http" | "https" | "xh" | "xhs" => {
            files.extend(args.iter().filter_map(|arg| after(arg, '@')));
        }
        // Uploads: the last operand is remote, the others are sent.
        "scp" | "sftp" | "rsync" | "rclone" | "aws" | "gsutil" | "gcloud" => {
            let remote = |arg: &str| {
                arg.starts_with("s3://")
                    || arg.starts_with("gs://")
                    || arg
                        .split_once(':')
                        .is_some_and(|(host, _)| !host.is_empty() && !host.contains('/'))
            };
            let operands = operands(args, COPY_WITH_VALUE);
            if let [sources @ .., last] = operands.as_slice()
                && remote(last)
            {
                files.extend(
                    sources
                        .iter()
                        .filter(|a| !remote(a))
                        .map(|a| (*a).to_owned()),
                );
            }
        }
        "mail" | "mailx" | "mutt" => {
            for pair in args.windows(2) {
                if matches!(pair[0].as_str(), "-a" | "-A" | "--attach") {
                    files.push(pair[1].clone());
                }
            }
        }
        "gh" if args.iter().any(|a| a == "gist") => {
            files.extend(args.iter().filter(|a| !a.starts_with('-')).cloned());
        }
        _ => {}
    }
    files
}

/// The files `curl` sends: `-d @F`, `--data-binary @F`, `-F name=@F`,
/// `-F name=<F`, `-T F`.
fn curl_files(args: &[String]) -> Vec<String> {
    let mut files = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let (option, attached) = match arg.split_once('=') {
            Some((option, value)) if option.starts_with("--") => (option, Some(value.to_owned())),
            _ if arg.len() > 2
                && arg
                    .get(..2)
                    .is_some_and(|short| ["-d", "-F", "-T"].contains(&short)) =>
            {
                (&arg[..2], Some(arg[2..].to_owned()))
            }
            _ => (arg.as_str(), None),
        };
        let upload = matches!(option, "--upload-file" | "-T");
        let data = matches!(
            option,
            "--data"
                | "--data-binary"
                | "--data-ascii"
                | "--data-urlencode"
                | "--json"
                | "-d"
                | "--form"
                | "-F"
        );
        if !(upload || data) {
            continue;
        }
        let Some(value) = attached.or_else(|| iter.next().cloned()) else {
            continue;
        };
        if upload {
            files.push(value);
        } else if let Some((_, file)) = value.split_once('@').or_else(|| value.split_once('<')) {
            files.push(file.to_owned());
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::terminal::rules::dangerous::DangerCategory::*;
    use crate::capability::terminal::rules::dangerous::programs::tests::assert_rules;

    #[test]
    fn secret_looking_files() {
        for word in [
            "~/.ssh/id_ed25519",
            "$HOME/.ssh/id_rsa",
            "/root/.aws/credentials",
            ".env",
            "app/.env.production",
            "server.pem",
            "tls/private.key",
            "@~/.netrc",
            "id_ecdsa",
            "/etc/shadow",
            "~/.kube/config",
            "/proc/1/environ",
            ".ssh/",
            "/run/secrets/db",
            "~/.docker/config.json",
            "cert.p12",
        ] {
            assert!(is_secret(word), "{word}");
        }
        for word in [
            "~/.ssh/id_ed25519.pub",
            "~/.ssh/known_hosts",
            "README.md",
            ".env.example",
            "/etc/hosts",
            "report.json",
            "keys.txt",
            "src/main.rs",
            "-",
        ] {
            assert!(!is_secret(word), "{word}");
        }
    }

    #[test]
    fn listeners_and_tunnels_and_their_near_misses() {
        assert_rules(&[
            ("nc -l 4444", NetworkListener, "nc -z host 80"),
            ("nc -lvnp 9001", NetworkListener, "nc host 80"),
            (
                "ncat --listen 8080 --keep-open",
                NetworkListener,
                "ncat host 443",
            ),
            (
                "socat TCP-LISTEN:8080,fork TCP:internal:80",
                NetworkListener,
                "socat - TCP:example.com:80",
            ),
            (
                "socat tcp-l:2222 exec:'bash -li'",
                NetworkListener,
                "socat -V",
            ),
            (
                "socat TCP4:a:1 TCP4:b:2",
                NetworkListener,
                "socat STDIO FILE:/tmp/x",
            ),
            ("ssh -D 1080 user@host", NetworkListener, "ssh user@host"),
            (
                "ssh -NfR 9000:localhost:22 bastion",
                NetworkListener,
                "ssh -p 2222 bastion uptime",
            ),
            (
                "ssh -L 5432:db:5432 jump",
                NetworkListener,
                "ssh -i ~/.ssh/key host ls",
            ),
            (
                "ssh -o RemoteForward='8080 localhost:80' host",
                NetworkListener,
                "ssh -o StrictHostKeyChecking=no host",
            ),
            ("ssh -w 0:0 host", NetworkListener, "ssh host -- ls -L"),
            ("ngrok http 3000", NetworkListener, "ngrok version"),
            (
                "cloudflared tunnel --url http://localhost:8000",
                NetworkListener,
                "cloudflared --version",
            ),
            ("chisel server --reverse", NetworkListener, "chmod 600 x"),
            (
                "sshuttle -r user@host 0/0",
                NetworkListener,
                "ssh-keygen -t ed25519",
            ),
        ]);
    }
}
