//! The adapter check on a healthy pool for a day's rounds (issue 58's "no alert on a healthy
//! fleet time-scaled to 24 hours"): 1,440 rounds a replica, 13k requests, about a minute of
//! both cores in a debug build. A binary of its own, so the suite's timing-sensitive tests
//! do not share the machine with it.

mod common;

use std::time::Duration;

use common::adapters::{BAD, base, checks, pool_config, pool_file, sim};
use common::{Scrape, start_daemon, start_sim};

/// A healthy pool for a day's rounds (1,440 a replica, a minute apart at the defaults) with
/// benign near-tie flips on every replica (GPU batch noise): nothing the alerts count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_pool_with_benign_noise_counts_nothing_wrong_in_a_days_rounds() {
    let noisy = || {
        let mut config = sim(&["a", "b"], &[]);
        config.model.near_tie_flips = 0.5;
        start_sim(config)
    };
    let (r0, r1, r2) = (noisy().await, noisy().await, noisy().await);
    let dir = tempfile::tempdir().unwrap();
    let file = pool_file(dir.path(), &[&r0, &r1, &r2]);
    let daemon = start_daemon(&pool_config(&file, r#"interval = "10ms""#)).await;
    let rounds =
        |s: &Scrape, pod: &str| s.sum("inferprobe_adapter_base_checks_total", &[("pod", pod)]);
    let s = daemon
        .wait_for(Duration::from_secs(120), |s| {
            ["r0", "r1", "r2"]
                .iter()
                .all(|pod| rounds(s, pod) >= 1440.0)
        })
        .await;
    daemon.stop().await;
    for pod in ["r0", "r1", "r2"] {
        for adapter in ["a", "b"] {
            for bad in BAD {
                assert_eq!(checks(&s, pod, adapter, bad), 0.0, "{pod} {adapter} {bad}");
            }
            assert!(
                checks(&s, pod, adapter, "applied") >= 500.0,
                "{pod} {adapter}"
            );
        }
        assert_eq!(base(&s, pod, "diverged"), 0.0, "{pod}");
    }
}
