//! The dangerous-command detector: finds command lines that destroy data, take
//! the machine down or run code from elsewhere, so the terminal can ask for
//! approval (or refuse) before running them.

mod args;
mod code;
mod exfiltration;
mod finding;
mod network;
mod process;
mod programs;
mod runs;
mod targets;
mod text;
mod tools;

use std::collections::{HashMap, HashSet};

pub(in crate::capability::terminal::rules) use finding::Finding;
pub use finding::{Danger, DangerCategory};

use self::runs::Runs;
use super::shell::{self, Invocation, SimpleCommand, Token};

/// How deep `sh -c`, `eval`, here-documents and `find -exec` are followed.
const MAX_DEPTH: usize = 8;

/// The longest `matched` text reported, in characters.
const MAX_MATCHED: usize = 200;

/// Characters of command strings and commands the detector may examine per
/// character of the line (plus a fixed allowance), so nested
/// `eval $(eval ...)` costs linear time; a line that needs more is flagged as
/// too complex to inspect.
const WORK_PER_CHAR: usize = 8;
const WORK_ALLOWANCE: usize = 1 << 16;

/// Every dangerous thing in `line`, in the order found, one entry per
/// category and offending command. Empty if nothing is recognized.
///
/// Looks at every simple command (substitutions, `sh -c` strings, `eval` and
/// here-documents fed to a shell included) with wrappers such as `sudo`, `env`
/// or `/bin/` peeled off, at whole pipelines (`curl | sh`) and at the raw
/// line (fork bombs). Nesting beyond what it inspects is itself flagged.
///
/// A tripwire, not a sandbox: it errs towards flagging (SQL keywords count in
/// any argument or here-document, even `echo "drop table" > notes.txt`, except
/// for search tools and git), and a determined line can still hide intent (a
/// variable as the program, a script file). Relative paths are not resolved
/// against the working directory.
pub fn detect(line: &str) -> Vec<Danger> {
    let mut detector = Detector {
        found: Vec::new(),
        seen: HashSet::new(),
        inspected: HashMap::new(),
        downloaded: HashSet::new(),
        budget: line.len().saturating_mul(WORK_PER_CHAR) + WORK_ALLOWANCE,
        exhausted: false,
        folded: false,
    };
    if let Some(folded) = text::fold_lookalikes(line) {
        detector.folded = true;
        detector.line(&folded, 0);
        detector.folded = false;
    }
    detector.line(line, 0);
    detector.found
}

/// True if [`detect`] finds anything.
pub fn is_dangerous(line: &str) -> bool {
    !detect(line).is_empty()
}

/// Why what `invocation` runs cannot be judged from the line: its program is
/// computed at run time, or an interpreter gets its code inline. `None` if
/// it can be judged.
pub(in crate::capability::terminal::rules) fn unjudgeable(
    invocation: &Invocation,
) -> Option<Finding> {
    let path = &invocation.path;
    if path.contains(['$', '`']) {
        return Some(Finding::new(
            DangerCategory::ComputedProgram,
            format!("the program {path:?} is computed when the line runs, so it cannot be judged"),
        ));
    }
    code::inline_code(invocation).map(|option| {
        Finding::new(
            DangerCategory::InlineCode,
            format!(
                "{} runs code given inline ({option}), which cannot be judged",
                invocation.program
            ),
        )
    })
}

/// The option or awk construct that hands `invocation` its code inline.
pub(in crate::capability::terminal::rules) fn inline_option(
    invocation: &Invocation,
) -> Option<String> {
    code::inline_code(invocation)
}

/// Walks a line, its commands and the command strings they run, collecting
/// dangers once each within a work budget.
struct Detector {
    found: Vec<Danger>,
    /// (category, matched) pairs already reported.
    seen: HashSet<(DangerCategory, String)>,
    /// Command strings already inspected, with the shallowest depth.
    inspected: HashMap<String, usize>,
    /// Files fetched from the network so far in the line (see
    /// [`code::downloaded_files`]).
    downloaded: HashSet<String>,
    /// Characters left to examine (see [`WORK_PER_CHAR`]).
    budget: usize,
    exhausted: bool,
    /// True while the line is read with control sequences and look-alike
    /// letters folded (see [`text::fold_lookalikes`]).
    folded: bool,
}

impl Detector {
    fn add(&mut self, category: DangerCategory, reason: impl Into<String>, matched: &str) {
        let matched = excerpt(matched);
        let mut reason = reason.into();
        if self.folded {
            reason.push_str(", hidden by control sequences or look-alike letters");
        }
        if self.seen.insert((category, matched.clone())) {
            self.found.push(Danger {
                category,
                reason,
                matched,
            });
        }
    }

    fn report(&mut self, finding: Finding, matched: &str) {
        self.add(finding.category, finding.reason, matched);
    }

