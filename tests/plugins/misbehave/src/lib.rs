//! Test guest: tools that fail in every way a guest can.

use toolhost_sdk::prelude::*;

/// Arguments of `flood`.
#[derive(Deserialize, JsonSchema)]
struct FloodArgs {
    /// How many bytes of output to return.
    bytes: usize,
}

/// Arguments of `sleep`.
#[derive(Deserialize, JsonSchema)]
struct SleepArgs {
    /// Milliseconds to sleep.
    ms: u64,
}

/// Panics with a message.
#[tool(toolset = "misbehave")]
fn crash() -> Result<Value, ToolError> {
    panic!("the crash tool crashed on purpose");
}

/// Loops forever without yielding.
#[tool(toolset = "misbehave")]
fn spin() -> Result<Value, ToolError> {
    let mut n: u64 = 0;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

/// Allocates memory until it runs out.
#[tool(toolset = "misbehave")]
fn hog() -> Result<Value, ToolError> {
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    loop {
        blocks.push(vec![1u8; 1 << 20]);
        std::hint::black_box(&blocks);
    }
}

/// Returns output of the requested size.
#[tool(toolset = "misbehave")]
fn flood(args: FloodArgs) -> Result<Value, ToolError> {
    Ok(Value::String("x".repeat(args.bytes)))
}

/// Sleeps, then answers.
#[tool(toolset = "misbehave")]
fn sleep(args: SleepArgs) -> Result<Value, ToolError> {
    std::thread::sleep(std::time::Duration::from_millis(args.ms));
    Ok(json!({ "slept_ms": args.ms }))
}

/// Arguments of `report_progress`.
#[derive(Deserialize, JsonSchema)]
struct ProgressArgs {
    /// The progress values to report, in order.
    steps: Vec<f64>,
    /// The total reported with each.
    total: Option<f64>,
    /// Milliseconds to wait between two reports.
    #[serde(default)]
    pause_ms: u64,
}

/// Reports each of the steps as progress, waiting between them.
#[tool(toolset = "misbehave")]
fn report_progress(args: ProgressArgs) -> Result<Value, ToolError> {
    for (i, step) in args.steps.iter().enumerate() {
        if i > 0 && args.pause_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(args.pause_ms));
        }
        toolhost_sdk::progress::report(*step, args.total, Some(&format!("step {}", i + 1)));
    }
    Ok(json!({ "reported": args.steps.len() }))
}

/// Reports a failure.
#[tool(toolset = "misbehave")]
fn fail() -> Result<Value, ToolError> {
    Err(ToolError::failed("the fail tool failed on purpose"))
}

/// Returns text that starts like JSON but is not.
#[allow(non_camel_case_types)]
struct bad_json {}

impl toolhost_sdk::Tool for bad_json {
    const NAME: &'static str = "bad_json";

    fn spec() -> toolhost_sdk::ToolSpec {
        toolhost_sdk::ToolSpec::new(Self::NAME, "Returns malformed JSON.")
            .parameters(r#"{"type":"object"}"#)
            .toolset("misbehave")
            .read_only(true)
    }

    fn call(_arguments: &str) -> Result<toolhost_sdk::ToolOutput, ToolError> {
        Ok(toolhost_sdk::ToolOutput::json(r#"{"unterminated": "#))
    }
}

/// Returns plain text instead of JSON.
#[allow(non_camel_case_types)]
struct plain_text {}

impl toolhost_sdk::Tool for plain_text {
    const NAME: &'static str = "plain_text";

    fn spec() -> toolhost_sdk::ToolSpec {
        toolhost_sdk::ToolSpec::new(Self::NAME, "Returns plain text.")
            .parameters(r#"{"type":"object"}"#)
            .toolset("misbehave")
            .read_only(true)
    }

    fn call(_arguments: &str) -> Result<toolhost_sdk::ToolOutput, ToolError> {
        Ok(toolhost_sdk::ToolOutput::json("just some text"))
    }
}

/// Arguments of `say`.
#[derive(Deserialize, JsonSchema)]
struct SayArgs {
    /// The text to log, print and return, control characters and all.
    text: String,
}

/// Logs the text, writes it to stdout and stderr, and returns it.
#[tool(toolset = "misbehave")]
fn say(args: SayArgs) -> Result<Value, ToolError> {
    toolhost_sdk::log::info(&args.text);
    println!("{}", args.text);
    eprintln!("{}", args.text);
    Ok(Value::String(args.text))
}

/// Arguments of `chatter`.
#[derive(Deserialize, JsonSchema)]
struct ChatterArgs {
    /// How many lines to log.
    lines: u32,
    /// How many bytes each line holds (of the control character 0x01).
    bytes: usize,
}

/// Logs `lines` warnings of `bytes` control characters each: a chatty
/// plugin's worst case on the wire (each byte escaped to six).
#[tool(toolset = "misbehave")]
fn chatter(args: ChatterArgs) -> Result<Value, ToolError> {
    let line = "\u{1}".repeat(args.bytes.min(1 << 16));
    for _ in 0..args.lines.min(100_000) {
        toolhost_sdk::log::warn(&line);
    }
    Ok(Value::Null)
}

/// A tool whose description holds terminal control sequences.
#[allow(non_camel_case_types)]
struct paint {}

impl toolhost_sdk::Tool for paint {
    const NAME: &'static str = "paint";

    fn spec() -> toolhost_sdk::ToolSpec {
        toolhost_sdk::ToolSpec::new(
            Self::NAME,
            "Paints\x1b[2K\r\x1b]0;owned\x07 \u{9b}31m over \u{202e}the line",
        )
        .parameters(r#"{"type":"object"}"#)
        .toolset("misbehave")
        .read_only(true)
    }

    fn call(_arguments: &str) -> Result<toolhost_sdk::ToolOutput, ToolError> {
        Ok(toolhost_sdk::ToolOutput::json("{}"))
    }
}

export_plugin!(
    crash,
    spin,
    hog,
    flood,
    sleep,
    fail,
    bad_json,
    plain_text,
    report_progress,
    say,
    chatter,
    paint
);
