//! The `llmprobe` binary: parses arguments, sets up logging, calls into the
//! library and maps errors to exit codes.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use tokio_util::sync::CancellationToken;

use llmprobe::cli::{Cli, Command, Format, LogFormat};
use std::sync::Arc;

use llmprobe::faces::json::Document;
use llmprobe::faces::progress::{self, Progress};
use llmprobe::faces::{explain, html, pairs, summary, text};
use llmprobe::probe::tls::Clients;
use llmprobe::sweep::{NoObserver, Observer, SweepEnv};
use llmprobe::{config, faces, schedule, signals, sweep};

fn init_tracing(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    // Colours only for a person at a terminal, not into files or journald.
    let ansi = std::io::stderr().is_terminal();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(llmprobe::log_writer::Stderr { ansi });
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A one-shot sweep prints its results on stdout; routine logs would only
    // clutter the terminal.
    let quiet = matches!(
        cli.command,
        Some(Command::Sweep { .. })
            | Some(Command::CheckConfig { .. })
            | Some(Command::Report { .. })
            | Some(Command::GenerateDocs { .. })
    );
    // Before the runtime starts its threads (the environment is changed
    // while this is the only thread that could read it), and before the
    // log filter is made, so that the file's RUST_LOG counts.
    if let Some(path) = &cli.env_file {
        match config::env_file::read(path) {
            Ok(vars) => {
                for (key, value) in vars {
                    std::env::set_var(key, value);
                }
            }
            Err(e) => {
                eprintln!("llmprobe: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    init_tracing(cli.log_format, if quiet { "warn" } else { "info" });
    llmprobe::log_writer::redact_panics();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("llmprobe: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("llmprobe: {e:#}");
            ExitCode::FAILURE
        }
    };
    // A read that hangs in the kernel (a hung mount) holds its blocking
    // thread for good; dropping the runtime would wait for it. It is left
    // behind instead, so that SIGTERM ends the process whatever a read is
    // doing (docs/operating.md states the bound).
    runtime.shutdown_timeout(llmprobe::EXIT_GRACE);
    code
}

/// Says on standard error which proxy each swept target goes through, when
/// the environment sets any proxy variable (or a target asks for them).
fn say_proxies(config: &config::Config, names: &[String]) {
    let proxies = config::proxy::ProxyVariables::from_env();
    let chosen = config
        .targets
        .iter()
        .filter(|t| names.is_empty() || names.contains(&t.name));
    for t in chosen {
        if proxies.any() || t.proxy == config::proxy::ProxyMode::Environment {
            eprintln!("{}: proxy {}", t.name, explain::proxy_line(t, &proxies));
        }
    }
}

/// Writes `text` to `output`, or to standard output when there is none.
fn emit(text: &str, output: Option<&Path>) -> anyhow::Result<()> {
    match output {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display())),
        None => print_out(text),
    }
}

/// Prints on standard output; a reader that went away (`| head -1`) ends
/// the output, not the program with a panic.
fn print_out(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("cannot write to standard output: {e}"))
        }
        _ => Ok(()),
    }
}

/// Exit status of `sweep` when a sweep or a pair failed.
const EXIT_SWEEP_FAILED: u8 = 2;

/// Exit status of `sweep` when a setup mistake stopped a sweep (wins over
/// [`EXIT_SWEEP_FAILED`]: it is what to fix first).
const EXIT_SETUP_ERROR: u8 = 3;

/// Exit status of `sweep` when a daemon is sweeping a selected target now
/// (nothing was swept; `--force` sweeps anyway).
const EXIT_BUSY: u8 = 4;

