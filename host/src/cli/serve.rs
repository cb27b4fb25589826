//! `toolhost serve` and `toolhost watch`: serving with hot reload until a
//! signal, and printing reloads as they happen.

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use tokio_util::sync::CancellationToken;

use super::args::{Global, ServeArgs};
use super::setup::{effective_config, host, serving_host, watched};
use crate::serve::http::{HttpServer, ServeOptions};

/// `toolhost serve`: MCP over stdio, or the HTTP server with `--http`; both
/// hot-reload. The first SIGINT or SIGTERM shuts down gracefully (the
/// requests in flight are answered), a second one exits at once with 130.
pub(super) async fn serve(global: &Global, args: ServeArgs) -> Result<ExitCode> {
    let config = effective_config(global)?;
    match &args.http {
        // Refused before anything loads: what the server would need is
        // known from the configuration.
        Some(addr) => {
            if !config.unset_variables.is_empty() {
                let problems: Vec<String> = config
                    .unset_variables
                    .iter()
                    .map(|(key, problem)| format!("\n  - {key}: {problem}"))
                    .collect();
                anyhow::bail!(
                    "{}: the HTTP server cannot start:{}",
                    config.source,
                    problems.concat()
                );
            }
            if let Ok(addr) = addr.parse() {
                crate::serve::http::refuse_open_non_loopback(
                    Some(&config.source),
                    &config.default_profile,
                    config.tenants.len(),
                    addr,
                )?;
            }
        }
        None => super::setup::warn_unset(&config),
    }
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

/// Cancels `stop` on the first SIGINT, SIGTERM or SIGHUP (the terminal that
/// started it closed); exits on the second. The
/// handlers are installed before this returns, so a signal that arrives once
/// the server has announced itself is never missed.
fn stop_on_signals(stop: CancellationToken) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let mut hangup = signal(SignalKind::hangup()).context("listening for SIGHUP")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
            _ = hangup.recv() => {}
        }
        tracing::info!("shutting down (signal again to stop at once)");
        stop.cancel();
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
            _ = hangup.recv() => {}
        }
        tracing::warn!("second signal: stopping without waiting for calls in flight");
        // Exiting drops nothing: end the commands the calls run here.
        crate::capability::terminal::kill_commands();
        std::process::exit(130);
    });
    Ok(())
}

pub(super) async fn watch(global: &Global, json: bool) -> Result<ExitCode> {
    let config = effective_config(global)?;
    let host = host(global).await?;
    let (dir, config_file) = watched(&config);
    let mut events = host.events();
    let _watcher = host.watch(&dir, config_file.as_deref(), Default::default())?;
    let watching = format!(
        "{}{}",
        dir.display(),
        config_file
            .as_ref()
            .map(|c| format!(" and {}", c.display()))
            .unwrap_or_default()
    );
    eprintln!(
        "watching {} — {} tools loaded; Ctrl-C to stop",
        crate::escape::escape(&watching),
        host.tools().len()
    );
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(event) if json => println!("{}", crate::escape::json(&event)?),
                Ok(event) => println!(
                    "{} {}",
                    crate::audit::now_rfc3339(),
                    crate::escape::escape(&event.to_string())
                ),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    eprintln!("warning: {n} events were missed");
                }
                Err(_) => return Ok(ExitCode::SUCCESS),
            },
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        }
    }
}
