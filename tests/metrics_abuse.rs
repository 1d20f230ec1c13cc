//! The daemon's HTTP server under abuse: idle and slowloris connections, 1,000 concurrent
//! scrapes, oversized requests. It keeps answering, closes the connections that never
//! finish a request, and the probes running meanwhile still measure what the simulator
//! injected (the server runs off the probing runtime).

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::SimConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, timeout};

const TTFT: Duration = Duration::from_millis(100);
const ITL: Duration = Duration::from_millis(10);
/// The server's header read timeout (src/server.rs), which also bounds idle keep-alive.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
const SCRAPES: usize = 1000;
const IDLE: usize = 150;
const SLOWLORIS: usize = 150;

/// Send `request` on a new connection and read the whole answer (the server closes).
async fn exchange(addr: SocketAddr, request: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(request).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    let status = std::str::from_utf8(answer.get(9..12).unwrap_or_default())
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, answer))
}

async fn scrape_raw(addr: SocketAddr) -> (u16, Vec<u8>) {
    exchange(
        addr,
        b"GET /metrics HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n",
    )
    .await
    .expect("scrape")
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Read until the server closes the connection (EOF or reset), for at most `within`.
async fn closed_by_server(mut stream: TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + within;
    loop {
        match timeout(
            deadline.saturating_duration_since(Instant::now()),
            stream.read(&mut buf),
        )
        .await
        {
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => continue, // a 408 or similar before the close
            Err(_) => return false,
        }
    }
}

/// A client that sends a request head one byte at a time and never finishes it.
async fn slowloris(mut stream: TcpStream) -> TcpStream {
    let _ = stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: probe\r\n")
        .await;
    for _ in 0..(HEADER_READ_TIMEOUT.as_millis() / 250 + 20) {
        if stream.write_all(b"X").await.is_err() {
            break;
        }
        sleep(Duration::from_millis(250)).await;
    }
    stream
}

fn config(sim: &str) -> String {
    format!(
        r#"
        seed = 3
        [defaults]
        url = "{sim}"
        model = "m"
        rate = 8
        max_concurrency = 8
        input_tokens = 16
        output_tokens = 8
        continuous_usage_stats = true
        [[targets]]
        name = "t"
        backend = "openai-chat"
        "#
    )
}

fn latency_means(before: &Scrape, after: &Scrape) -> (f64, f64, f64) {
    let delta = |name: &str| {
        let (s0, c0) = before.histogram(name, "t");
        let (s1, c1) = after.histogram(name, "t");
        ((s1 - s0) / (c1 - c0), c1 - c0)
    };
    let (ttft, probes) = delta("inferprobe_time_to_first_token_seconds");
    let (itl, _) = delta("inferprobe_inter_token_latency_seconds");
    (ttft, itl, probes)
}

/// Run `abuse` on a thread and runtime of its own: abusive clients live in other
/// processes in production, not on the probing runtime's workers.
async fn elsewhere<F, Fut>(abuse: F) -> Fut::Output
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future + 'static,
    Fut::Output: Send + 'static,
{
    let thread = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(abuse())
    });
    tokio::task::spawn_blocking(move || thread.join().expect("abuse thread"))
        .await
        .expect("join")
}

/// Idle and slowloris connections held open through three storms of concurrent scrapes
/// and a round of oversized requests; returns how many of the held connections the server
/// had not closed by its header read timeout.
async fn abuse(addr: SocketAddr) -> usize {
    let opened = Instant::now();
    let mut idle = Vec::new();
    for _ in 0..IDLE {
        idle.push(TcpStream::connect(addr).await.expect("connect"));
    }
    let mut slow = JoinSet::new();
    for _ in 0..SLOWLORIS {
        let stream = TcpStream::connect(addr).await.expect("connect");
        slow.spawn(slowloris(stream));
    }

    for storm in 0..3 {
        let started = Instant::now();
        let mut scrapes = JoinSet::new();
        for _ in 0..SCRAPES {
            scrapes.spawn(scrape_raw(addr));
        }
        let mut ok = 0;
        while let Some(result) = timeout(Duration::from_secs(60), scrapes.join_next())
            .await
            .expect("a scrape storm took over 60 s")
        {
            let (status, body) = result.expect("scrape task");
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
            assert!(contains(&body, "inferprobe_requests_total"));
            ok += 1;
        }
        assert_eq!(ok, SCRAPES);
        eprintln!(
            "storm {storm}: {SCRAPES} concurrent scrapes in {:?}",
            started.elapsed()
        );
    }
    oversized(addr).await;

    // Every connection that never completed a request is closed by the header timeout.
    let left = (HEADER_READ_TIMEOUT + Duration::from_secs(5)).saturating_sub(opened.elapsed());
    let mut still_open = 0;
    for stream in idle {
        let within = left.max(Duration::from_secs(1));
        still_open += usize::from(!closed_by_server(stream, within).await);
    }
    while let Some(stream) = slow.join_next().await {
        let stream = stream.expect("slowloris task");
        still_open += usize::from(!closed_by_server(stream, Duration::from_secs(1)).await);
    }
    still_open
}

