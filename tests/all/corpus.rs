//! The dangerous-command detector scored on a public corpus of command lines
//! labelled by peers' own test suites (`tests/corpus/`, with sources and
//! commits), in two splits: the rows the detector is tuned on
//! (`commands.tsv`) and rows held out from tuning (`held-out.tsv`). Prints
//! both scores; fails if either drops below its recorded floors.
//!
//! A dangerous line may also be marked `contained:<mechanism>` in the
//! corpus: the terminal's kernel sandbox makes it harmless whatever the
//! profile grants (see `tests/corpus/README.md`). Those are counted apart
//! from the lines the detector flags.
//!
//! Run alone to see the tuned split's misses and false alarms (the held-out
//! split prints only its figures, so that nobody tunes against it):
//! `cargo test -p toolhost-tests --test all corpus -- --nocapture`.

use std::collections::{BTreeMap, HashSet};

use toolhost::capability::terminal::rules::dangerous;

/// One labelled line.
struct Case {
    dangerous: bool,
    command: String,
    source: String,
    /// The sandbox mechanism that makes the line harmless, if any.
    contained: Option<String>,
}

/// The sandbox mechanisms a line may be marked as contained by.
const MECHANISMS: &[&str] = &[
    // No capabilities in any namespace that owns the host's resources:
    // rebooting, loading modules, mounting, raw I/O, changing the firewall.
    "no-caps",
    // `no_new_privs`: setuid programs (`sudo`, `su`) cannot raise privileges.
    "no-new-privs",
    // A PID namespace of its own: only the command's own processes can be
    // seen or signalled.
    "pid-ns",
];

/// The peers whose test suites the rows come from.
const PEERS: &[&str] = &[
    "NousResearch/hermes-agent",
    "openai/codex",
    "All-Hands-AI/OpenHands",
    "OpenHands/software-agent-sdk",
    "block/goose",
];

const TUNED: &str = include_str!("../corpus/commands.tsv");
const HELD_OUT: &str = include_str!("../corpus/held-out.tsv");

/// Decodes the corpus's escapes (`\\`, `\t`, `\n`, `\r`, `\xHH`) in one pass.
fn decode(field: &str) -> String {
    let mut out = String::new();
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                out.push(char::from(u8::from_str_radix(&hex, 16).unwrap()));
            }
            other => panic!("bad escape \\{other:?} in {field:?}"),
        }
    }
    out
}

fn corpus(text: &str) -> Vec<Case> {
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("label\tcommand\tsource\tcommit\tsandbox")
    );
    lines
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 5, "{line:?}");
            let repository = fields[2].split(':').next().unwrap();
            assert!(PEERS.contains(&repository), "{line:?}");
            assert!(
                fields[3].len() == 40 && fields[3].bytes().all(|b| b.is_ascii_hexdigit()),
                "{line:?}"
            );
            let contained = match fields[4] {
                "" => None,
                note => {
                    let mechanism = note.strip_prefix("contained:").expect(note);
                    assert!(MECHANISMS.contains(&mechanism), "{note}");
                    assert_eq!(fields[0], "dangerous", "{line:?}");
                    Some(mechanism.to_string())
                }
            };
            Case {
                contained,
                dangerous: match fields[0] {
                    "dangerous" => true,
                    "safe" => false,
                    other => panic!("label {other:?}"),
                },
                command: decode(fields[1]),
                source: fields[2].to_string(),
            }
        })
        .collect()
}

/// How the detector did on one split.
#[derive(Default)]
struct Score<'a> {
    dangerous: usize,
    flagged: usize,
    contained: usize,
    covered: usize,
    safe: usize,
    false_alarms: usize,
    /// Misses by the test file they come from.
    missed: BTreeMap<&'a str, Vec<&'a str>>,
    /// Contained lines the detector does not flag, by mechanism.
    contained_only: BTreeMap<&'a str, Vec<&'a str>>,
    /// Safe lines flagged, by the first category found.
    alarms: BTreeMap<String, Vec<&'a str>>,
}

fn share(part: usize, whole: usize) -> f64 {
    100.0 * part as f64 / whole as f64
}

