//! The `toolhost` command line.

use std::io::{IsTerminal, Read};
use std::os::fd::AsFd as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::{Args, Parser, Subcommand};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::approval::TtyApprover;
use crate::check;
use crate::config::{self, Config};
use crate::dispatch::CallRequest;
use crate::host::{Host, HostBuilder};
use crate::serve::http::{HttpServer, ServeOptions};
use crate::toolsets::Selection;

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
    /// Configuration file [default: ./toolhost.toml if it exists, else the built-in one]
    #[arg(long, global = true, value_name = "FILE", env = "TOOLHOST_CONFIG")]
    config: Option<PathBuf>,
    /// Directory of plugin `.wasm` files [default: the config's `plugins`]
    #[arg(long, global = true, value_name = "DIR")]
    plugins: Option<PathBuf>,
    /// Run as this profile of the config [default: the config's `default_profile`]
    #[arg(long, global = true, value_name = "NAME")]
    profile: Option<String>,
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
        /// Arguments as a JSON object, or `-` to read them from stdin [default: {}]
        arguments: Option<String>,
        /// Session id: calls of a stateful tool with the same id share its state
        #[arg(long)]
        session: Option<String>,
        /// Run a batch `{"tool_calls": [...]}` (OpenAI shape) from a file or `-`
        #[arg(long, value_name = "FILE", conflicts_with_all = ["tool", "arguments"])]
        batch: Option<String>,
    },
    /// Check a plugin file: format, world, tool specs and schemas (or a
    /// declarative `*.toml` tool file)
    Check {
        /// The `.wasm` or `.toml` file
        file: PathBuf,
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
struct ServeArgs {
    /// Serve over HTTP on this address (`127.0.0.1:8080`) instead of stdio;
    /// a non-loopback address needs [tenants.NAME] in the config
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// Largest request body
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = parse_size)]
    max_body: u64,
    /// Most tool calls in one POST /v1/tool_calls
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_calls: usize,
    /// Connections served at once; more wait in the listen backlog
    #[arg(long, value_name = "N", default_value_t = 512)]
    max_connections: usize,
    /// Longest a client may take to send request headers (also the idle
    /// keep-alive timeout)
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    header_timeout: Duration,
    /// Longest a client may take to send a request body
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    body_timeout: Duration,
    /// Longest a /v1 request may run
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    request_timeout: Duration,
    /// At shutdown, how long to wait for requests in flight (stdio too)
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    drain_timeout: Duration,
    /// Also accept requests for this Host (repeat; `name` or `name:port`)
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
    /// Also accept browser requests from this Origin (repeat;
    /// `https://app.example.com`, `http://localhost:*`)
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    allowed_origins: Vec<String>,
    /// MCP over stdio: how long the idle server thread polls stdin for the
    /// next message before it sleeps (a sleeping thread can take tens of
    /// microseconds to wake, on virtual machines especially); 0 turns it off
    #[arg(long, value_name = "DURATION", default_value = "50us", value_parser = parse_duration)]
    stdio_poll: Duration,
}

fn parse_size(text: &str) -> Result<u64, String> {
    config::parse_size(text)
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    config::parse_duration(text)
}

#[derive(Debug, Subcommand)]
enum ConfigAction {
    /// Validate the configuration and list every problem
    Check,
    /// Print the built-in configuration (a starting point for toolhost.toml)
    Show,
}

/// How `toolhost list` prints tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// A table for people
    Table,
    /// Full specs as JSON
    Json,
    /// The OpenAI `tools` array
    Openai,
    /// MCP `tools/list` entries
    Mcp,
}

/// Raises the soft limit of open files to the hard one: many guests and
/// connections at once need more than the usual 1024, and each call is held
/// to its own quota of open files.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit on this process with a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Runs the command line; the process exit code reflects success.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    raise_open_file_limit();
    let serving = matches!(cli.command, Command::Serve(_));
    if !serving {
        // Output piped into `head` and the like ends quietly when the reader
        // goes away, as command-line tools do, instead of panicking on EPIPE.
        // (Never for a server: a client hanging up must not kill it.)
        // SAFETY: restoring the default disposition of a signal, before any
        // thread is started.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // A server reports what it does (listening, reloads) unless told otherwise.
    init_logging(
        cli.global.verbose,
        if serving {
            "warn,toolhost=info"
        } else {
            "warn"
        },
    );
    // MCP over stdio is one client, usually one call at a time: a single
    // thread answers it without handing each message between worker threads
    // (calls still overlap while they wait, and guests yield at every epoch
    // tick). Before that thread sleeps it polls stdin for a while, so a
    // client's next message does not have to wake it. Everything else gets a
    // worker per core.
    let stdio_poll = match &cli.command {
        Command::Serve(args) if args.http.is_none() => Some(args.stdio_poll),
        _ => None,
    };
    let mut builder = if let Some(budget) = stdio_poll {
        let mut builder = tokio::runtime::Builder::new_current_thread();
        if !budget.is_zero() {
            let stdin = std::io::stdin();
            builder.on_thread_park(move || {
                crate::serve::mcp::poll_readable(stdin.as_fd(), budget);
            });
        }
        builder
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    };
    if serving {
        // Do not wait for a blocked read of stdin (or the terminal) to end.
        runtime.shutdown_timeout(Duration::from_secs(1));
        // A call its task did not drop in time still leaves no command behind.
        crate::runtime::kill_commands();
    }
    code
}

