//! Rules for programs that act on the whole system: formatting and
//! partitioning disks, stopping services, shutting down, and signals that
//! kill by name.

use crate::capability::terminal::rules::dangerous::args::{has_flag, operands};
use crate::capability::terminal::rules::dangerous::targets;
use crate::capability::terminal::rules::shell::Invocation;

/// `sfdisk` options that only read (case matters: `-f` is `--force`).
#[rustfmt::skip]
const SFDISK_READ_ONLY: &[&str] = &[
    "-l", "--list", "-d", "--dump", "-J", "--json", "-s", "--show-size", "-V", "--verify",
    "-F", "--list-free", "-g", "--show-geometry",
];

/// `sgdisk` options that write (matched as prefixes, so `-Z` covers `-Z1`).
#[rustfmt::skip]
const SGDISK_WRITES: &[&str] = &[
    "-Z", "-z", "-o", "-d", "-n", "-g", "--zap", "--clear", "--delete", "--new", "--mbrtogpt",
];

/// `parted` commands that write.
#[rustfmt::skip]
const PARTED_WRITES: &[&str] = &[
    "mklabel", "mktable", "mkpart", "mkpartfs", "rm", "resizepart", "resize", "rescue", "mkfs",
    "set", "toggle", "name",
];

/// `parted` arguments that make it only read.
#[rustfmt::skip]
const PARTED_READ_ONLY: &[&str] = &["-l", "--list", "print", "-h", "--help", "-v", "--version"];

/// `systemctl` options that take a value before the subcommand.
#[rustfmt::skip]
const SYSTEMCTL_WITH_VALUE: &[&str] = &[
    "-H", "--host", "-M", "--machine", "-t", "--type", "-p", "--property", "-s", "--signal",
    "-n", "--lines", "-o", "--output", "--root", "--kill-whom",
];

/// `systemctl` subcommands that power off, reboot or leave normal operation.
#[rustfmt::skip]
const SYSTEMCTL_POWER: &[&str] = &[
    "poweroff", "reboot", "halt", "kexec", "suspend", "hibernate", "hybrid-sleep",
    "suspend-then-hibernate", "emergency", "rescue", "soft-reboot",
];

/// The subcommand of a `systemctl` invocation, lower-cased.
fn systemctl_subcommand(args: &[String]) -> Option<String> {
    operands(args, SYSTEMCTL_WITH_VALUE)
        .first()
        .map(|s| s.to_lowercase())
}

/// Formatting, partitioning, wiping or removing a disk or volume.
pub(super) fn disk_format(program: &str, args: &[String]) -> Option<String> {
    let lower: Vec<String> = args.iter().map(|a| a.to_lowercase()).collect();
    let mentions = |words: &[&str]| lower.iter().any(|a| words.contains(&a.as_str()));
    let first = lower.first().map(String::as_str).unwrap_or_default();
    let reason = match program {
        p if p.starts_with("mkfs")
            || matches!(
                p,
                "mke2fs" | "mkswap" | "mkdosfs" | "mkntfs" | "mkexfatfs" | "newfs"
            ) =>
        {
            formats_a_device(p, args)?;
            format!("formats a filesystem ({p})")
        }
        "wipefs" if has_flag(args, 'a', &["--all", "--offset"]) || has_flag(args, 'o', &[]) => {
            "erases filesystem signatures (wipefs)".to_owned()
        }
        "fdisk" if !has_flag(args, 'l', &["--list"]) => {
            "edits a partition table (fdisk)".to_owned()
        }
        "sfdisk" if !args.iter().any(|a| SFDISK_READ_ONLY.contains(&a.as_str())) => {
            "edits a partition table (sfdisk)".to_owned()
        }
        "cfdisk" | "gdisk" => format!("edits a partition table ({program})"),
        "sgdisk"
            if args
                .iter()
                .any(|a| SGDISK_WRITES.iter().any(|w| a.starts_with(w))) =>
        {
            "edits a partition table (sgdisk)".to_owned()
        }
        "parted" if mentions(PARTED_WRITES) || !mentions(PARTED_READ_ONLY) => {
            "edits a partition table (parted)".to_owned()
        }
        "blkdiscard" => "discards every block of a device (blkdiscard)".to_owned(),
        "cryptsetup" if mentions(&["luksformat", "erase", "lukserase", "reencrypt"]) => {
            "destroys an encrypted volume's data (cryptsetup)".to_owned()
        }
        "lvremove" | "vgremove" | "pvremove" => format!("removes a storage volume ({program})"),
        "zpool" if matches!(first, "destroy" | "labelclear") => {
            format!("destroys a pool (zpool {first})")
        }
        "zfs" if first == "destroy" => "destroys a dataset (zfs destroy)".to_owned(),
        "diskutil"
            if first.starts_with("erase")
                || matches!(
                    first,
                    "partitiondisk" | "zerodisk" | "randomdisk" | "secureerase" | "reformat"
                ) =>
        {
            format!("erases a disk (diskutil {first})")
        }
        _ => return None,
    };
    Some(reason)
}

/// `mke2fs` options that take a value.
#[rustfmt::skip]
const MKE2FS_WITH_VALUE: &[&str] = &[
    "-b", "-C", "-d", "-E", "-e", "-g", "-G", "-i", "-I", "-J", "-l", "-L", "-m", "-M", "-N",
    "-o", "-O", "-r", "-t", "-T", "-U", "-z",
];