fn score(cases: &[Case]) -> Score<'_> {
    let mut score = Score::default();
    for case in cases {
        let found = dangerous::detect(&case.command);
        if case.dangerous {
            score.dangerous += 1;
            score.flagged += usize::from(!found.is_empty());
            score.contained += usize::from(case.contained.is_some());
            match (&case.contained, found.is_empty()) {
                (_, false) => score.covered += 1,
                (Some(mechanism), true) => {
                    score.covered += 1;
                    score
                        .contained_only
                        .entry(mechanism)
                        .or_default()
                        .push(&case.command);
                }
                (None, true) => score
                    .missed
                    .entry(&case.source)
                    .or_default()
                    .push(&case.command),
            }
        } else {
            score.safe += 1;
            if let Some(first) = found.first() {
                score.false_alarms += 1;
                score
                    .alarms
                    .entry(first.category.to_string())
                    .or_default()
                    .push(&case.command);
            }
        }
    }
    score
}

impl Score<'_> {
    fn print_figures(&self, split: &str) {
        println!(
            "{split}: dangerous lines flagged {}/{} ({:.1}%), contained {}/{} ({:.1}%), \
             flagged or contained {}/{} ({:.1}%); safe lines flagged {}/{} ({:.1}%)",
            self.flagged,
            self.dangerous,
            share(self.flagged, self.dangerous),
            self.contained,
            self.dangerous,
            share(self.contained, self.dangerous),
            self.covered,
            self.dangerous,
            share(self.covered, self.dangerous),
            self.false_alarms,
            self.safe,
            share(self.false_alarms, self.safe),
        );
    }

    fn print_lines(&self) {
        for (source, commands) in &self.missed {
            println!("missed, from {source}:");
            commands.iter().for_each(|c| println!("    {c:?}"));
        }
        for (mechanism, commands) in &self.contained_only {
            println!("not flagged, contained by {mechanism}:");
            commands.iter().for_each(|c| println!("    {c:?}"));
        }
        for (category, commands) in &self.alarms {
            println!("safe, flagged as {category}:");
            commands.iter().for_each(|c| println!("    {c:?}"));
        }
    }

    /// Fails below `floors`: shares (percent) of dangerous lines flagged and
    /// flagged or contained, and the ceiling on safe lines flagged.
    fn assert_floors(&self, split: &str, floors: Floors) {
        let flagged = share(self.flagged, self.dangerous);
        let covered = share(self.covered, self.dangerous);
        let alarms = share(self.false_alarms, self.safe);
        assert!(
            flagged >= floors.flagged,
            "{split}: {flagged:.1}% of dangerous lines flagged, below the floor of {}%",
            floors.flagged
        );
        assert!(
            covered >= floors.covered,
            "{split}: {covered:.1}% of dangerous lines flagged or contained, below the floor of {}%",
            floors.covered
        );
        assert!(
            alarms <= floors.safe_flagged,
            "{split}: {alarms:.1}% of safe lines flagged, above the ceiling of {}%",
            floors.safe_flagged
        );
    }
}

/// Recorded floors for one split, in percent.
#[derive(Clone, Copy)]
struct Floors {
    flagged: f64,
    covered: f64,
    safe_flagged: f64,
}

const TUNED_FLOORS: Floors = Floors {
    flagged: 92.9,
    covered: 95.6,
    safe_flagged: 3.0,
};

const HELD_OUT_FLOORS: Floors = Floors {
    flagged: 92.3,
    covered: 95.4,
    safe_flagged: 1.2,
};

#[test]
fn the_detector_flags_the_tuned_lines_peers_call_dangerous() {
    let cases = corpus(TUNED);
    let score = score(&cases);
    score.print_lines();
    score.print_figures("tuned split");
    score.assert_floors("tuned split", TUNED_FLOORS);
}

#[test]
fn the_detector_flags_the_held_out_lines_peers_call_dangerous() {
    let cases = corpus(HELD_OUT);
    let score = score(&cases);
    // Figures only: the held-out lines are never looked at while tuning.
    score.print_figures("held-out split");
    score.assert_floors("held-out split", HELD_OUT_FLOORS);
}

#[test]
fn no_line_is_in_both_splits() {
    let tuned: HashSet<String> = corpus(TUNED).into_iter().map(|c| c.command).collect();
    for case in corpus(HELD_OUT) {
        assert!(
            !tuned.contains(&case.command),
            "{:?} is in both splits",
            case.command
        );
    }
}