/// `llmprobe sweep`: every selected target swept once, then every selected
/// gateway pair measured once, the results written as `format`; exit 4,
/// sweeping nothing, when a daemon is sweeping a selected target, 3
/// when a setup mistake stopped a sweep (one line each on standard error),
/// else 2 when a sweep or a pair failed. With `options.state`, each target
/// starts from the daemon's saved state there (read only). Ctrl-C or SIGTERM
/// ends the sweep under way: what was measured is written, marked partial,
/// and the exit status is 130 (143 after SIGTERM).
async fn sweep(
    path: &Path,
    targets: &[String],
    format: Format,
    output: Option<&Path>,
    options: schedule::once::Options<'_>,
) -> anyhow::Result<ExitCode> {
    let config = match llmprobe::load_config(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    say_proxies(&config, targets);
    let stop = CancellationToken::new();
    let stopped = signals::interrupt(stop.clone())
        .map_err(|e| anyhow::anyhow!("cannot handle Ctrl-C and SIGTERM: {e}"))?;
    let progress = progress::wanted().then(|| Arc::new(Progress::start()));
    if let Some(p) = &progress {
        let p = p.clone();
        llmprobe::log_writer::around_lines(Some(Box::new(move |write| p.suspended(write))));
    }
    let observer: Arc<dyn Observer> = match &progress {
        Some(p) => p.clone(),
        None => Arc::new(NoObserver),
    };
    // The display says at once that Ctrl-C was heard: ending the requests
    // in flight can take a few seconds.
    let heard = progress.clone().map(|p| {
        let stop = stop.clone();
        tokio::spawn(async move {
            stop.cancelled().await;
            p.interrupted();
        })
    });
    let reports = match schedule::once::sweep_with(
        &config,
        targets,
        observer.clone(),
        options,
        &stop,
    )
    .await
    {
        Ok(r) => r,
        Err(busy @ schedule::once::Refused::Busy(_)) => {
            if let Some(p) = &progress {
                llmprobe::log_writer::around_lines(None);
                p.done();
            }
            eprintln!("{busy}");
            return Ok(ExitCode::from(EXIT_BUSY));
        }
        Err(e) => return Err(anyhow::Error::msg(e.to_string())),
    };
    let pairs = schedule::once::measure_pairs_until(&config, targets, observer, &stop)
        .await
        .map_err(anyhow::Error::msg)?;
    if let Some(h) = heard {
        h.abort();
    }
    if let Some(p) = &progress {
        llmprobe::log_writer::around_lines(None);
        p.done();
    }
    let interrupted = stop.is_cancelled();
    let all_ok = reports.iter().all(|r| r.success) && pairs.iter().all(|p| p.success);
    let mut setup_errors = false;
    for (r, e) in reports
        .iter()
        .filter_map(|r| Some((r, r.setup_error.as_ref()?)))
    {
        eprintln!("{}: {}", r.target, e.message);
        setup_errors = true;
    }
    let mut doc = Document::new(reports, pairs);
    doc.partial = interrupted;
    let text = match format {
        Format::Table => format!(
            "{}{}{}{}",
            if interrupted {
                format!("{}\n\n", text::PARTIAL)
            } else {
                String::new()
            },
            summary::text(&doc.targets),
            text::table(&doc.targets),
            pairs::pairs_table(&doc.gateway_pairs)
        ),
        Format::Json => format!("{}\n", doc.to_json()),
        Format::Html => {
            let settings = html::settings::from_config(&llmprobe::fleet::view_once(&config));
            html::page::report(&doc, &settings)
        }
    };
    emit(&text, output)?;
    Ok(if interrupted {
        eprintln!(
            "llmprobe: interrupted: the report holds what was measured before {}",
            stopped.name()
        );
        ExitCode::from(stopped.exit_status().unwrap_or(signals::EXIT_INTERRUPTED))
    } else if setup_errors {
        ExitCode::from(EXIT_SETUP_ERROR)
    } else if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_SWEEP_FAILED)
    })
}

