//! The dangerous-command detector scored on a public corpus of command lines
//! labelled by peers' own test suites (`tests/corpus/`, with sources and
//! commits). Prints the score; fails if it drops below the recorded floor.
//!
//! Run alone to see the lines it misses:
//! `cargo test -p toolhost-tests --test all corpus -- --nocapture`.

use toolhost::policy::dangerous;

/// One labelled line.
struct Case {
    dangerous: bool,
    command: String,
    source: String,
}

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
            assert_eq!(fields.len(), 4, "{line:?}");
            Case {
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

/// The share of dangerous lines flagged must not fall below this, nor the
/// share of safe lines flagged rise above the ceiling (percent).
const FLAGGED_DANGEROUS_FLOOR: f64 = 52.5;
const FLAGGED_SAFE_CEILING: f64 = 16.0;

#[test]
fn the_detector_flags_the_corpus_lines_peers_call_dangerous() {
    let cases = corpus();
    let (mut dangerous, mut caught, mut safe, mut false_alarms) = (0, 0, 0, 0);
    for case in &cases {
        let flagged = !dangerous::detect(&case.command).is_empty();
        if case.dangerous {
            dangerous += 1;
            if flagged {
                caught += 1;
            } else {
                println!("missed: {:?} ({})", case.command, case.source);
            }
        } else {
            safe += 1;
            if flagged {
                false_alarms += 1;
                println!("flagged safe: {:?} ({})", case.command, case.source);
            }
        }
    }
    let caught_share = 100.0 * f64::from(caught) / f64::from(dangerous);
    let alarm_share = 100.0 * f64::from(false_alarms) / f64::from(safe);
    println!(
        "dangerous flagged {caught}/{dangerous} ({caught_share:.1}%), \
         safe flagged {false_alarms}/{safe} ({alarm_share:.1}%)"
    );
    assert!(caught_share >= FLAGGED_DANGEROUS_FLOOR, "{caught_share}");
    assert!(alarm_share <= FLAGGED_SAFE_CEILING, "{alarm_share}");
}
