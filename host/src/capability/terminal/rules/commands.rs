//! Terminal command rules: `terminal.allow_commands` and
//! `terminal.deny_commands` patterns, checked against every simple command of
//! a line (see [`split_commands`]).

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use super::dangerous::{self, DangerCategory};
use super::shell::{self, Invocation, SimpleCommand, Token};
use crate::policy::wildcard;

/// How deep `sh -c`, `eval` and here-documents fed to a shell are followed
/// when looking for denied commands.
const MAX_PAYLOAD_DEPTH: usize = 8;

/// Characters of shell strings that may be parsed per character of the line
/// (plus a fixed allowance) when following them; a line that needs more is
/// refused as too complex.
const WORK_PER_CHAR: usize = 32;
const WORK_ALLOWANCE: usize = 1 << 16;

/// Splits a command line into its simple commands.
///
/// Splits at `;`, `&&`, `||`, `|`, `|&`, `&`, newlines and parentheses, and
/// adds the contents of `$(...)`, backticks and `<(...)`/`>(...)` as commands
/// of their own (inner ones first). Quotes, backslashes, comments, `$'...'`,
/// `${...}`, arithmetic and here-documents are understood well enough that
/// they cannot hide a command. Whitespace outside quotes is collapsed and
/// grouping words (`if`, `then`, `{`, `!`, ...) are dropped. Not a full shell
/// parser: when unsure it finds more commands rather than fewer.
pub fn split_commands(line: &str) -> Vec<String> {
    shell::parse(line)
        .commands()
        .map(|command| command.text.clone())
        .collect()
}

/// A command pattern: `*` matches any run of characters (spaces and `/`
/// included), everything else is literal.
///
/// A pattern is compared with one simple command at a time, after both are
/// split into shell words and re-joined with single spaces (quotes removed,
/// redirections written as `>file`). Deny patterns also match the command with
/// wrappers peeled off (`sudo`, `env VAR=x`, `command`, `exec`, `nohup`,
/// `time`, `xargs`, leading `VAR=value`, a path on the program), so
/// `rm -rf /*` denies `sudo /bin/rm -rf /`. Allow patterns match only the
/// command as written, so `git *` does not allow `sudo git push`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandPattern {
    text: String,
    canonical: String,
}

