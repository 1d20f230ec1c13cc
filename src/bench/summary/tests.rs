use super::*;
use crate::bench::percentile;
use crate::record::TokenCount;

const MS: Duration = Duration::from_millis(1);

fn success(start_ms: u64, ttft_ms: u64, itl_ms: u64, tokens: u64) -> RequestResult {
    let n = tokens as u32;
    RequestResult {
        request_id: String::new(),
        trace_id: None,
        start: MS * start_ms as u32,
        queued: Duration::ZERO,
        outcome: Ok(Measurement {
            ttft: Some(MS * ttft_ms as u32),
            tpot: (n > 1).then_some(MS * itl_ms as u32),
            timed_by: crate::record::TimedBy::Event,
            buffered: false,
            itl: vec![(MS * itl_ms as u32, n - 1)],
            e2el: MS * (ttft_ms + itl_ms * (tokens - 1)) as u32,
            output_tokens: Some(TokenCount::Usage(tokens)),
            prompt_tokens: Some(10),
            cached_prompt_tokens: None,
            answer: Default::default(),
        }),
        error: String::new(),
        input_tokens: 9,
        text: String::new(),
    }
}

fn failure(category: ErrorCategory) -> RequestResult {
    RequestResult {
        request_id: "bench-1".into(),
        trace_id: None,
        start: Duration::ZERO,
        queued: Duration::ZERO,
        outcome: Err(category),
        error: "boom".into(),
        input_tokens: 9,
        text: String::new(),
    }
}

#[test]
fn statistics_follow_numpy() {
    let sorted = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(percentile(&sorted, 50.0), 2.5);
    assert!((percentile(&sorted, 99.0) - 3.97).abs() < 1e-12);
    assert_eq!(percentile(&sorted, 0.0), 1.0);
    assert_eq!(percentile(&[], 99.0), 0.0);
    let stats = Stats::of(vec![4.0, 1.0, 3.0, 2.0], &[90.0]);
    assert_eq!((stats.mean, stats.median), (2.5, 2.5));
    assert!(
        (stats.std - 1.118_033_988_749_895).abs() < 1e-12,
        "population std"
    );
    assert!((stats.percentiles[0].1 - 3.7).abs() < 1e-12);
    assert_eq!(Stats::of(Vec::new(), &[99.0]).mean, 0.0);
}

#[test]
fn goodput_slos_are_inclusive() {
    let slo = Goodput::parse(&["ttft:100".into(), "tpot:10".into()])
        .unwrap()
        .unwrap();
    let good = success(0, 100, 10, 5);
    let Ok(m) = &good.outcome else { unreachable!() };
    assert!(slo.is_good(m));
    let slow = success(0, 101, 10, 5);
    let Ok(m) = &slow.outcome else { unreachable!() };
    assert!(!slo.is_good(m));
    assert!(Goodput::parse(&["ttft=5".into()]).is_err());
    assert!(Goodput::parse(&["itl:5".into()]).is_err());
    assert_eq!(Goodput::parse(&[]).unwrap(), None);
}

#[test]
fn metric_lists_are_ordered_like_vllm() {
    assert_eq!(
        Metric::parse_list("e2el,ttft,ttft").unwrap(),
        [Metric::Ttft, Metric::E2el]
    );
    assert!(Metric::parse_list("ttft,nope").is_err());
}

#[test]
fn the_summary_has_vllm_rows_in_vllm_order_and_format() {
    let results = vec![
        success(0, 100, 10, 5),
        success(500, 200, 20, 3),
        failure(ErrorCategory::RateLimited),
    ];
    let goodput = Goodput::parse(&["ttft:150".into()]).unwrap();
    let summary = Summary::compute(
        &results,
        Duration::from_secs(2),
        &[Metric::Ttft, Metric::Itl],
        &[50.0, 99.9],
        goodput.as_ref(),
    );
    let expected = "\
============ Serving Benchmark Result ============
Successful requests:                     2         
Failed requests:                         1         
Maximum request concurrency:             4         
Request rate configured (RPS):           1.50      
Benchmark duration (s):                  2.00      
Total input tokens:                      20        
Total generated tokens:                  8         
Request throughput (req/s):              1.00      
Request goodput (req/s):                 0.50      
Output token throughput (tok/s):         4.00      
Peak output token throughput (tok/s):    8.00      
Peak concurrent requests:                2.00      
Total token throughput (tok/s):          14.00     
---------------Time to First Token----------------
Mean TTFT (ms):                          150.00    
Median TTFT (ms):                        150.00    
P50 TTFT (ms):                           150.00    
P99.9 TTFT (ms):                         199.90    
---------------Inter-token Latency----------------
Mean ITL (ms):                           13.33     
Median ITL (ms):                         10.00     
P50 ITL (ms):                            10.00     
P99.9 ITL (ms):                          20.00     
----------------Errors by Category----------------
rate_limited:                            1         
==================================================
Failed requests, first 3 distinct messages per category (requests, first id):
  rate_limited (1): boom  [bench-1]
";
    assert_eq!(summary.render(Some(4), Some(1.5)), expected);

    let mut json = Map::new();
    summary.write_json(&mut json);
    assert_eq!(json["completed"], 2);
    assert_eq!(json["failed"], 1);
    assert_eq!(json["request_goodput"], 0.5);
    assert_eq!(json["mean_ttft_ms"], 150.0);
    assert_eq!(json["p99.9_ttft_ms"], 199.9);
    assert!(json.contains_key("std_itl_ms"));
    assert!(!json.contains_key("mean_e2el_ms"), "only selected metrics");
    assert_eq!(json["errors_by_category"]["rate_limited"], 1);
    assert_eq!(
        json["error_samples"]["rate_limited"][0],
        json!({"message": "boom", "request_id": "bench-1", "count": 1})
    );
}

#[test]
fn input_tokens_are_the_servers_when_reported_else_the_clients() {
    let mut unreported = success(0, 100, 10, 5);
    if let Ok(m) = &mut unreported.outcome {
        m.prompt_tokens = None;
    }
    // The server counts 10 (template, BOS); the client counted 9 for each.
    let results = vec![
        success(0, 100, 10, 5),
        unreported,
        failure(ErrorCategory::Http5xx),
    ];
    let summary = Summary::compute(&results, Duration::from_secs(1), &[], &[], None);
    assert_eq!(summary.total_input, 10 + 9, "vLLM's figure, successes only");
    assert_eq!(summary.total_input_client, 9 + 9);
    let mut json = Map::new();
    summary.write_json(&mut json);
    assert_eq!(json["total_input_tokens"], 19);
    assert_eq!(json["total_input_tokens_client"], 18);
}
