//! A Markdown document as the documentation tests read it: its fenced
//! blocks, the `<!-- test: ... -->` directives written just above each, and
//! the commands of a `console` block with the output shown for each.

/// What a directive above a block asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Directive {
    /// `skip REASON`: the console block is not run, for this reason.
    Skip(String),
    /// `file PATH`: the block's text is written to PATH (in the scratch
    /// directory) before the commands that follow.
    File(String),
    /// `append PATH`: the block's text is appended to PATH.
    Append(String),
    /// `setup COMMAND`: a shell command run before the block (its output is
    /// not compared; it must succeed).
    Setup(String),
}

/// One fenced block.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    /// The line of its opening fence (1-based).
    pub(crate) line: usize,
    /// The info string: `console`, `toml`, ...
    pub(crate) info: String,
    /// How far its fence is indented (inside a list item).
    pub(crate) indent: usize,
    /// The directives above it, in order.
    pub(crate) directives: Vec<Directive>,
    /// Its lines, without the fence's indentation.
    pub(crate) lines: Vec<String>,
}

impl Block {
    /// The block's text, each line ending in a newline.
    pub(crate) fn text(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// Why the block is not run, if a directive says so.
    pub(crate) fn skipped(&self) -> Option<&str> {
        self.directives.iter().find_map(|d| match d {
            Directive::Skip(reason) => Some(reason.as_str()),
            _ => None,
        })
    }
}

/// A command of a console block and the output shown after it.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    /// The command line(s), without the `$ ` prompt.
    pub(crate) command: String,
    /// The output shown, without trailing blank lines.
    pub(crate) expected: String,
    /// The line (1-based, in the document) of the command's prompt.
    pub(crate) line: usize,
    /// The document lines (0-based, end exclusive) the output occupies.
    pub(crate) output_lines: std::ops::Range<usize>,
}

/// Every fenced block of `markdown`, with its directives.
pub(crate) fn blocks(markdown: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let Some(info) = trimmed.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let indent = lines[i].len() - trimmed.len();
        let start = i;
        let mut directives = Vec::new();
        let mut above = start;
        while above > 0 {
            let Some(directive) = parse_directive(lines[above - 1])? else {
                break;
            };
            directives.insert(0, directive);
            above -= 1;
        }
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && lines[i].trim() != "```" {
            let line = lines[i];
            let cut = line.len() - line.trim_start().len();
            body.push(line[cut.min(indent)..].to_string());
            i += 1;
        }
        if i == lines.len() {
            return Err(format!("line {}: a fence that is never closed", start + 1));
        }
        blocks.push(Block {
            line: start + 1,
            info: info.trim().to_string(),
            indent,
            directives,
            lines: body,
        });
        i += 1;
    }
    Ok(blocks)
}

/// `<!-- test: KIND ARGUMENT -->`, or `None` for any other line.
fn parse_directive(line: &str) -> Result<Option<Directive>, String> {
    let Some(inner) = line
        .trim()
        .strip_prefix("<!-- test:")
        .and_then(|rest| rest.strip_suffix("-->"))
    else {
        return Ok(None);
    };
    let inner = inner.trim();
    let (kind, argument) = inner.split_once(' ').unwrap_or((inner, ""));
    let argument = argument.trim().to_string();
    if argument.is_empty() {
        return Err(format!("directive {line:?} has no argument"));
    }
    Ok(Some(match kind {
        "skip" => Directive::Skip(argument),
        "file" => Directive::File(argument),
        "append" => Directive::Append(argument),
        "setup" => Directive::Setup(argument),
        _ => return Err(format!("unknown directive {line:?}")),
    }))
}

/// The commands of a console block and the output shown after each. A
/// command continues on the next line while a quote is open or the line
/// ends in a backslash.
pub(crate) fn steps(block: &Block) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut i = 0;
    let first = block.line; // the fence; the body starts one line later
    while i < block.lines.len() {
        let Some(command) = block.lines[i].strip_prefix("$ ") else {
            if steps.is_empty() && !block.lines[i].trim().is_empty() {
                return Err(format!(
                    "line {}: console blocks start with a `$ ` command",
                    first + 1 + i
                ));
            }
            i += 1;
            continue;
        };
        let line = first + 1 + i;
        let mut command = command.to_string();
        while !complete(&command) {
            i += 1;
            let Some(next) = block.lines.get(i) else {
                return Err(format!("line {line}: the command never ends"));
            };
            command.push('\n');
            command.push_str(next);
        }
        i += 1;
        let start = i;
        while i < block.lines.len() && !block.lines[i].starts_with("$ ") {
            i += 1;
        }
        let mut end = i;
        while end > start && block.lines[end - 1].trim().is_empty() {
            end -= 1;
        }
        steps.push(Step {
            command,
            expected: block.lines[start..end].join("\n"),
            line,
            // The fence is document line `first` (1-based), so body line j
            // is document line index `first + j` (0-based).
            output_lines: first + start..first + end,
        });
    }
    Ok(steps)
}

/// Whether `command` is complete: no quote left open, no trailing `\`.
fn complete(command: &str) -> bool {
    let (mut single, mut double, mut escaped) = (false, false, false);
    for c in command.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            _ => {}
        }
    }
    !single && !double && !escaped
}

#[test]
fn commands_continue_while_quoted_and_directives_attach() {
    let doc = "text\n<!-- test: setup touch a -->\n```console\n$ echo '{\n  \"a\": 1}'\nout\n\n$ ls \\\n  -a\n```\n";
    let blocks = blocks(doc).unwrap();
    assert_eq!(blocks.len(), 1);
    assert_eq!(
        blocks[0].directives,
        [Directive::Setup("touch a".to_string())]
    );
    let steps = steps(&blocks[0]).unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].command, "echo '{\n  \"a\": 1}'");
    assert_eq!(steps[0].expected, "out");
    assert_eq!(steps[0].output_lines, 5..6);
    assert_eq!(doc.lines().nth(5), Some("out"));
    assert_eq!(steps[1].command, "ls \\\n  -a");
    assert_eq!(steps[1].expected, "");
}
