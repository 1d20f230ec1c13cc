//! Multimodal probes end to end: the daemon sends images in each wire format, the
//! simulator decodes every one and lists it at `/sim/media`, and these tests read that list
//! back: the configured size and count arrive, each probe's image is new unless `cache`,
//! files go out in order, per-image prefill shows in TTFT, and a refused image is an error
//! whose probe names what it sent.

use crate::common;

use std::collections::BTreeMap;
use std::io::Cursor;
use std::time::Duration;

use common::{Daemon, Scrape, parse_config, start_daemon, start_sim};
use inferprobe::sim::{Prefill, SimConfig};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

fn target(sim: &str, name: &str, backend: &str, media: &str) -> String {
    format!(
        r#"
        [[targets]]
        name = "{name}"
        backend = "{backend}"
        url = "{sim}"
        model = "m"
        {media}
        "#
    )
}

fn config(rate: f64, concurrency: u32, targets: &[String]) -> String {
    format!(
        r#"
        seed = 3
        [defaults]
        rate = {rate}
        max_concurrency = {concurrency}
        input_tokens = 8
        output_tokens = 4
        ttft_timeout = "5s"
        request_timeout = "20s"
        {}
        "#,
        targets.concat()
    )
}

/// What the simulator decoded, in arrival order.
async fn ledger(sim: &common::Sim) -> Vec<Value> {
    reqwest::get(format!("{}/sim/media", sim.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The ledger's entries, grouped by request in arrival order, of one target's requests
/// (request ids start with the target's `request_id_prefix`, `inferprobe-` by default).
fn by_request(ledger: &[Value]) -> Vec<Vec<&Value>> {
    let mut order = Vec::new();
    let mut groups: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for entry in ledger {
        let id = entry["request_id"].as_str().expect("every probe has an id");
        if !groups.contains_key(id) {
            order.push(id);
        }
        groups.entry(id).or_default().push(entry);
    }
    order.iter().map(|id| groups[id].clone()).collect()
}

async fn probe_until(daemon: &Daemon, target: &str, successes: f64) -> Scrape {
    let scrape = daemon
        .wait_for(WAIT, |s| {
            s.successes(target) >= successes || s.all_errors(target) > 0.0
        })
        .await;
    assert_eq!(scrape.all_errors(target), 0.0, "{}", scrape.text);
    scrape
}

#[tokio::test]
async fn every_wire_format_sends_decodable_images_of_the_configured_size_and_count() {
    for backend in ["openai-chat", "anthropic", "openai-responses"] {
        let sim = start_sim(SimConfig::default()).await;
        let images = r#"images = { count = 2, width = 200, height = 120, format = "png" }"#;
        let daemon = start_daemon(&config(
            10.0,
            4,
            &[target(&sim.url(), "vl", backend, images)],
        ))
        .await;
        probe_until(&daemon, "vl", 4.0).await;
        daemon.stop().await;

        let ledger = ledger(&sim).await;
        let requests = by_request(&ledger);
        assert!(requests.len() >= 4, "{backend}: {ledger:?}");
        for images in &requests {
            assert_eq!(images.len(), 2, "{backend}: two images per request");
            for image in images {
                assert_eq!(image["kind"], "image", "{backend}");
                assert_eq!(image["source"], "data", "{backend}: inline, base64");
                assert_eq!(image["format"], "png", "{backend}");
                assert_eq!(
                    (image["width"].as_u64(), image["height"].as_u64()),
                    (Some(200), Some(120)),
                    "{backend}"
                );
            }
        }
        let hashes: std::collections::HashSet<&str> =
            ledger.iter().map(|e| e["hash"].as_str().unwrap()).collect();
        assert_eq!(
            hashes.len(),
            ledger.len(),
            "{backend}: every image of every probe is new, so no cache can serve it"
        );
    }
}

#[tokio::test]
async fn cache_sends_the_same_image_with_every_probe() {
    let sim = start_sim(SimConfig::default()).await;
    let images = r#"images = { width = 64, height = 64, cache = true }"#;
    let daemon = start_daemon(&config(
        10.0,
        4,
        &[target(&sim.url(), "vl", "openai-chat", images)],
    ))
    .await;
    probe_until(&daemon, "vl", 4.0).await;
    daemon.stop().await;

    let ledger = ledger(&sim).await;
    assert!(ledger.len() >= 4);
    assert!(
        ledger.iter().all(|e| e["hash"] == ledger[0]["hash"]),
        "one image, every time: {ledger:?}"
    );
    assert_eq!(ledger[0]["format"], "jpeg", "the default format");
}

fn png(width: u32, height: u32) -> Vec<u8> {
    let pixels = image::RgbImage::from_fn(width, height, |x, y| image::Rgb([x as u8, y as u8, 7]));
    let mut out = Cursor::new(Vec::new());
    pixels.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

#[tokio::test]
async fn a_file_list_is_sent_in_order() {
    let dir = tempfile::tempdir().unwrap();
    // Three files told apart by their size.
    let files: Vec<String> = [(10, 11), (20, 21), (30, 31)]
        .iter()
        .enumerate()
        .map(|(i, &(w, h))| {
            let path = dir.path().join(format!("{i}.png"));
            std::fs::write(&path, png(w, h)).unwrap();
            format!("{:?}", path.display().to_string())
        })
        .collect();
    let images = format!("images = {{ files = [{}] }}", files.join(", "));
    let sim = start_sim(SimConfig::default()).await;
    // One probe at a time, so arrival order is the order the files were drawn in.
    let daemon = start_daemon(&config(
        20.0,
        1,
        &[target(&sim.url(), "files", "anthropic", &images)],
    ))
    .await;
    probe_until(&daemon, "files", 7.0).await;
    daemon.stop().await;

    let widths: Vec<u64> = ledger(&sim)
        .await
        .iter()
        .map(|e| e["width"].as_u64().unwrap())
        .collect();
    assert!(widths.len() >= 7, "{widths:?}");
    let expected: Vec<u64> = [10, 20, 30]
        .into_iter()
        .cycle()
        .take(widths.len())
        .collect();
    assert_eq!(widths, expected);
}

#[test]
fn a_bad_file_fails_the_configuration_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.png");
    std::fs::write(&good, png(8, 8)).unwrap();
    let truncated = dir.path().join("cut.png");
    std::fs::write(&truncated, &png(64, 64)[..60]).unwrap();
    let text = dir.path().join("notes.png");
    std::fs::write(&text, "not an image").unwrap();
    let missing = dir.path().join("missing.png");

    for (bad, why) in [
        (&truncated, "truncated PNG"),
        (&text, "text named .png"),
        (&missing, "missing file"),
    ] {
        let toml = config(
            1.0,
            1,
            &[target(
                "http://127.0.0.1:1",
                "vl",
                "openai-chat",
                &format!(
                    "images = {{ files = [{:?}, {:?}] }}",
                    good.display().to_string(),
                    bad.display().to_string()
                ),
            )],
        );
        let error = parse_config(&toml).expect_err(why).to_string();
        assert!(
            error.contains("targets[0].images.files[1]"),
            "{why}: {error}"
        );
        assert!(
            error.contains(&bad.display().to_string()),
            "{why}: names the file: {error}"
        );
    }

    let toml = config(
        1.0,
        1,
        &[target(
            "http://127.0.0.1:1",
            "vl",
            "openai",
            "images = { count = 1 }",
        )],
    );
    let error = parse_config(&toml)
        .expect_err("completions carry no images")
        .to_string();
    assert!(error.contains("targets[0].images"), "{error}");
}

fn ttft_mean(scrape: &Scrape, target: &str) -> f64 {
    let (sum, count) = scrape.histogram("inferprobe_time_to_first_token_seconds", target);
    assert!(count > 0.0, "{target}: no TTFT observed");
    sum / count
}

#[tokio::test]
async fn per_image_prefill_shows_in_ttft() {
    const PER_IMAGE: Duration = Duration::from_millis(150);
    const PER_MEGAPIXEL: Duration = Duration::from_millis(400);
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(30),
        prefill: Box::new(Prefill {
            per_image: PER_IMAGE,
            per_megapixel: PER_MEGAPIXEL,
            ..Prefill::default()
        }),
        ..SimConfig::default()
    })
    .await;
    let daemon = start_daemon(&config(
        4.0,
        4,
        &[
            target(&sim.url(), "text", "openai-chat", ""),
            target(
                &sim.url(),
                "vl",
                "openai-chat",
                r#"images = { count = 2, width = 500, height = 400 }"#,
            ),
        ],
    ))
    .await;
    let scrape = daemon
        .wait_for(WAIT, |s| {
            s.successes("text") >= 6.0 && s.successes("vl") >= 6.0
        })
        .await;
    daemon.stop().await;
    assert_eq!(scrape.all_errors("vl") + scrape.all_errors("text"), 0.0);

    // Two images of 0.2 MP: 2 × 150 ms + 0.4 MP × 400 ms/MP.
    let extra = 2.0 * PER_IMAGE.as_secs_f64() + 0.4 * PER_MEGAPIXEL.as_secs_f64();
    let (text, vl) = (ttft_mean(&scrape, "text"), ttft_mean(&scrape, "vl"));
    assert!((0.030..0.030 + 0.2).contains(&text), "text TTFT {text}");
    // The lower bound is the point: the simulator schedules the first token from arrival,
    // so no TTFT can be under 30 ms + the prefill. Above it, decoding two images in a debug
    // build on a busy 2-core machine has added up to 0.35 s (0.75 and 0.81 s seen), so the
    // upper bound only catches a runaway.
    assert!(
        (0.030 + extra..0.030 + extra + 1.0).contains(&vl),
        "vision TTFT {vl}: expected 30 ms + {extra} s of prefill"
    );
}

#[tokio::test]
async fn a_refused_image_is_an_error_and_the_probe_says_what_it_sent() {
    // The simulator fetches URL images itself; nothing listens on port 1, so it answers
    // 400 as vLLM does when an image URL cannot be loaded.
    let sim = start_sim(SimConfig::default()).await;
    let images = r#"images = { count = 2, urls = ["http://127.0.0.1:1/gone.png"] }"#;
    let daemon = start_daemon(&config(
        10.0,
        2,
        &[target(&sim.url(), "vl", "openai-chat", images)],
    ))
    .await;
    let scrape = daemon
        .wait_for(WAIT, |s| s.errors("vl", "http_4xx") >= 2.0)
        .await;
    assert_eq!(scrape.successes("vl"), 0.0, "{}", scrape.text);
    let page = daemon.get("/", None).await.text().await.unwrap();
    daemon.stop().await;
    assert!(page.contains("sent 2 image(s)"), "{page}");
    assert!(
        page.contains("gone.png"),
        "the server's reason is shown: {page}"
    );
    assert!(
        !scrape.text.contains("gone.png") && !scrape.text.contains("image(s)"),
        "what was sent is never a label"
    );
}

#[derive(clap::Parser)]
struct BenchCli {
    #[command(flatten)]
    bench: inferprobe::bench::BenchArgs,
}

fn bench_args(sim: &str, extra: &[&str]) -> inferprobe::bench::BenchArgs {
    use clap::Parser;
    let mut argv = vec![
        "bench",
        "--url",
        sim,
        "--backend",
        "openai-chat",
        "--model",
        "m",
        "--input-tokens",
        "8",
        "--output-tokens",
        "4",
        "--quiet",
    ];
    argv.extend_from_slice(extra);
    BenchCli::parse_from(argv).bench
}

#[tokio::test]
async fn bench_takes_the_same_settings_as_flags() {
    let sim = start_sim(SimConfig::default()).await;
    let args = bench_args(
        &sim.url(),
        &[
            "--num-prompts",
            "5",
            "--image-count",
            "2",
            "--image-width",
            "80",
            "--image-height",
            "40",
            "--image-format",
            "png",
        ],
    );
    let plan = inferprobe::bench::plan(&args).unwrap();
    let report = inferprobe::bench::run(&args, plan, &inferprobe::Shutdown::new())
        .await
        .unwrap();
    assert_eq!(report.json["completed"], 5, "{}", report.text);

    let ledger = ledger(&sim).await;
    let requests = by_request(&ledger);
    assert_eq!(requests.len(), 5);
    for image in requests.iter().flatten() {
        assert_eq!(image["format"], "png");
        assert_eq!(
            (image["width"].as_u64(), image["height"].as_u64()),
            (Some(80), Some(40))
        );
    }
    assert!(requests.iter().all(|r| r.len() == 2));

    // A bad setting names the flag, not the config key it becomes.
    let args = bench_args(&sim.url(), &["--image-format", "gif"]);
    let error = inferprobe::bench::plan(&args)
        .err()
        .expect("gif is refused")
        .to_string();
    assert!(error.contains("--image-format"), "{error}");
    let args = bench_args(&sim.url(), &["--image-file", "/nonexistent/cat.png"]);
    let error = inferprobe::bench::plan(&args)
        .err()
        .expect("a missing file is refused")
        .to_string();
    assert!(
        error.contains("--image-file") && error.contains("cat.png"),
        "{error}"
    );
}
