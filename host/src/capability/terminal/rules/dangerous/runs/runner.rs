//! One program or command line a tool runs because of an option, a setting
//! or a variable, and how it came to run it.

/// What an option makes a tool run.
pub(crate) enum Runs {
    /// A program, by name or path, hidden in an option: flagged unless it
    /// only reads, filters or edits.
    Program(String),
    /// A shell command line hidden in an option: flagged unless every
    /// program in it only reads, filters or edits, and judged inside.
    Line(String),
    /// A command line the tool exists to run (`watch`, `git rebase --exec`,
    /// `script -c`): judged inside, like `sh -c`.
    Command(String),
}

/// One program or command line a tool runs, and how it came to (`rg --pre`).
pub(crate) struct Runner {
    pub(crate) how: String,
    pub(crate) runs: Runs,
}

/// Adds to `found` that `how` runs `runs`; a program given with arguments
/// (`tar -I "zstd -19"`) is a command line.
pub(super) fn push(found: &mut Vec<Runner>, how: String, runs: Runs) {
    let runs = match runs {
        Runs::Program(value) if value.contains(' ') => Runs::Line(value),
        runs => runs,
    };
    found.push(Runner { how, runs });
}
