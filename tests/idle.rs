//! A daemon with nothing due must not use the CPU. `inferprobe demo` once burned a whole
//! core for as long as it ran: its loop matched a closed reload channel's `None` and went
//! round again at once. This binary holds one test, so the process's CPU time over a few
//! idle seconds is the daemon's alone (a spin would show ~100% of a core).

mod common;

use std::time::Duration;

use common::{start_daemon, start_reloadable};

/// utime + stime of this process, in seconds (clock ticks of 1/100 s, as on every Linux
/// this runs on; a spin exceeds the bound whatever the tick).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

async fn idle_cpu() -> f64 {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = cpu_seconds();
    tokio::time::sleep(Duration::from_secs(3)).await;
    cpu_seconds() - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_with_nothing_due_is_idle() {
    // One probe every ~17 minutes: nothing is due during the test.
    let toml = r#"
        [[targets]]
        name = "t"
        url = "http://127.0.0.1:9"
        model = "m"
        rate = 0.001
    "#;
    let daemon = start_daemon(toml).await;
    let fixed = idle_cpu().await;
    daemon.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, toml).unwrap();
    let daemon = start_reloadable(&path).await;
    let reloadable = idle_cpu().await;
    daemon.stop().await;
    for (how, cpu) in [
        ("inferprobe::run", fixed),
        ("inferprobe::run_reloadable", reloadable),
    ] {
        assert!(cpu < 0.3, "{how}: {cpu:.2} s of CPU in 3 idle seconds");
    }
}