    /// Takes `cost` characters from the work budget; false (and flagged once)
    /// when it runs out.
    fn spend(&mut self, cost: usize, matched: &str) -> bool {
        if self.exhausted {
            return false;
        }
        match self.budget.checked_sub(cost) {
            Some(left) => {
                self.budget = left;
                true
            }
            None => {
                self.exhausted = true;
                self.add(
                    DangerCategory::ShellIndirection,
                    "command strings too complex to inspect",
                    matched,
                );
                false
            }
        }
    }

    fn line(&mut self, line: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.add(
                DangerCategory::ShellIndirection,
                "command strings nested too deeply to inspect",
                line,
            );
            return;
        }
        if depth > 0 {
            if self.inspected.get(line).is_some_and(|&seen| seen <= depth) {
                return;
            }
            self.inspected.insert(line.to_owned(), depth);
        }
        if !self.spend(line.len(), line) {
            return;
        }
        // `$IFS` is whitespace by default: `rm${IFS}-rf${IFS}/`.
        let line = line.replace("${IFS}", " ").replace("$IFS", " ");
        if text::fork_bomb(&line) {
            self.add(DangerCategory::ForkBomb, "fork bomb", &line);
        }
        let parsed = shell::parse(&line);
        if parsed.too_complex {
            self.add(
                DangerCategory::ShellIndirection,
                "substitutions nested too deeply or too complex to inspect",
                &line,
            );
        }
        for pipeline in &parsed.pipelines {
            for command in pipeline {
                self.command(command, depth);
            }
            self.pipeline(pipeline, depth);
        }
    }

    /// Patterns across the stages of one pipeline: `curl | sh`, `base64 -d | sh`.
    fn pipeline(&mut self, pipeline: &[SimpleCommand], depth: usize) {
        if pipeline.len() < 2 {
            return;
        }
        let stages: Vec<Option<Invocation>> = pipeline
            .iter()
            .map(|command| shell::invocation(&shell::words(&shell::tokenize(&command.text))))
            .collect();
        let matched = pipeline
            .iter()
            .map(|command| command.text.as_str())
            .collect::<Vec<_>>()
            .join(" | ");
        // One pass: what earlier stages fetched, decoded, echoed or read
        // from a secret file.
        let (mut fetched, mut decoded) = (false, false);
        let mut echoed: Vec<String> = Vec::new();
        let mut secret: Option<String> = None;
        for (index, stage) in stages.iter().enumerate() {
            let Some(stage) = stage else {
                continue;
            };
            if let Some(file) = &secret
                && network::sends_stdin(stage)
            {
                self.add(
                    DangerCategory::SecretExfiltration,
                    format!("pipes the secret file {file} to {}", stage.program),
                    &matched,
                );
            }
            if secret.is_none() {
                let command = &pipeline[index];
                let tokens = shell::tokenize(&command.text);
                secret = exfiltration::reads_secret(stage, &tokens, command);
            }
            if index > 0 && code::executes_stdin(stage) {
                let program = &stage.program;
                let (category, what) = if fetched {
                    (DangerCategory::RemoteScript, "downloaded content")
                } else if decoded {
                    (DangerCategory::DecodedScript, "decoded content")
                } else {
                    (DangerCategory::ShellIndirection, "commands")
                };
                self.add(category, format!("pipes {what} into {program}"), &matched);
                for script in echoed.drain(..) {
                    self.line(&script, depth + 1);
                }
            }
            fetched |= code::is_fetcher(stage);
            decoded |= code::is_decoder(stage);
            echoed.extend(code::echoed_text(stage));
        }
    }

    fn command(&mut self, command: &SimpleCommand, depth: usize) {
        if !self.spend(command.text.len(), &command.text) {
            return;
        }
        let tokens = shell::tokenize(&command.text);
        for token in &tokens {
            if let Token::Redirect { op, target } = token
                && let Some(finding) = targets::redirect(op, target)
            {
                self.report(finding, &command.text);
            }
        }
        let invocation = shell::invocation(&shell::words(&tokens));
        let program = invocation.as_ref().map(|i| i.program.as_str());
        if !program.is_some_and(text::searches_text) {
            let sql = std::iter::once(&command.text)
                .chain(&command.heredocs)
                .find_map(|text| text::destructive_sql(text));
            if let Some(reason) = sql {
                self.add(DangerCategory::DestructiveSql, reason, &command.text);
            }
        }
        let Some(invocation) = invocation else {
            return;
        };
        if let Some(script) = code::script_file(&invocation)
            && self.downloaded.contains(&script)
        {
            self.add(
                DangerCategory::RemoteScript,
                format!("runs the downloaded script {script}"),
                &command.text,
            );
        }
        if let Some(reason) = exfiltration::sends_secret(&invocation, &tokens, command) {
            self.add(DangerCategory::SecretExfiltration, reason, &command.text);
        }
        self.downloaded
            .extend(code::downloaded_files(&invocation, &tokens));
        self.invocation(&invocation, &tokens, command, &command.text, depth);
    }

    /// What one program does, what it runs through `find -exec`, and the
    /// command strings and substitutions it hands to a shell.
    fn invocation(
        &mut self,
        invocation: &Invocation,
        tokens: &[Token],
        command: &SimpleCommand,
        matched: &str,
        depth: usize,
    ) {
        for finding in programs::dangers(invocation) {
            self.report(finding, matched);
        }
        // `$(echo rm) -rf /`: a program computed by printing a constant is
        // that constant, and judged as if written out.
        if let Some(program) = code::printed_constant(&invocation.path) {
            let line = std::iter::once(program)
                .chain(invocation.args.iter().map(|arg| shell::quote(arg)))
                .collect::<Vec<_>>()
                .join(" ");
            self.line(&line, depth + 1);
        } else if let Some(finding) = unjudgeable(invocation) {
            self.report(finding, matched);
        }
        let here_string = tokens
            .iter()
            .any(|token| matches!(token, Token::Redirect { op, .. } if op.ends_with("<<<")));
        if (here_string || !command.heredocs.is_empty())
            && code::is_interpreter(&invocation.program)
            && code::executes_stdin(invocation)
        {
            self.add(
                DangerCategory::InlineCode,
                format!(
                    "{} runs code given in a here-document, which cannot be judged",
                    invocation.program
                ),
                matched,
            );
        }
        let words = std::iter::once(&invocation.path).chain(&invocation.args);
        if let Some(address) = words
            .filter_map(|word| tools::metadata_address(word))
            .next()
        {
            self.add(
                DangerCategory::CloudMetadata,
                format!(
                    "reaches the cloud metadata service ({address}), which hands out credentials"
                ),
                matched,
            );
        }
        if depth < MAX_DEPTH {
            let detached = SimpleCommand::default();
            for inner in shell::exec_commands(invocation) {
                self.invocation(&inner, &[], &detached, matched, depth + 1);
            }
        }
        if depth < MAX_DEPTH {
            for runner in runs::runners(invocation) {
                self.runner(runner, matched, depth);
            }
        }
        if matches!(invocation.program.as_str(), "ssh" | "autossh") {
            // What runs on the other machine is judged like a local line.
            let remote = match network::ssh_command(&invocation.args) {
                Some(remote) => vec![remote],
                None => command.heredocs.clone(),
            };
            for line in remote {
                self.line(&line, depth + 1);
            }
        }
        if code::runs_code(invocation) {
            self.substituted_code(invocation, command, matched);
        }
        // A command string handed to a shell is judged by what it runs; one
        // run as another user (`su -c`) is flagged as well.
        let payloads = shell::shell_payloads(invocation, tokens, command);
        if !payloads.is_empty() && matches!(invocation.program.as_str(), "su" | "runuser") {
            self.add(
                DangerCategory::ShellIndirection,
                format!(
                    "runs a command string as another user with {}",
                    invocation.program
                ),
                matched,
            );
        }
        for payload in payloads {
            self.line(&payload, depth + 1);
        }
    }

    /// A program or command line `runner` makes a tool run: judged by what
    /// it runs, and flagged unless that only reads, filters or edits.
    fn runner(&mut self, runner: runs::Runner, matched: &str, depth: usize) {
        let how = runner.how;
        match runner.runs {
            Runs::Program(program) => {
                if !runs::harmless(&program) {
                    self.add(
                        DangerCategory::ExecOption,
                        format!("runs {program} through {how}"),
                        matched,
                    );
                }
            }
            Runs::Line(line) => {
                let programs = runs::programs_of(&line);
                if programs.is_empty() || !programs.iter().all(|p| runs::harmless(p)) {
                    self.add(
                        DangerCategory::ExecOption,
                        format!("runs {:?} through {how}", excerpt(&line)),
                        matched,
                    );
                }
                self.line(&line, depth + 1);
            }
            Runs::Command(line) => self.line(&line, depth + 1),
        }
    }

    /// `bash <(curl ...)`, `sh -c "$(curl ...)"`, `eval "$(base64 -d ...)"`.
    fn substituted_code(&mut self, runner: &Invocation, command: &SimpleCommand, matched: &str) {
        for substitution in &command.substitutions {
            if !self.spend(substitution.len(), matched) {
                return;
            }
            let sources: Vec<Invocation> = shell::parse(substitution)
                .commands()
                .filter_map(|c| shell::invocation(&shell::words(&shell::tokenize(&c.text))))
                .collect();
            let program = &runner.program;
            if sources.iter().any(code::is_fetcher) {
                self.add(
                    DangerCategory::RemoteScript,
                    format!("runs downloaded content with {program}"),
                    matched,
                );
            } else if sources.iter().any(code::is_decoder) {
                self.add(
                    DangerCategory::DecodedScript,
                    format!("runs decoded content with {program}"),
                    matched,
                );
            }
        }
    }
}

/// Up to [`MAX_MATCHED`] characters of `text`, trimmed.
fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_MATCHED) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
