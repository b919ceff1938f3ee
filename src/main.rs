//! The `llmprobe` binary: parses arguments, sets up logging, calls into the
//! library and maps errors to exit codes.

use std::process::ExitCode;

use clap::Parser;
use tokio_util::sync::CancellationToken;

use llmprobe::cli::{Cli, Command, Format, LogFormat};
use llmprobe::{config, signals, terminal};

fn init_tracing(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
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
            | Some(Command::CheckConfig)
            | Some(Command::GenerateDocs { .. })
    );
    init_tracing(cli.log_format, if quiet { "warn" } else { "info" });
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
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("llmprobe: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let path = llmprobe::config_path(cli.config);
    match cli.command.unwrap_or(Command::Run) {
        Command::CheckConfig => match config::load(&path) {
            Ok(c) => {
                print!("{}", llmprobe::explain(&c));
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("{e}");
                Ok(ExitCode::FAILURE)
            }
        },
        Command::Sweep { targets, format } => {
            let config = match config::load(&path) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{e}");
                    return Ok(ExitCode::FAILURE);
                }
            };
            let reports =
                llmprobe::sweep_once(&config, &targets, llmprobe::progress_wanted()).await?;
            let pairs =
                llmprobe::sweep::pair::measure_once(&config, &targets, llmprobe::progress_wanted())
                    .await?;
            match format {
                Format::Table => {
                    print!(
                        "{}{}",
                        terminal::table(&reports),
                        terminal::pairs_table(&pairs)
                    )
                }
                Format::Json => println!("{}", terminal::json_with_pairs(&reports, &pairs)),
            }
            let all_ok = reports.iter().all(|r| r.success) && pairs.iter().all(|p| p.success);
            Ok(if all_ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
        Command::GenerateDocs { out } => {
            for file in llmprobe::manual::generate(&out)? {
                println!("{}", file.display());
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
            let config = match config::load(&path) {
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
