use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    sim: SimConfig,
}

#[test]
fn cli_defaults_equal_the_programmatic_defaults() {
    assert_eq!(Cli::parse_from(["sim"]).sim, SimConfig::default());
    let cli = Cli::parse_from(["sim", "--no-usage", "--fault", "reset=0.5", "--ttft", "2s"]);
    assert!(!cli.sim.usage);
    assert_eq!(cli.sim.faults, vec![(Fault::Reset, 0.5)]);
    assert_eq!(cli.sim.ttft, Duration::from_secs(2));
    let cli = Cli::parse_from([
        "sim",
        "--prefill-per-image",
        "300ms",
        "--prefill-per-megapixel",
        "1s",
    ]);
    assert_eq!(cli.sim.prefill.per_image, Duration::from_millis(300));
    assert_eq!(cli.sim.prefill.per_megapixel, Duration::from_secs(1));
    let output = |n: &str| {
        Cli::parse_from(["sim", "--output-tokens", n])
            .sim
            .output_tokens
    };
    assert_eq!(output("0"), std::num::NonZeroU32::new(1));
    assert_eq!(output("7"), std::num::NonZeroU32::new(7));
    assert!(Cli::try_parse_from(["sim", "--output-tokens", "-1"]).is_err());
}

#[test]
fn gateway_flags() {
    let cli = Cli::parse_from([
        "sim",
        "--replicas",
        "3",
        "--route",
        "session-header",
        "--route-header",
        "x-conversation",
        "--replica-fault",
        "1=history_reject",
        "--replica-fault",
        "2=ignore_tool_results=0.5",
        "--max-model-len",
        "4096",
    ]);
    let gateway = &cli.sim.gateway;
    assert_eq!(gateway.route, Route::SessionHeader);
    assert_eq!(gateway.route_header, "x-conversation");
    assert_eq!(gateway.faults_of(1), [(Fault::HistoryReject, 1.0)]);
    assert_eq!(gateway.faults_of(2), [(Fault::IgnoreToolResults, 0.5)]);
    assert!(gateway.faults_of(0).is_empty());
    assert_eq!(gateway.validate(), Ok(()));
    assert_eq!(cli.sim.max_model_len, Some(4096));
    let first = Cli::parse_from(["sim", "--route", "first-message"]);
    assert_eq!(first.sim.gateway.route, Route::FirstMessage);
    let beyond = Cli::parse_from(["sim", "--replicas", "2", "--replica-fault", "2=reset"]);
    assert!(beyond.sim.gateway.validate().is_err());
    assert!(Cli::try_parse_from(["sim", "--max-model-len", "0"]).is_err());
}

#[test]
fn tokens_per_chunk_is_a_count_or_a_cycle() {
    let sizes = |arg: &str| Cli::try_parse_from(["sim", "--tokens-per-chunk", arg]);
    let cycle = sizes("2,1,3").unwrap().sim.tokens_per_chunk;
    let firsts: Vec<u64> = (0..7).map(|j| cycle.nth(j)).collect();
    assert_eq!(firsts, [2, 1, 3, 2, 1, 3, 2]);
    assert_eq!(
        sizes("4").unwrap().sim.tokens_per_chunk,
        ChunkSizes::from(4)
    );
    for bad in ["0", "2,0", "x", "", "2,,1"] {
        assert!(sizes(bad).is_err(), "{bad:?} accepted");
    }
}
