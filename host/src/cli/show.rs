//! The commands that report: `list`, `status`, `doctor` and `config`.

use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;

use super::args::{ConfigAction, Format, Global};
use crate::capability::terminal::{TerminalBackend, TerminalSandbox};
use crate::config::{self, Config};
use crate::escape;
use crate::host::Host;
use crate::toolsets::Selection;

pub(super) fn list(
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
            println!("{}", escape::json_pretty(&tools)?);
            return Ok(ExitCode::SUCCESS);
        }
        Format::Openai => {
            let tools =
                crate::serve::openai::tools(host, selection, strict).map_err(anyhow::Error::msg)?;
            println!("{}", escape::json_pretty(&tools)?);
            return Ok(ExitCode::SUCCESS);
        }
        Format::Mcp => {
            let tools =
                crate::serve::mcp::tools_list(host, selection).map_err(anyhow::Error::msg)?;
            println!("{}", escape::json_pretty(&tools)?);
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
        let row = format!(
            "{:name_width$}  {:set_width$}  {permissions:11}  {summary}",
            tool.name, tool.toolset
        );
        println!("{}", escape::escape(&row));
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn status(host: &Host, as_json: bool) -> Result<ExitCode> {
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
    // A server on this config watches the same places, as the same user.
    let running = host.config();
    let watched = running.as_ref().and_then(|running| {
        let file = match &running.source {
            config::ConfigSource::File(file) => Some(file.as_path()),
            config::ConfigSource::Embedded => None,
        };
        Some(crate::host::watch::can_watch(
            running.plugins.as_deref()?,
            file,
        ))
    });
    if as_json {
        let mut status = json!({ "plugins": plugins, "load_errors": errors });
        if let Some(watched) = &watched {
            status["watching"] = match watched {
                Ok(()) => json!({ "ok": true }),
                Err(why) => json!({ "ok": false, "error": why }),
            };
        }
        println!("{}", escape::json_pretty(&status)?);
    } else {
        if let Some(Err(why)) = &watched {
            println!(
                "! {}: a server would serve without picking up changes, and try again every \
                 {:?}",
                escape::escape(why),
                crate::host::watch::WATCH_RETRY
            );
        }
        for p in &plugins {
            let row = format!(
                "{:12} {}  {:8}  {}",
                p["plugin"].as_str().unwrap_or_default(),
                &p["version"].as_str().unwrap_or_default()[..12],
                p["compiled"].as_str().unwrap_or_default(),
                p["source"].as_str().unwrap_or_default()
            );
            println!("{}", escape::escape(&row));
        }
        for error in &errors {
            println!("✗ {}", escape::escape_lines(error));
        }
    }
    Ok(if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `toolhost doctor`: builds a sandbox around `true` and says what worked.
pub(super) async fn doctor(global: &Global) -> Result<ExitCode> {
    let support = crate::capability::terminal::confine::probe().await;
    let ready = support.namespaces.is_ok();
    match &support.namespaces {
        Ok(()) => println!(
            "✓ terminal sandbox: user, mount, PID, IPC, UTS and network namespaces, \
             seccomp filter, resource limits, no terminal of the host's"
        ),
        Err(reason) => println!("✗ terminal sandbox: {reason}"),
    }
    match &support.process_limit {
        Ok(how) => println!("✓ process limit: {how}"),
        Err(reason) => println!("✗ process limit: {reason}"),
    }
    match &support.cpu_share {
        Ok(how) => println!("✓ commands' CPU: {how}"),
        Err(fallback) => println!("! commands' CPU: {fallback}"),
    }
    match support.landlock_abi {
        Some(abi) => println!("✓ Landlock ABI {abi}: second filesystem layer, signal scoping"),
        None => println!("- Landlock: not enabled in this kernel (the mounts still confine files)"),
    }
    let config = super::setup::effective_config(global)?;
    println!("✓ commands' ids: {}", identity(&config));
    print!("{}", super::own::report(&config));
    let unconfined = config.unconfined_terminal_profiles();
    for name in &unconfined {
        println!(
            "! profile {name:?} sets terminal.sandbox = \"none\": its commands run \
             unconfined, with toolhost's own rights (in a session of their own, without \
             the terminal toolhost runs on)"
        );
    }
    for (name, profile) in &config.profiles {
        let terminal = &profile.terminal;
        if terminal.landlock == Some(crate::capability::terminal::TerminalLandlock::Off) {
            println!(
                "! profile {name:?} sets terminal.landlock = \"off\": the mounts, the seccomp \
                 filter and the commands' ids confine its commands without Landlock"
            );
        }
        if terminal.backend == Some(TerminalBackend::Ssh) {
            println!(
                "! profile {name:?}: ssh backend: the remote account decides what commands \
                 reach; toolhost does not enforce there the file grants, file.deny masks, \
                 read-only repository metadata (git run there later may run what a command \
                 planted), nosuid and nodev, the refusal of set-id bits, the commands' ids, the \
                 seccomp filter, Landlock nor the network and process limits (commands never \
                 reach this machine's terminals)"
            );
        } else if !terminal.wrapper.is_empty() && terminal.sandbox == Some(TerminalSandbox::None) {
            println!(
                "! profile {name:?}: terminal.wrapper runs on this machine unconfined: toolhost \
                 cannot mask what file.deny matches nor keep repository metadata read-only (git \
                 run on this machine later may run what a command planted); what its commands \
                 reach (files, set-id bits, ids, system calls) is the wrapper's business"
            );
        }
    }
    for (name, profile) in &config.profiles {
        let terminal = &profile.terminal;
        let (Some(TerminalBackend::Container), Some(container)) =
            (terminal.backend, &terminal.container)
        else {
            continue;
        };
        match crate::capability::terminal::check_container_engine(container).await {
            Ok(engine) => println!("✓ profile {name:?}: container backend, {engine}"),
            Err(reason) => println!("✗ profile {name:?}: container backend: {reason}"),
        }
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

/// Who sandboxed commands are on the host, as `doctor` says it.
fn identity(config: &Config) -> String {
    // SAFETY: geteuid and getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid == 0 {
        let (first, last) = config.sandbox_ids;
        format!(
            "toolhost runs as root, so commands run as host ids {first}-{last} (sandbox_ids), \
             one per tenant, never as root; the grants are idmapped to them"
        )
    } else {
        format!("commands run as toolhost's own uid {uid} and gid {gid} (1000 inside)")
    }
}

pub(super) fn config_command(global: &Global, action: ConfigAction) -> Result<ExitCode> {
    match action {
        ConfigAction::Show {
            effective: true,
            tenant,
        } => {
            let config = super::setup::effective_config(global)?;
            let report =
                super::effective::report(&config, global.profile.as_deref(), tenant.as_deref())?;
            print!("{}", escape::escape_lines(&report));
            Ok(ExitCode::SUCCESS)
        }
        ConfigAction::Show { .. } => {
            print!("{}", config::EMBEDDED);
            if let Ok(config::ConfigSource::File(path)) =
                Config::discover(global.config.as_deref()).map(|c| c.source)
            {
                eprintln!(
                    "note: this is the built-in configuration; {} is in use (`toolhost config \
                     show --effective` shows it as enforced)",
                    path.display()
                );
            }
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
                for (key, problem) in &config.unset_variables {
                    println!("! {}", escape::escape(&format!("{key}: {problem}")));
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => {
                println!("✗ {}", escape::escape_lines(&error.to_string()));
                Ok(ExitCode::FAILURE)
            }
        },
    }
}