/// `check-config --online`: each target's server asked (discovered ones
/// too, this instance's shard, as `sweep` does), one line each; exit 3 when
/// one is not ready to be swept.
async fn check_online(config: &config::Config) -> anyhow::Result<ExitCode> {
    let config = llmprobe::fleet::view_once(config);
    let env = SweepEnv::new(
        Clients::of(&config).map_err(anyhow::Error::msg)?,
        config.schedule.max_in_flight_total,
        CancellationToken::new(),
        Arc::new(NoObserver),
    );
    let mut all_ready = true;
    print_out("online:\n")?;
    for target in &config.targets {
        let line = match schedule::endpoint::reach(target).await {
            Ok(at) => {
                let online = sweep::online::check(&env, target, &at.base_url).await;
                all_ready &= online.ready();
                faces::online::line(target, &online, config.schedule.sweep_timeout)
            }
            Err(e) => {
                all_ready = false;
                format!("{}: cannot reach: {e}", target.name)
            }
        };
        print_out(&format!("{line}\n"))?;
    }
    Ok(if all_ready {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_SETUP_ERROR)
    })
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    // `report` reads a configuration only when one is named: the default
    // one need not be what produced the results.
    let given_config = cli.config.clone();
    let command = cli.command.unwrap_or(Command::Run);
    let path = match &command {
        // These read no configuration (`report` only a named one).
        Command::Simulate(_) | Command::GenerateDocs { .. } | Command::Report { .. } => {
            given_config.clone().unwrap_or_default()
        }
        _ => match llmprobe::config_path(cli.config) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("llmprobe: {e}");
                return Ok(ExitCode::FAILURE);
            }
        },
    };
    match command {
        Command::CheckConfig { online } => match llmprobe::load_config(&path) {
            Ok(c) => {
                print_out(&explain::explain(&c))?;
                if online {
                    return check_online(&c).await;
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("{e}");
                Ok(ExitCode::FAILURE)
            }
        },
        Command::Sweep {
            targets,
            format,
            output,
            state,
            force,
        } => {
            let options = schedule::once::Options {
                state: state.as_deref(),
                force,
            };
            sweep(&path, &targets, format, output.as_deref(), options).await
        }
        Command::Report { results, output } => {
            let text = if results.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())
                    .map_err(|e| anyhow::anyhow!("cannot read standard input: {e}"))?
            } else {
                std::fs::read_to_string(&results)
                    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", results.display()))?
            };
            let doc = match Document::read(&text) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("{}: {e}", results.display());
                    return Ok(ExitCode::FAILURE);
                }
            };
            let settings = match given_config {
                None => Default::default(),
                Some(_) => match config::load(&path) {
                    Ok(c) => html::settings::from_config(&llmprobe::fleet::view_once(&c)),
                    Err(e) => {
                        eprintln!("{e}");
                        return Ok(ExitCode::FAILURE);
                    }
                },
            };
            emit(&html::page::report(&doc, &settings), output.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::GenerateDocs { out } => {
            for file in llmprobe::manual::generate(&out)? {
                print_out(&format!("{}\n", file.display()))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Simulate(args) => {
            let (listen, sim) = (*args).into_config();
            let params = sim.resolve().map_err(anyhow::Error::msg)?;
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
            tracing::info!(%listen, engine = ?params.engine, model = %params.model_name, "simulated engine serving");
            let stop = CancellationToken::new();
            let (tx, _rx) = tokio::sync::mpsc::channel(1);
            signals::listen(tx, stop.clone())?;
            llmprobe::sim::serve(listener, params, stop).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run => {
            let config = match llmprobe::load_config(&path) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{e}");
                    return Ok(ExitCode::FAILURE);
                }
            };
            let listener = tokio::net::TcpListener::bind(config.listen)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
            tracing::info!(listen = %listener.local_addr()?, "serving /metrics");
            let shutdown = CancellationToken::new();
            let (reload_tx, reload_rx) = tokio::sync::mpsc::channel(4);
            signals::listen(reload_tx, shutdown.clone())?;
            llmprobe::run(&path, config, listener, shutdown, reload_rx).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
