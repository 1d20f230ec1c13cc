//! The integration tests, one binary: each file in tests/ is a module here, so the
//! harness in tests/common/ is compiled once and one test binary is linked, not one per
//! file (each links every dependency: 67 of them took ~7 GB and minutes of linking).
//! Files stay their own binaries where they need a process to themselves: a global
//! allocator, process-wide CPU or file-descriptor figures, or environment variables set
//! while the daemon runs (Cargo.toml lists them).

#[path = "common/mod.rs"]
mod common;
#[path = "fuzz_drivers/mod.rs"]
mod fuzz_drivers;

#[path = "aws_cross_check.rs"]
mod aws_cross_check;
#[path = "backends.rs"]
mod backends;
#[path = "bench.rs"]
mod bench;
#[path = "canary.rs"]
mod canary;
#[path = "canary_pairs.rs"]
mod canary_pairs;
#[path = "canary_review.rs"]
mod canary_review;
#[path = "cli.rs"]
mod cli;
#[path = "clouds.rs"]
mod clouds;
#[path = "config_rules.rs"]
mod config_rules;
#[path = "dashboard_bounds.rs"]
mod dashboard_bounds;
#[path = "dashboards.rs"]
mod dashboards;
#[path = "deploy_steps.rs"]
mod deploy_steps;
#[path = "dialects.rs"]
mod dialects;
#[path = "discovery_file.rs"]
mod discovery_file;
#[path = "docs.rs"]
mod docs;
#[path = "docs_pages.rs"]
mod docs_pages;
#[path = "docs_tables.rs"]
mod docs_tables;
#[path = "docs_truths.rs"]
mod docs_truths;
#[path = "examples.rs"]
mod examples;
#[path = "exposition.rs"]
mod exposition;
#[path = "exposition_strict.rs"]
mod exposition_strict;
#[path = "faults.rs"]
mod faults;
#[path = "fuzz_props.rs"]
mod fuzz_props;
#[path = "gate_evidence.rs"]
mod gate_evidence;
#[path = "gate_nodes.rs"]
mod gate_nodes;
#[path = "hostile.rs"]
mod hostile;
#[path = "imports.rs"]
mod imports;
#[path = "kube_api.rs"]
mod kube_api;
#[path = "kube_api_wire.rs"]
mod kube_api_wire;
#[path = "layout.rs"]
mod layout;
#[path = "measurement.rs"]
mod measurement;
#[path = "media.rs"]
mod media;
#[path = "native_histograms.rs"]
mod native_histograms;
#[path = "native_snapshot.rs"]
mod native_snapshot;
#[path = "operations.rs"]
mod operations;
#[path = "operator_scrape.rs"]
mod operator_scrape;
#[path = "otlp.rs"]
mod otlp;
#[path = "otlp_checks.rs"]
mod otlp_checks;
#[path = "prefix_routing.rs"]
mod prefix_routing;
#[path = "prefix_servers.rs"]
mod prefix_servers;
#[path = "prometheus_rules.rs"]
mod prometheus_rules;
#[path = "quota.rs"]
mod quota;
#[path = "real_server.rs"]
mod real_server;
#[path = "real_server_adapters.rs"]
mod real_server_adapters;
#[path = "real_server_canary.rs"]
mod real_server_canary;
#[path = "real_server_prefix.rs"]
mod real_server_prefix;
#[path = "real_server_sampler.rs"]
mod real_server_sampler;
#[path = "real_server_session.rs"]
mod real_server_session;
#[path = "real_server_structured.rs"]
mod real_server_structured;
#[path = "reasoning.rs"]
mod reasoning;
#[path = "reload.rs"]
mod reload;
#[path = "rollout_undo.rs"]
mod rollout_undo;
#[path = "rollouts.rs"]
mod rollouts;
#[path = "sampler.rs"]
mod sampler;
#[path = "scrape_probe.rs"]
mod scrape_probe;
#[path = "secrets.rs"]
mod secrets;
#[path = "session.rs"]
mod session;
#[path = "shutdown.rs"]
mod shutdown;
#[path = "sim_media.rs"]
mod sim_media;
#[path = "sim_prefix_cache.rs"]
mod sim_prefix_cache;
#[path = "sim_session.rs"]
mod sim_session;
#[path = "skip_alert.rs"]
mod skip_alert;
#[path = "sse_fixtures.rs"]
mod sse_fixtures;
#[path = "status_page.rs"]
mod status_page;
#[path = "stream_review.rs"]
mod stream_review;
#[path = "structured.rs"]
mod structured;
#[path = "structured_requests.rs"]
mod structured_requests;
#[path = "structured_review.rs"]
mod structured_review;
#[path = "timing_path.rs"]
mod timing_path;
#[path = "tls.rs"]
mod tls;
#[path = "trace_context.rs"]
mod trace_context;
