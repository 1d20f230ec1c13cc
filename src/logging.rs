//! Log output: human-readable text or one JSON object per line, filtered with the
//! tracing `EnvFilter` syntax (`info`, `inferprobe=debug`). Logs go to stderr; stdout is
//! left for command output such as `check` and the demo banner.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Directives added after the user's, whatever they ask for: these crates' traces carry
/// credentials (aws-sigv4 logs each canonical request, session token included, at TRACE;
/// the clouds' token crates log exchanges), and a secret must never reach a log line.
const SECRET_BEARING: [&str; 8] = [
    "aws_sigv4=off",
    "aws_smithy_runtime=debug",
    "aws_smithy_http_client=debug",
    "aws_config=debug",
    "google_cloud_auth=debug",
    "azure_identity=debug",
    "azure_core=debug",
    "typespec_client_core=debug",
];

pub fn init(format: LogFormat, filter: &str) -> Result<(), String> {
    let mut filter =
        EnvFilter::try_new(filter).map_err(|e| format!("invalid --log-level `{filter}`: {e}"))?;
    for directive in SECRET_BEARING {
        if let Ok(directive) = directive.parse() {
            filter = filter.add_directive(directive);
        }
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    result.map_err(|e| format!("cannot initialize logging: {e}"))
}
