//! The dangerous-command detector scored on a public corpus of command lines
//! labelled by peers' own test suites (`tests/corpus/`, with sources and
//! commits). Prints the score; fails if it drops below the recorded floors.
//!
//! A dangerous line may also be marked `contained:<mechanism>` in the
//! corpus: the terminal's kernel sandbox makes it harmless whatever the
//! profile grants (see `tests/corpus/README.md`). Those are counted apart
//! from the lines the detector flags.
//!
//! Run alone to see the lines it misses and the safe lines it flags:
//! `cargo test -p toolhost-tests --test all corpus -- --nocapture`.

use std::collections::BTreeMap;

use toolhost::policy::dangerous;

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

fn corpus() -> Vec<Case> {
    let text = include_str!("../corpus/commands.tsv");
    text.lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 5, "{line:?}");
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

/// The shares (percent) of dangerous lines flagged, and flagged or
/// contained, must not fall below these floors, nor the share of safe lines
/// flagged rise above the ceiling.
const FLAGGED_DANGEROUS_FLOOR: f64 = 95.8;
const COVERED_DANGEROUS_FLOOR: f64 = 96.5;
const FLAGGED_SAFE_CEILING: f64 = 1.7;

fn share(part: usize, whole: usize) -> f64 {
    100.0 * part as f64 / whole as f64
}

#[test]
fn the_detector_flags_the_corpus_lines_peers_call_dangerous() {
    let cases = corpus();
    let (mut dangerous, mut flagged, mut contained, mut covered) = (0, 0, 0, 0);
    let (mut safe, mut false_alarms) = (0, 0);
    // Misses by the test file they come from; false alarms by category.
    let mut missed: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut alarms: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut contained_only: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for case in &cases {
        let found = dangerous::detect(&case.command);
        if case.dangerous {
            dangerous += 1;
            flagged += usize::from(!found.is_empty());
            contained += usize::from(case.contained.is_some());
            match (&case.contained, found.is_empty()) {
                (_, false) => covered += 1,
                (Some(mechanism), true) => {
                    covered += 1;
                    contained_only
                        .entry(mechanism)
                        .or_default()
                        .push(&case.command);
                }
                (None, true) => missed.entry(&case.source).or_default().push(&case.command),
            }
        } else {
            safe += 1;
            if let Some(first) = found.first() {
                false_alarms += 1;
                alarms
                    .entry(first.category.to_string())
                    .or_default()
                    .push(&case.command);
            }
        }
    }
    for (source, commands) in &missed {
        println!("missed, from {source}:");
        commands.iter().for_each(|c| println!("    {c:?}"));
    }
    for (mechanism, commands) in &contained_only {
        println!("not flagged, contained by {mechanism}:");
        commands.iter().for_each(|c| println!("    {c:?}"));
    }
    for (category, commands) in &alarms {
        println!("safe, flagged as {category}:");
        commands.iter().for_each(|c| println!("    {c:?}"));
    }
    println!(
        "dangerous lines: flagged {flagged}/{dangerous} ({:.1}%), contained {contained}/{dangerous} \
         ({:.1}%), flagged or contained {covered}/{dangerous} ({:.1}%)",
        share(flagged, dangerous),
        share(contained, dangerous),
        share(covered, dangerous),
    );
    println!(
        "safe lines: flagged {false_alarms}/{safe} ({:.1}%)",
        share(false_alarms, safe)
    );
    assert!(share(flagged, dangerous) >= FLAGGED_DANGEROUS_FLOOR);
    assert!(share(covered, dangerous) >= COVERED_DANGEROUS_FLOOR);
    assert!(share(false_alarms, safe) <= FLAGGED_SAFE_CEILING);
}
