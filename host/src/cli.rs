//! The `toolhost` command line: `main`, logging, and each command to the
//! module that runs it (`args`: the arguments; `setup`: the host a command
//! runs; `call`, `serve` (and `watch`), `show`: the commands).

mod args;
mod call;
mod content;
mod effective;
mod layers;
mod own;
mod serve;
mod setup;
mod show;

use std::io::IsTerminal;
use std::os::fd::AsFd as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::Parser as _;

use crate::check;
use crate::escape::escape_lines;
use crate::toolsets::Selection;
use args::{Command, Format};

pub use args::Cli;

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
    let code = match runtime.block_on(async {
        if serving {
            return run(cli).await;
        }
        // Ended by a signal, a one-shot command still ends its commands
        // (below) instead of leaving them running with nothing guarding
        // them.
        tokio::select! {
            biased;
            code = run(cli) => code,
            signal = ending_signal() => Ok(ExitCode::from(128 + signal)),
        }
    }) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", escape_lines(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    };
    if serving {
        // Do not wait for a blocked read of stdin (or the terminal) to end.
        runtime.shutdown_timeout(Duration::from_secs(1));
    }
    // A call its task did not drop in time still leaves no command behind,
    // nor anything it put where toolhost keeps a name as it was.
    crate::capability::terminal::kill_commands();
    code
}

/// Waits for SIGINT, SIGTERM or SIGHUP and answers its number; never ends
/// when they cannot be listened for (the default action then stays).
async fn ending_signal() -> u8 {
    use tokio::signal::unix::{SignalKind, signal};
    let listen = |kind: SignalKind| signal(kind).ok();
    let (Some(mut interrupt), Some(mut terminate), Some(mut hangup)) = (
        listen(SignalKind::interrupt()),
        listen(SignalKind::terminate()),
        listen(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => libc::SIGINT as u8,
        _ = terminate.recv() => libc::SIGTERM as u8,
        _ = hangup.recv() => libc::SIGHUP as u8,
    }
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
        .fmt_fields(crate::escape::LogFields)
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
            let host = setup::host(&cli.global).await?;
            let format = if json { Format::Json } else { format };
            let selection = Selection {
                enabled: toolsets,
                disabled,
            };
            show::list(&host, format, &selection, strict, all)
        }
        Command::Call {
            tool,
            arguments,
            session,
            batch,
            save_content,
        } => {
            let call = call::Call {
                tool,
                arguments,
                session,
                batch,
                save_content,
            };
            call::run(&cli.global, call).await
        }
        Command::Serve(args) => serve::serve(&cli.global, args).await,
        Command::Config { action } => show::config_command(&cli.global, action),
        Command::New { name, lang, dir } => {
            let created = crate::scaffold::create(&name, lang, &dir)?;
            println!("created {}", created.display());
            println!(
                "next: see {} for build, check, call and watch commands",
                created.join("README.md").display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Watch { json } => serve::watch(&cli.global, json).await,
        Command::Doctor => show::doctor(&cli.global).await,
        Command::Status { json } => {
            let host = setup::host(&cli.global).await?;
            show::status(&host, json)
        }
        Command::Check { file: None, tool } => {
            let host = setup::host(&cli.global).await?;
            let config = host
                .config()
                .ok_or_else(|| anyhow::anyhow!("no configuration is loaded"))?;
            let profile = config
                .profile(&config.default_profile, None)
                .map_err(|e| anyhow::anyhow!(e))?;
            let specs: Vec<_> = host.tools().iter().map(|t| (**t).clone()).collect();
            if let Some(tool) = &tool
                && !specs.iter().any(|t| &t.name == tool)
            {
                anyhow::bail!("no tool named {tool:?} is loaded");
            }
            print!(
                "{}",
                escape_lines(&layers::report(&config, &profile, &specs, tool.as_deref()))
            );
            if tool.is_none() {
                print!("\n{}", own::report(&config));
            }
            println!(
                "\nfile grants, denies, hosts and terminal rules as enforced: toolhost config \
                 show --effective --profile {}",
                profile.name
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Check {
            file: Some(file), ..
        } => {
            // Through the configuration's cache: the first call after a
            // check finds the plugin compiled.
            let cache = setup::effective_config(&cli.global).map_or_else(
                |_| crate::config::default_cache_dir(),
                |config| config.cache_dir,
            );
            let report =
                check::check_file_with(&file, cache.map(crate::runtime::ArtifactCache::new))
                    .await?;
            print!("{}", escape_lines(&report.to_string()));
            Ok(if report.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
