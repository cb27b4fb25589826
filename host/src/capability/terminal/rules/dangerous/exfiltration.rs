//! Secret files sent over the network: named in a request (`curl -d @F`,
//! `wget --post-file=F`, `scp F host:`), read into one (`--post-data="$(cat
//! F)"`), fed to a network tool's stdin (`nc host 80 < F`), or piped into
//! one (`cat F | nc host 80`).

use super::network::{is_secret, sent_files};
use crate::capability::terminal::rules::shell::{self, Invocation, SimpleCommand, Token};

/// Programs that reach other machines.
#[rustfmt::skip]
const NETWORK_TOOLS: &[&str] = &[
    "curl", "curlie", "wget", "wget2", "http", "https", "xh", "xhs", "nc", "ncat", "netcat",
    "nc.traditional", "nc.openbsd", "socat", "ssh", "scp", "sftp", "rsync", "rclone", "aws",
    "gsutil", "gcloud", "ftp", "lftp", "tftp", "telnet", "mail", "mailx", "sendmail", "msmtp",
    "mutt", "openssl", "gh",
];

/// True if `program` reaches other machines.
pub(super) fn is_network_tool(program: &str) -> bool {
    NETWORK_TOOLS.contains(&program)
}

/// The secret file a network tool sends, described with how; `None` if it
/// sends none.
pub(super) fn sends_secret(
    invocation: &Invocation,
    tokens: &[Token],
    command: &SimpleCommand,
) -> Option<String> {
    let program = invocation.program.as_str();
    if !is_network_tool(program) {
        return None;
    }
    if let Some(file) = sent_files(invocation).into_iter().find(|f| is_secret(f)) {
        return Some(format!(
            "sends the secret file {file} over the network ({program})"
        ));
    }
    if let Some(file) = redirected_input(tokens) {
        return Some(format!(
            "sends the secret file {file} over the network ({program} < {file})"
        ));
    }
    substituted_secret(command).map(|file| {
        format!("sends the contents of the secret file {file} over the network ({program})")
    })
}

/// The secret file a command reads: an operand or option value naming one,
/// a `<` redirection from one, or a substitution reading one.
pub(super) fn reads_secret(
    invocation: &Invocation,
    tokens: &[Token],
    command: &SimpleCommand,
) -> Option<String> {
    let operand = invocation
        .args
        .iter()
        .map(|arg| match arg.split_once('=') {
            Some((option, value)) if option.starts_with('-') => value,
            _ => arg.as_str(),
        })
        .find(|arg| !arg.starts_with('-') && is_secret(arg));
    operand
        .map(str::to_owned)
        .or_else(|| redirected_input(tokens))
        .or_else(|| substituted_secret(command))
}

/// The secret file a `<` redirection reads, if any.
fn redirected_input(tokens: &[Token]) -> Option<String> {
    tokens.iter().find_map(|token| match token {
        Token::Redirect { op, target }
            if matches!(
                op.trim_start_matches(|c: char| c.is_ascii_digit()),
                "<" | "<>"
            ) && is_secret(target) =>
        {
            Some(target.clone())
        }
        _ => None,
    })
}

/// The secret file a `$(...)` or backtick substitution in `command` reads:
/// `$(cat F)`, `$(< F)`, `$(base64 -w0 F)`.
fn substituted_secret(command: &SimpleCommand) -> Option<String> {
    command.substitutions.iter().find_map(|substitution| {
        if let Some(file) = substitution.trim().strip_prefix('<')
            && is_secret(file.trim())
        {
            return Some(file.trim().to_owned());
        }
        shell::parse(substitution).commands().find_map(|inner| {
            let tokens = shell::tokenize(&inner.text);
            let invocation = shell::invocation(&shell::words(&tokens))?;
            reads_secret(&invocation, &tokens, inner)
        })
    })
}