impl CommandPattern {
    /// Parses a pattern; it must be one simple command.
    pub fn parse(text: &str) -> Result<Self, CommandPatternError> {
        let error = |problem: &str| CommandPatternError {
            pattern: text.to_owned(),
            problem: problem.to_owned(),
        };
        let parsed = shell::parse(text);
        let mut commands = parsed.commands();
        let Some(command) = commands.next() else {
            return Err(error("is empty"));
        };
        if commands.next().is_some() || !command.heredocs.is_empty() {
            return Err(error(
                "spans several commands; patterns match one simple command at a time \
                 (no ';', '&&', '||', '|', '&', '$(...)' or newlines)",
            ));
        }
        Ok(Self {
            text: text.trim().to_owned(),
            canonical: render(&shell::tokenize(&command.text)),
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// True if this pattern matches the simple command `command` as a deny
    /// pattern would (as written, or with wrappers peeled off).
    pub fn matches(&self, command: &str) -> bool {
        self.matches_any(&Views::of(command))
    }

    /// The pattern up to its first wildcard.
    fn literal_part(&self) -> &str {
        self.text.split('*').next().unwrap_or_default()
    }

    fn matches_written(&self, views: &Views) -> bool {
        wildcard::matches(&self.canonical, &views.written)
    }

    fn matches_any(&self, views: &Views) -> bool {
        self.matches_written(views)
            || views
                .peeled
                .as_deref()
                .is_some_and(|peeled| wildcard::matches(&self.canonical, peeled))
    }
}

impl FromStr for CommandPattern {
    type Err = CommandPatternError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl fmt::Display for CommandPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A terminal command pattern in the config that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("terminal command pattern {pattern:?} {problem}")]
pub struct CommandPatternError {
    /// The pattern as written.
    pub pattern: String,
    /// What is wrong with it.
    pub problem: String,
}

/// The texts a simple command is matched as.
struct Views {
    /// Words and redirections re-joined, unquoted.
    written: String,
    /// The same with wrappers peeled off and the program's base name,
    /// lower-cased; `None` if no program is left.
    peeled: Option<String>,
}

impl Views {
    fn of(command: &str) -> Self {
        let tokens = shell::tokenize(command);
        let invocation = shell::invocation(&shell::words(&tokens));
        Self::of_tokens(&tokens, invocation.as_ref())
    }

    fn of_tokens(tokens: &[Token], invocation: Option<&Invocation>) -> Self {
        let peeled = invocation.map(|invocation| {
            let mut parts = vec![invocation.program.clone()];
            parts.extend(invocation.args.iter().cloned());
            parts.extend(
                tokens
                    .iter()
                    .filter(|token| matches!(token, Token::Redirect { .. }))
                    .map(Token::render),
            );
            parts.join(" ")
        });
        Self {
            written: render(tokens),
            peeled,
        }
    }
}

fn render(tokens: &[Token]) -> String {
    tokens
        .iter()
        .map(Token::render)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A profile's terminal command rules. With no allow patterns every command
/// is allowed (subject to deny); with some, every simple command of a line,
/// substitutions included, must match one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandRules {
    /// `terminal.allow_commands`.
    pub allow: Vec<CommandPattern>,
    /// `terminal.deny_commands`.
    pub deny: Vec<CommandPattern>,
}

impl CommandRules {
    /// Parses the allow and deny pattern lists.
    pub fn parse<S: AsRef<str>>(allow: &[S], deny: &[S]) -> Result<Self, CommandPatternError> {
        let parse_all = |texts: &[S]| -> Result<Vec<_>, CommandPatternError> {
            texts
                .iter()
                .map(|text| CommandPattern::parse(text.as_ref()))
                .collect()
        };
        Ok(Self {
            allow: parse_all(allow)?,
            deny: parse_all(deny)?,
        })
    }

    /// Checks a command line: refused if any simple command matches a deny
    /// pattern, or if allow patterns are set and some simple command
    /// (substitutions included) matches none of them.
    ///
    /// Deny patterns also see the commands a program hands on: `sh -c` and
    /// `eval` strings, here-documents fed to a shell and `find -exec`
    /// commands. Allow patterns judge only the commands of the line itself, so
    /// allowing `bash *` allows whatever bash is told to run.
    ///
    /// These patterns are a policy, not a sandbox: a determined line can run a
    /// command no pattern mentions (a variable as the program, a script file).
    /// The dangerous-command detector and the sandbox's limits back them up.
    pub fn check(&self, line: &str) -> Result<(), CommandRefusal> {
        let parsed = shell::parse(line);
        if parsed.too_complex {
            return Err(CommandRefusal::TooComplex);
        }
        if !self.deny.is_empty() {
            let mut walk = PayloadWalk {
                seen: HashSet::new(),
                budget: line.len().saturating_mul(WORK_PER_CHAR) + WORK_ALLOWANCE,
            };
            self.check_deny(&parsed, 0, &mut walk)?;
        }
        if self.allow.is_empty() {
            return Ok(());
        }
        for command in parsed.commands() {
            let tokens = shell::tokenize(&command.text);
            let invocation = shell::invocation(&shell::words(&tokens));
            let views = Views::of_tokens(&tokens, invocation.as_ref());
            let matching = self.allow.iter().find(|p| p.matches_written(&views));
            let Some(pattern) = matching else {
                return Err(CommandRefusal::NotAllowed {
                    command: command.text.clone(),
                });
            };
            // A pattern allows what cannot be judged only by naming it: a
            // computed program never, inline code by its option
            // (`python3 -c *`), not by a wildcard that happens to cover it.
            if let Some(finding) = invocation.as_ref().and_then(dangerous::unjudgeable) {
                let named = match finding.category {
                    DangerCategory::InlineCode => invocation
                        .as_ref()
                        .and_then(dangerous::inline_option)
                        .is_some_and(|option| pattern.literal_part().contains(&option)),
                    _ => false,
                };
                if !named {
                    return Err(CommandRefusal::Unjudgeable {
                        command: command.text.clone(),
                        reason: finding.reason,
                    });
                }
            }
        }
        Ok(())
    }

    fn check_deny(
        &self,
        parsed: &shell::ParsedLine,
        depth: usize,
        walk: &mut PayloadWalk,
    ) -> Result<(), CommandRefusal> {
        for command in parsed.commands() {
            let tokens = shell::tokenize(&command.text);
            let invocation = shell::invocation(&shell::words(&tokens));
            self.check_views(&Views::of_tokens(&tokens, invocation.as_ref()), command)?;
            let Some(invocation) = invocation else {
                continue;
            };
            let detached = SimpleCommand::default();
            let mut payloads = shell::shell_payloads(&invocation, &tokens, command);
            for inner in shell::exec_commands(&invocation) {
                self.check_views(&Views::of_tokens(&[], Some(&inner)), command)?;
                payloads.extend(shell::shell_payloads(&inner, &[], &detached));
            }
            for payload in payloads {
                if !walk.seen.insert(payload.clone()) {
                    continue;
                }
                walk.budget = walk
                    .budget
                    .checked_sub(payload.len())
                    .ok_or(CommandRefusal::TooComplex)?;
                let inner = shell::parse(&payload);
                if depth >= MAX_PAYLOAD_DEPTH || inner.too_complex {
                    return Err(CommandRefusal::TooComplex);
                }
                self.check_deny(&inner, depth + 1, walk)?;
            }
        }
        Ok(())
    }

    /// Refuses `command` if a deny pattern matches one of `views`.
    fn check_views(&self, views: &Views, command: &SimpleCommand) -> Result<(), CommandRefusal> {
        match self.deny.iter().find(|p| p.matches_any(views)) {
            Some(pattern) => Err(CommandRefusal::Denied {
                command: command.text.clone(),
                pattern: pattern.as_str().to_owned(),
            }),
            None => Ok(()),
        }
    }
}

/// State shared while following shell strings through one line.
struct PayloadWalk {
    /// Payloads already checked (each is checked once).
    seen: HashSet<String>,
    /// Characters left to parse (see [`WORK_PER_CHAR`]).
    budget: usize,
}

/// Why a command line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandRefusal {
    /// A simple command matches a deny pattern.
    #[error(
        "command {command:?} matches terminal.deny_commands pattern {pattern:?}; \
         remove or narrow that pattern to allow it"
    )]
    Denied {
        /// The simple command that matched.
        command: String,
        /// The deny pattern as written.
        pattern: String,
    },
    /// A simple command matches no allow pattern.
    #[error(
        "command {command:?} is not matched by any terminal.allow_commands pattern; \
         add one such as {suggestion:?} to allow it",
        suggestion = suggest_pattern(command)
    )]
    NotAllowed {
        /// The simple command that matched nothing.
        command: String,
    },
    /// A simple command whose program or code cannot be judged from the line.
    #[error(
        "command {command:?} cannot be checked against terminal.allow_commands: {reason}; \
         write the program by name, or allow inline code with a pattern that names its \
         option (\"python3 -c *\")"
    )]
    Unjudgeable {
        /// The simple command.
        command: String,
        /// What cannot be judged.
        reason: String,
    },
    /// The line nests substitutions or shell strings too deeply to check.
    #[error(
        "command line nests substitutions or shell strings too deeply to check against \
         terminal.allow_commands and terminal.deny_commands; split it into simpler commands"
    )]
    TooComplex,
}

/// `git push origin main` -> `git *`.
fn suggest_pattern(command: &str) -> String {
    let program = shell::words(&shell::tokenize(command))
        .into_iter()
        .next()
        .unwrap_or_default();
    format!("{program} *")
}

#[cfg(test)]
mod tests;