fn init_logging(verbose: u8, quiet: &str) {
    let default = match verbose {
        0 => quiet,
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
        Command::List {
            format,
            json,
            strict,
            toolsets,
            disabled,
            all,
        } => {
            let host = host(&cli.global).await?;
            let format = if json { Format::Json } else { format };
            let selection = Selection {
                enabled: toolsets,
                disabled,
            };
            list(&host, format, &selection, strict, all)
        }
        Command::Call {
            tool,
            arguments,
            session,
            batch,
        } => {
            if let Some(batch) = batch {
                let text = read_input(&batch)?;
                let batch: serde_json::Value = serde_json::from_str(&text)
                    .with_context(|| format!("the batch in {batch} is not valid JSON"))?;
                let host = host(&cli.global).await?;
                let results = host.dispatch_batch(&batch, session.as_deref()).await;
                println!("{}", serde_json::to_string_pretty(&results)?);
                return Ok(if results.get("error").is_some() {
                    ExitCode::FAILURE
                } else {
                    ExitCode::SUCCESS
                });
            }
            let tool = tool.context("a tool name is required")?;
            let arguments = match arguments {
                Some(arguments) => read_input(&arguments)?,
                None => "{}".to_string(),
            };
            let host = host(&cli.global).await?;
            let mut request = CallRequest::new(tool, arguments);
            request.session = session;
            Ok(call(&host, request).await)
        }
        Command::Serve(args) => serve(&cli.global, args).await,
        Command::Config { action } => config_command(&cli.global, action),
        Command::New { name, lang, dir } => {
            let created = crate::scaffold::create(&name, lang, &dir)?;
            println!("created {}", created.display());
            println!(
                "next: see {} for build, check, call and watch commands",
                created.join("README.md").display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Watch { json } => watch(&cli.global, json).await,
        Command::Doctor => doctor(&cli.global).await,
        Command::Status { json } => {
            let host = host(&cli.global).await?;
            status(&host, json)
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

/// `toolhost doctor`: builds a sandbox around `true` and says what worked.
async fn doctor(global: &Global) -> Result<ExitCode> {
    let support = crate::confine::probe().await;
    let ready = support.namespaces.is_ok();
    match &support.namespaces {
        Ok(()) => println!(
            "✓ terminal sandbox: user, mount, PID, IPC, UTS and network namespaces, \
             seccomp filter, resource limits"
        ),
        Err(reason) => println!("✗ terminal sandbox: {reason}"),
    }
    match &support.process_limit {
        Ok(how) => println!("✓ process limit: {how}"),
        Err(reason) => println!("✗ process limit: {reason}"),
    }
    match support.landlock_abi {
        Some(abi) => println!("✓ Landlock ABI {abi}: second filesystem layer, signal scoping"),
        None => println!("- Landlock: not enabled in this kernel (the mounts still confine files)"),
    }
    let config = Config::discover(global.config.as_deref())?;
    let unconfined = config.unconfined_terminal_profiles();
    for name in &unconfined {
        println!(
            "! profile {name:?} sets terminal.sandbox = \"none\": its commands run \
             unconfined, with toolhost's own rights"
        );
    }
    let refused = !ready && unconfined.len() < config.profiles.len();
    if refused {
        println!(
            "  terminal commands of the other profiles are refused until the sandbox can be built"
        );
    }
    Ok(if ready {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn config_command(global: &Global, action: ConfigAction) -> Result<ExitCode> {
    match action {
        ConfigAction::Show => {
            print!("{}", config::EMBEDDED);
            Ok(ExitCode::SUCCESS)
        }
        ConfigAction::Check => match Config::discover(global.config.as_deref()) {
            Ok(config) => {
                println!(
                    "✓ {}: {} profile{}, {} tenant{}, {} composite toolset{}; default profile {:?}",
                    config.source,
                    config.profiles.len(),
                    if config.profiles.len() == 1 { "" } else { "s" },
                    config.tenants.len(),
                    if config.tenants.len() == 1 { "" } else { "s" },
                    config.toolsets.composites().len(),
                    if config.toolsets.composites().len() == 1 {
                        ""
                    } else {
                        "s"
                    },
                    config.default_profile
                );
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => {
                println!("✗ {error}");
                Ok(ExitCode::FAILURE)
            }
        },
    }
}

/// Loads the configuration and builds the host it describes, with the
/// command line's overrides.
async fn host(global: &Global) -> Result<Host> {
    let config = effective_config(global)?;
    let builder: HostBuilder = Host::builder()
        .config(&config)?
        .approver(TtyApprover::or_deny());
    let host = builder.build().await?;
    for error in host.load_errors() {
        eprintln!("warning: {error}");
    }
    Ok(host)
}

/// The host of a server: it answers at once, while the plugins compile in
/// the background (load errors go to the log as each plugin finishes).
async fn serving_host(global: &Global) -> Result<Host> {
    let config = effective_config(global)?;
    Host::builder()
        .config(&config)?
        .approver(TtyApprover::or_deny())
        .load_in_background(true)
        .build()
        .await
}

/// The configuration with the command line's overrides applied.
fn effective_config(global: &Global) -> Result<Config> {
    let mut config = Config::discover(global.config.as_deref())?;
    if let Some(profile) = &global.profile {
        if !config.profiles.contains_key(profile) {
            anyhow::bail!(
                "unknown profile {profile:?}; {} defines: {}",
                config.source,
                config
                    .profiles
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        config.default_profile = profile.clone();
        config.pinned_profile = Some(profile.clone());
    }
    if let Some(dir) = &global.plugins {
        if !dir.is_dir() {
            anyhow::bail!(
                "plugin directory {} does not exist or is not a directory",
                dir.display()
            );
        }
        config.plugins = Some(dir.clone());
    }
    if global.no_bundled {
        config.bundled = false;
    }
    // Without a `plugins` key: `plugins/` next to the config file (or in the
    // current directory), for every command alike.
    if config.plugins.is_none() {
        config.plugins = Some(config.base_dir.join("plugins"));
    }
    Ok(config)
}

/// The plugin directory and config file to watch.
fn watched(config: &Config) -> (PathBuf, Option<PathBuf>) {
    let dir = config
        .plugins
        .clone()
        .unwrap_or_else(|| config.base_dir.join("plugins"));
    let config_file = match &config.source {
        config::ConfigSource::File(path) => Some(path.clone()),
        config::ConfigSource::Embedded => None,
    };
    (dir, config_file)
}

/// `toolhost serve`: MCP over stdio, or the HTTP server with `--http`; both
/// hot-reload. The first SIGINT or SIGTERM shuts down gracefully (the
/// requests in flight are answered), a second one exits at once with 130.
async fn serve(global: &Global, args: ServeArgs) -> Result<ExitCode> {
    let config = effective_config(global)?;
    let host = serving_host(global).await?;
    let (dir, config_file) = watched(&config);
    let _watcher = host.watch(&dir, config_file.as_deref(), Default::default())?;
    let stop = CancellationToken::new();
    stop_on_signals(stop.clone())?;
    let Some(addr) = args.http else {
        tracing::info!(plugins = %dir.display(), "serving MCP on stdio");
        crate::serve::mcp::serve_stdio(host, stop, args.drain_timeout).await?;
        return Ok(ExitCode::SUCCESS);
    };
    let options = ServeOptions {
        max_body: usize::try_from(args.max_body).unwrap_or(usize::MAX),
        max_calls: args.max_calls,
        max_connections: args.max_connections,
        header_timeout: args.header_timeout,
        body_timeout: args.body_timeout,
        request_timeout: args.request_timeout,
        drain_timeout: args.drain_timeout,
        allowed_hosts: args.allowed_hosts,
        allowed_origins: args.allowed_origins,
    };
    let server = HttpServer::bind(host.clone(), &addr, options).await?;
    let tenants = config.tenants.len();
    tracing::info!(
        plugins = %dir.display(),
        "serving on http://{} (MCP at /mcp, OpenAI-style API at /v1); {}",
        server.local_addr(),
        if tenants == 0 {
            "no tenants: loopback only, no token needed".to_string()
        } else {
            format!("{tenants} tenant(s), bearer tokens required")
        }
    );
    server.run(stop.cancelled_owned()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Cancels `stop` on the first SIGINT or SIGTERM; exits on the second. The
/// handlers are installed before this returns, so a signal that arrives once
/// the server has announced itself is never missed.
fn stop_on_signals(stop: CancellationToken) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down (signal again to stop at once)");
        stop.cancel();
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        tracing::warn!("second signal: stopping without waiting for calls in flight");
        // Exiting drops nothing: end the commands the calls run here.
        crate::runtime::kill_commands();
        std::process::exit(130);
    });
    Ok(())
}

async fn watch(global: &Global, json: bool) -> Result<ExitCode> {
    let config = effective_config(global)?;
    let host = host(global).await?;
    let (dir, config_file) = watched(&config);
    let mut events = host.events();
    let _watcher = host.watch(&dir, config_file.as_deref(), Default::default())?;
    eprintln!(
        "watching {}{} — {} tools loaded; Ctrl-C to stop",
        dir.display(),
        config_file
            .as_ref()
            .map(|c| format!(" and {}", c.display()))
            .unwrap_or_default(),
        host.tools().len()
    );
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(event) if json => println!("{}", serde_json::to_string(&event)?),
                Ok(event) => println!("{} {event}", crate::audit::now_rfc3339()),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    eprintln!("warning: {n} events were missed");
                }
                Err(_) => return Ok(ExitCode::SUCCESS),
            },
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        }
    }
}

fn status(host: &Host, as_json: bool) -> Result<ExitCode> {
    let plugins: Vec<serde_json::Value> = host
        .plugins()
        .iter()
        .map(|p| {
            json!({
                "plugin": &**p.name(),
                "version": p.hash().to_string(),
                "source": p.source().to_string(),
                "tools": p.tools().iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
                "stateful": p.is_stateful(),
                "compiled": format!("{:?}", p.compiled()).to_lowercase(),
            })
        })
        .collect();
    let errors: Vec<String> = host.load_errors().iter().map(ToString::to_string).collect();
    if as_json {
        let status = json!({ "plugins": plugins, "load_errors": errors });
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        for p in &plugins {
            println!(
                "{:12} {}  {:8}  {}",
                p["plugin"].as_str().unwrap_or_default(),
                &p["version"].as_str().unwrap_or_default()[..12],
                p["compiled"].as_str().unwrap_or_default(),
                p["source"].as_str().unwrap_or_default()
            );
        }
        for error in &errors {
            println!("✗ {error}");
        }
    }
    Ok(if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `-` reads stdin; anything else is the text itself, or (for a batch) a file.
fn read_input(arg: &str) -> Result<String> {
    if arg == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading stdin")?;
        return Ok(text);
    }
    let trimmed = arg.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') || trimmed.is_empty() {
        return Ok(arg.to_string());
    }
    match std::fs::read_to_string(arg) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(arg.to_string()),
        Err(e) => Err(e).with_context(|| format!("reading {arg}")),
    }
}

fn list(
    host: &Host,
    format: Format,
    selection: &Selection,
    strict: bool,
    all: bool,
) -> Result<ExitCode> {
    let listing = host
        .listing(&host.caller(), selection)
        .map_err(anyhow::Error::msg)?;
    let tools: Vec<_> = listing
        .iter()
        .filter(|l| l.hidden.is_none())
        .map(|l| l.spec.clone())
        .collect();
    match format {
        Format::Table => {}
        Format::Json => {
            println!("{}", serde_json::to_string_pretty(&tools)?);
            return Ok(ExitCode::SUCCESS);
        }
        Format::Openai => {
            let tools = host
                .openai_tools(selection, strict)
                .map_err(anyhow::Error::msg)?;
            println!("{}", serde_json::to_string_pretty(&tools)?);
            return Ok(ExitCode::SUCCESS);
        }
        Format::Mcp => {
            let tools = host.mcp_tools(selection).map_err(anyhow::Error::msg)?;
            println!("{}", serde_json::to_string_pretty(&tools)?);
            return Ok(ExitCode::SUCCESS);
        }
    }
    let shown: Vec<_> = if all {
        listing
    } else {
        listing.into_iter().filter(|l| l.hidden.is_none()).collect()
    };
    if shown.is_empty() {
        println!(
            "no tools available under profile {:?}",
            host.caller().profile().name
        );
        return Ok(ExitCode::SUCCESS);
    }
    let tools: Vec<_> = shown.iter().map(|l| l.spec.clone()).collect();
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
    for listed in &shown {
        let tool = &listed.spec;
        let permissions = if tool.permissions.is_empty() {
            "-".to_string()
        } else {
            tool.permissions.join(",")
        };
        let summary = match &listed.hidden {
            None => tool
                .description
                .lines()
                .next()
                .unwrap_or_default()
                .to_string(),
            Some(reason) => format!("(hidden: {reason})"),
        };
        println!(
            "{:name_width$}  {:set_width$}  {permissions:11}  {summary}",
            tool.name, tool.toolset
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn call(host: &Host, request: CallRequest) -> ExitCode {
    match host.dispatch(request).await {
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
