//! The `inferprobe` binary: parse flags, set up logging and the runtime, run the command.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use inferprobe::cli::{Cli, execute};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = inferprobe::logging::init(cli.log_format, &cli.log_level) {
        eprintln!("error: {e}");
        return ExitCode::from(inferprobe::config::EXIT_CONFIG as u8);
    }
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
    let code = runtime.block_on(execute(cli.command));
    // Do not wait on stragglers such as a DNS lookup in a blocking thread.
    runtime.shutdown_timeout(Duration::from_secs(1));
    ExitCode::from(code)
}
