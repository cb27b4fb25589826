//! The `toolhost` command line.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Args, Parser, Subcommand};
use serde_json::json;

use crate::check;
use crate::host::{Host, HostBuilder};

/// Run LLM-agent tools as sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "toolhost", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct Global {
    /// Directory of plugin `.wasm` files [default: ./plugins if it exists]
    #[arg(long, global = true, value_name = "DIR")]
    plugins: Option<PathBuf>,
    /// Do not load the plugins bundled with toolhost
    #[arg(long, global = true)]
    no_bundled: bool,
    /// More log output (-v: info, -vv: debug, -vvv: trace); RUST_LOG overrides
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the available tools
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Call a tool and print its JSON result
    Call {
        /// The tool's name
        tool: String,
        /// Arguments as a JSON object, or `-` to read them from stdin [default: {}]
        arguments: Option<String>,
    },
    /// Check a plugin file: format, world, tool specs and schemas
    Check {
        /// The `.wasm` file
        file: PathBuf,
    },
}

/// Runs the command line; the process exit code reflects success.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.global.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::List { json } => {
            let host = host(&cli.global).await?;
            list(&host, json)
        }
        Command::Call { tool, arguments } => {
            let arguments = read_arguments(arguments)?;
            let host = host(&cli.global).await?;
            Ok(call(&host, &tool, &arguments).await)
        }
        Command::Check { file } => {
            let report = check::check_file(&file).await?;
            print!("{report}");
            Ok(if report.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

async fn host(global: &Global) -> Result<Host> {
    let mut builder: HostBuilder = Host::builder().bundled(!global.no_bundled);
    match &global.plugins {
        Some(dir) => {
            if !dir.is_dir() {
                anyhow::bail!(
                    "plugin directory {} does not exist or is not a directory",
                    dir.display()
                );
            }
            builder = builder.plugin_dir(dir);
        }
        None => builder = builder.plugin_dir("plugins"),
    }
    let host = builder.build().await?;
    for error in host.load_errors() {
        eprintln!("warning: {error}");
    }
    Ok(host)
}

fn read_arguments(arguments: Option<String>) -> Result<String> {
    match arguments.as_deref() {
        None => Ok("{}".into()),
        Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading arguments from stdin")?;
            Ok(text)
        }
        Some(text) => Ok(text.to_string()),
    }
}

fn list(host: &Host, as_json: bool) -> Result<ExitCode> {
    let tools = host.tools();
    if as_json {
        println!("{}", serde_json::to_string_pretty(&tools)?);
        return Ok(ExitCode::SUCCESS);
    }
    if tools.is_empty() {
        println!("no tools loaded");
        return Ok(ExitCode::SUCCESS);
    }
    let name_width = tools.iter().map(|t| t.name.len()).max().unwrap_or(4).max(4);
    let set_width = tools
        .iter()
        .map(|t| t.toolset.len())
        .max()
        .unwrap_or(7)
        .max(7);
    println!(
        "{:name_width$}  {:set_width$}  PERMISSIONS  DESCRIPTION",
        "TOOL", "TOOLSET"
    );
    for tool in &tools {
        let permissions = if tool.permissions.is_empty() {
            "-".to_string()
        } else {
            tool.permissions.join(",")
        };
        let summary = tool.description.lines().next().unwrap_or_default();
        println!(
            "{:name_width$}  {:set_width$}  {permissions:11}  {summary}",
            tool.name, tool.toolset
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn call(host: &Host, tool: &str, arguments: &str) -> ExitCode {
    match host.call(tool, arguments).await {
        Ok(result) => {
            let pretty = serde_json::from_str::<serde_json::Value>(result.get())
                .and_then(|v| serde_json::to_string_pretty(&v))
                .unwrap_or_else(|_| result.get().to_string());
            println!("{pretty}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::debug!(error = %e, "call failed");
            println!("{}", json!({"error": e.model_text()}));
            ExitCode::FAILURE
        }
    }
}