/// `Some` if a formatter's operands name a device (or a path computed when
/// the line runs) and it is not a dry run (`mke2fs -n`) or a version query.
/// A formatter pointed at an image file formats only that file.
fn formats_a_device(program: &str, args: &[String]) -> Option<()> {
    let ext = program == "mke2fs" || program == "mkfs" || program.starts_with("mkfs.ext");
    // Only ext's formatters are known well enough to skip option values;
    // elsewhere every operand-looking word counts.
    let with_value = if ext { MKE2FS_WITH_VALUE } else { &[] };
    let mut iter = args.iter();
    let mut operands = Vec::new();
    while let Some(arg) = iter.next() {
        match arg.strip_prefix('-') {
            Some("-help" | "-version") => return None,
            Some(flags) if ext && !flags.starts_with('-') && !flags.is_empty() => {
                // A cluster ends at the first option that takes a value.
                for (i, flag) in flags.char_indices() {
                    if matches!(flag, 'n' | 'V') {
                        return None;
                    }
                    if with_value.contains(&format!("-{flag}").as_str()) {
                        if i + flag.len_utf8() == flags.len() {
                            iter.next();
                        }
                        break;
                    }
                }
            }
            Some(flags) if !flags.is_empty() => {}
            _ => operands.push(arg.as_str()),
        }
    }
    operands
        .iter()
        .any(|operand| {
            operand.contains(['$', '`'])
                || targets::absolute(operand).is_some_and(|path| targets::is_device(&path))
        })
        .then_some(())
}

/// Stopping, disabling or removing a system service.
pub(super) fn service_stop(invocation: &Invocation) -> Option<String> {
    let args = invocation.args.as_slice();
    let lower = |i: usize| args.get(i).map(|a| a.to_lowercase()).unwrap_or_default();
    match invocation.program.as_str() {
        "systemctl" => {
            let subcommand = systemctl_subcommand(args)?;
            matches!(
                subcommand.as_str(),
                "stop"
                    | "disable"
                    | "mask"
                    | "kill"
                    | "isolate"
                    | "restart"
                    | "try-restart"
                    | "reload-or-restart"
                    | "try-reload-or-restart"
                    | "condrestart"
            )
            .then(|| format!("stops, restarts or disables a service (systemctl {subcommand})"))
        }
        "service" | "rc-service" => {
            let action = lower(1);
            matches!(action.as_str(), "stop" | "restart" | "force-reload").then(|| {
                format!(
                    "stops or restarts a service ({} {action})",
                    invocation.program
                )
            })
        }
        "launchctl" => {
            let subcommand = lower(0);
            let kills = subcommand == "kickstart" && has_flag(args, 'k', &[]);
            (kills
                || matches!(
                    subcommand.as_str(),
                    "unload" | "stop" | "bootout" | "remove" | "disable" | "kill"
                ))
            .then(|| format!("stops, restarts or removes a service (launchctl {subcommand})"))
        }
        "sv" => {
            let subcommand = lower(0);
            matches!(
                subcommand.as_str(),
                "stop" | "down" | "kill" | "exit" | "force-stop" | "force-shutdown"
            )
            .then(|| format!("stops a service (sv {subcommand})"))
        }
        _ if invocation.path.starts_with("/etc/init.d/")
            || invocation.path.starts_with("/etc/rc.d/") =>
        {
            (lower(0) == "stop").then(|| format!("stops a service ({} stop)", invocation.path))
        }
        _ => None,
    }
}

/// Shutting down, rebooting, suspending or changing the runlevel.
pub(super) fn shutdown(program: &str, args: &[String]) -> Option<String> {
    let first = args.first().map(|a| a.to_lowercase()).unwrap_or_default();
    match program {
        "shutdown" if !has_flag(args, 'c', &["--cancel"]) => {
            Some("shuts down or reboots the machine (shutdown)".to_owned())
        }
        "reboot" | "halt" | "poweroff" => {
            Some(format!("shuts down or reboots the machine ({program})"))
        }
        "init" | "telinit" if matches!(first.as_str(), "0" | "1" | "6" | "s" | "single") => {
            Some(format!("changes the runlevel ({program} {first})"))
        }
        "systemctl" => {
            let subcommand = systemctl_subcommand(args)?;
            SYSTEMCTL_POWER
                .contains(&subcommand.as_str())
                .then(|| format!("shuts down or reboots the machine (systemctl {subcommand})"))
        }
        "kexec" if has_flag(args, 'e', &["--exec"]) => {
            Some("reboots into another kernel (kexec -e)".to_owned())
        }
        _ => None,
    }
}

/// True if `pkill` arguments ask for SIGKILL.
pub(super) fn kill_signal(args: &[String]) -> bool {
    let is_kill = |s: &str| matches!(s.to_uppercase().as_str(), "9" | "KILL" | "SIGKILL");
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--signal" || arg == "-s" {
            if iter.next().is_some_and(|s| is_kill(s)) {
                return true;
            }
        } else if let Some(signal) = arg.strip_prefix("--signal=") {
            if is_kill(signal) {
                return true;
            }
        } else if let Some(signal) = arg.strip_prefix('-')
            && is_kill(signal)
        {
            return true;
        }
    }
    false
}