/// Oversized requests are refused without taking the server down.
async fn oversized(addr: SocketAddr) {
    let huge_headers = format!(
        "GET /metrics HTTP/1.1\r\nHost: probe\r\nX-Fill: {}\r\n\r\n",
        "a".repeat(1 << 20)
    );
    match exchange(addr, huge_headers.as_bytes()).await {
        Ok((status, _)) => assert_ne!(status, 200, "1 MiB of headers was accepted"),
        Err(e) => eprintln!("1 MiB of headers: connection closed ({e})"),
    }
    let long_uri = format!(
        "GET /metrics?{} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n",
        "q".repeat(200 << 10)
    );
    match exchange(addr, long_uri.as_bytes()).await {
        Ok((status, _)) => assert_ne!(status, 200, "a 200 KiB URI was accepted"),
        Err(e) => eprintln!("200 KiB URI: connection closed ({e})"),
    }
    let mut upload = TcpStream::connect(addr).await.unwrap();
    upload
        .write_all(b"POST /metrics HTTP/1.1\r\nHost: probe\r\nContent-Length: 10737418240\r\n\r\n")
        .await
        .unwrap();
    let _ = upload.write_all(&vec![b'z'; 64 << 10]).await;
    let mut answer = [0u8; 12];
    timeout(Duration::from_secs(5), upload.read_exact(&mut answer))
        .await
        .expect("no answer to a 10 GiB upload")
        .unwrap();
    assert_eq!(&answer[9..12], b"405", "a POST to /metrics is not allowed");
    drop(upload);
    assert_eq!(scrape_raw(addr).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_survives_abuse_and_the_probes_keep_measuring() {
    let limit = rlimit::increase_nofile_limit(u64::MAX).expect("RLIMIT_NOFILE");
    assert!(
        limit >= 4096,
        "this test opens ~2,600 sockets; raise `ulimit -n` (now {limit})"
    );
    let sim = start_sim(SimConfig {
        ttft: TTFT,
        itl: ITL,
        ..SimConfig::default()
    })
    .await;
    let daemon = start_daemon(&config(&sim.url())).await;
    let addr = daemon.addr;
    let before = daemon
        .wait_for(Duration::from_secs(20), |s| s.successes("t") >= 3.0)
        .await;

    let still_open = elsewhere(move || abuse(addr)).await;
    assert_eq!(
        still_open, 0,
        "connections outlived the header read timeout"
    );

    // The probes that ran during all this (debug build, abusers on the same two cores)
    // succeeded and measured what the simulator injected. The tolerance is for a saturated
    // machine; bench/RESULTS.md has the release-build figure with the abusers in another
    // process.
    let counted = before.successes("t");
    let after = daemon
        .wait_for(Duration::from_secs(30), |s| {
            s.successes("t") >= counted + 10.0
        })
        .await;
    assert_eq!(after.all_errors("t"), 0.0, "{}", after.text);
    let (ttft, itl, probes) = latency_means(&before, &after);
    eprintln!("during the abuse: {probes} probes, mean TTFT {ttft:.4} s, mean ITL {itl:.4} s");
    assert!(
        ttft >= TTFT.as_secs_f64() && ttft <= TTFT.as_secs_f64() + 0.1,
        "mean TTFT {ttft:.4} s, injected {TTFT:?}"
    );
    assert!(
        itl >= ITL.as_secs_f64() - 0.002 && itl <= ITL.as_secs_f64() + 0.006,
        "mean ITL {itl:.4} s, injected {ITL:?}"
    );
    assert_eq!(daemon.get("/healthz", None).await.status(), 200);
    daemon.stop().await;
}
