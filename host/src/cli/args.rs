//! The command line's arguments: commands, options and their defaults.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config;

/// Run LLM-agent tools as sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "toolhost", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub(super) global: Global,
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Debug, Args)]
pub(super) struct Global {
    /// Configuration file [default: ./toolhost.toml if it exists, else the built-in one]
    #[arg(long, global = true, value_name = "FILE", env = "TOOLHOST_CONFIG")]
    pub(super) config: Option<PathBuf>,
    /// Directory of plugin `.wasm` files [default: the config's `plugins`]
    #[arg(long, global = true, value_name = "DIR")]
    pub(super) plugins: Option<PathBuf>,
    /// Run as this profile of the config [default: the config's `default_profile`]
    #[arg(long, global = true, value_name = "NAME")]
    pub(super) profile: Option<String>,
    /// Do not load the plugins bundled with toolhost
    #[arg(long, global = true)]
    pub(super) no_bundled: bool,
    /// More log output (-v: info, -vv: debug, -vvv: trace); RUST_LOG overrides
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(super) verbose: u8,
}

#[derive(Debug, Subcommand)]
pub(super) enum Command {
    /// List the available tools
    List {
        /// Output format
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Same as `--format json`
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// With `--format openai`: rewrite schemas for strict mode where they allow it
        #[arg(long)]
        strict: bool,
        /// Only these toolsets (repeat or comma-separate; `all` for every tool)
        #[arg(long = "toolset", value_delimiter = ',', value_name = "TOOLSET")]
        toolsets: Vec<String>,
        /// Leave out these toolsets (applied after --toolset)
        #[arg(long = "disable", value_delimiter = ',', value_name = "TOOLSET")]
        disabled: Vec<String>,
        /// Also show tools the profile hides, with the reason
        #[arg(long)]
        all: bool,
    },
    /// Call a tool and print its JSON result, or run a batch of calls
    Call {
        /// The tool's name
        #[arg(required_unless_present = "batch")]
        tool: Option<String>,
        /// Arguments: a JSON object, `-` to read them from stdin, or the name
        /// of a file that holds them [default: {}]
        #[arg(value_name = "ARGS")]
        arguments: Option<String>,
        /// Session id: calls of a stateful tool with the same id share its state
        #[arg(long)]
        session: Option<String>,
        /// Run a batch `{"tool_calls": [...]}` (OpenAI shape) from a file or `-`
        #[arg(long, value_name = "FILE", conflicts_with_all = ["tool", "arguments"])]
        batch: Option<String>,
        /// Write the images, audio and binary resources a tool returns to
        /// new files in DIR (otherwise only their type and size are printed)
        #[arg(long, value_name = "DIR", conflicts_with = "batch")]
        save_content: Option<PathBuf>,
    },
    /// Check a plugin file: format, world, tool specs and schemas (or a
    /// declarative `*.toml`/`*.yaml` tool file); without a file, print the
    /// profile's effective permissions layer by layer (global, session,
    /// profile, tool, parameters)
    Check {
        /// The `.wasm`, `.toml` or `.yaml` file
        file: Option<PathBuf>,
        /// With no file: only this tool's layers and decisions
        #[arg(long, value_name = "TOOL", conflicts_with = "file")]
        tool: Option<String>,
    },
    /// Create a plugin project with one example tool that builds and loads
    /// as created
    New {
        /// The plugin's name (lower-case letters, digits, '-' and '_')
        name: String,
        /// Its language
        #[arg(long, value_enum, default_value_t = crate::scaffold::Lang::Rust)]
        lang: crate::scaffold::Lang,
        /// Where to create the project directory
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
    /// Load the plugins, watch the plugin directory and config file, and
    /// print each reload as it happens (for authors iterating on a plugin)
    Watch {
        /// Print events as JSON lines
        #[arg(long)]
        json: bool,
    },
    /// Show the loaded plugins, their versions and load errors
    Status {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Serve the tools: MCP over stdio, or with --http the MCP Streamable
    /// HTTP endpoint (/mcp) and the OpenAI-style API (/v1) on one port;
    /// watches the plugin directory and config file while it runs
    Serve(ServeArgs),
    /// Report what the kernel offers the terminal sandbox, and which
    /// profiles run commands without it
    Doctor,
    /// Check or show the configuration
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
}

/// `toolhost serve` options; the limits apply to `--http` only, the drain
/// timeout to both.
#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    /// Serve over HTTP on this address (`127.0.0.1:8080`) instead of stdio;
    /// a non-loopback address needs [tenants.NAME] in the config
    #[arg(long, value_name = "ADDR")]
    pub(super) http: Option<String>,
    /// Largest request body
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = parse_size)]
    pub(super) max_body: u64,
    /// Most tool calls in one POST /v1/tool_calls
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub(super) max_calls: usize,
    /// Connections served at once; more wait in the listen backlog
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub(super) max_connections: usize,
    /// Longest a client may take to send request headers (also the idle
    /// keep-alive timeout)
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub(super) header_timeout: Duration,
    /// Longest a client may take to send a request body
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub(super) body_timeout: Duration,
    /// Longest a /v1 request may run
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub(super) request_timeout: Duration,
    /// At shutdown, how long to wait for requests in flight (stdio too)
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub(super) drain_timeout: Duration,
    /// Also accept requests for this Host (repeat; `name` or `name:port`)
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub(super) allowed_hosts: Vec<String>,
    /// Also accept browser requests from this Origin (repeat;
    /// `https://app.example.com`, `http://localhost:*`)
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub(super) allowed_origins: Vec<String>,
    /// MCP over stdio: how long the idle server thread polls stdin for the
    /// next message before it sleeps (a sleeping thread can take tens of
    /// microseconds to wake, on virtual machines especially); 0 turns it off
    #[arg(long, value_name = "DURATION", default_value = "50us", value_parser = parse_duration)]
    pub(super) stdio_poll: Duration,
}

fn parse_size(text: &str) -> Result<u64, String> {
    config::parse_size(text)
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    config::parse_duration(text)
}

#[derive(Debug, Subcommand)]
pub(super) enum ConfigAction {
    /// Validate the configuration and list every problem
    Check,
    /// Print the built-in configuration (a starting point for toolhost.toml),
    /// or with --effective the configuration in use as it is enforced
    Show {
        /// The configuration in use (toolhost.toml or --config, else the
        /// built-in one), merged and resolved: each profile's grants, denies,
        /// hosts and terminal rules (--profile: that profile only)
        #[arg(long)]
        effective: bool,
        /// With --effective: only this tenant's profile, in its workspace
        #[arg(long, requires = "effective", value_name = "NAME")]
        tenant: Option<String>,
    },
}

/// How `toolhost list` prints tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Format {
    /// A table for people
    Table,
    /// Full specs as JSON
    Json,
    /// The OpenAI `tools` array
    Openai,
    /// MCP `tools/list` entries
    Mcp,
}
