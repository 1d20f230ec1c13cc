//! The behaviours of the hostile server, by path segment (before any `.suffix`):
//!
//! | segment | odd-numbered requests get |
//! |---|---|
//! | `silent` | the request is read, nothing is ever answered |
//! | `head-stall` | a 200 event-stream head, then silence |
//! | `drip-early` | a 200 head, then one byte every [`DRIP_EVERY`] of an event that never ends |
//! | `drip-late` | a role chunk and two tokens, then the same drip |
//! | `reset` | a role chunk and two tokens, then a TCP reset (SO_LINGER 0) |
//! | `no-done-chunked` | tokens, then a properly terminated chunked body without `[DONE]` |
//! | `no-done-close` | tokens in a close-delimited body, then FIN without `[DONE]` |
//! | `html` | 200 `text/html` |
//! | `not-json` | 200 event-stream whose `data:` is not JSON |
//! | `error-event` | a role chunk, then `{"error": {…}}` in the stream |
//! | `split-utf8` | the healthy stream, close-delimited, every multi-byte character split across two writes |
//! | `huge-event` | a role chunk, then one event larger than 1 MiB |
//! | `endless` | a role chunk, then token events as fast as the socket takes them |
//! | `gzip` | the healthy stream gzip-encoded, sync-flushed per event, tokens [`GZIP_GAP`] apart |
//! | `gzip-corrupt` | a gzip stream whose deflate data turns to garbage after the first token |
//! | `gzip-truncated` | a gzip stream whose body ends after two tokens, mid-member |
//! | `negotiate` | gzip if the request accepts it, else identity |
//! | `http10` | `HTTP/1.0 200`, no length, no chunking, the healthy events, close |
//! | `redirect` | 307 to another path (its Location carries a token in the query) |
//! | `rate-limited` | 429 with `Retry-After: 1` |
//! | `unavailable` | 503 |
//! | `tls-alert` | a TLS fatal alert record, as a TLS port answers plaintext, then close |
//! | `h2-goaway` | HTTP/2 SETTINGS and GOAWAY frames, as an h2c/gRPC-only port answers HTTP/1.1 |
//!
//! Even-numbered requests get the healthy stream. `close-idle` answers the first request
//! on a connection healthily with keep-alive and closes the connection (FIN, no answer) as
//! soon as the next request arrives on it; `close-always` closes every connection that way;
//! `drop-30` closes 3 of every 10 connections that way (requests 1, 4, 7 of each ten) and
//! answers the others healthily, one request per connection.

use std::io::{self, Write};
use std::time::Duration;

use flate2::Compression;
use flate2::write::GzEncoder;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::sleep;

use super::{
    Framing, MAX_HOLD, Next, Request, SSE_HEADERS, Stats, content_chunk, end, fixed, head, header,
    healthy, healthy_events, hold, role_chunk, send,
};

/// Drip pace: well under the test's stall timeout, so a deadline that byte arrivals reset
/// would never fire (the probe would run into its total timeout instead).
pub const DRIP_EVERY: Duration = Duration::from_millis(250);
/// The gap before each of the gzip stream's 2nd, 3rd and 4th tokens.
pub const GZIP_GAP: Duration = Duration::from_millis(350);
/// The secret the redirect's Location carries in its query (must never be logged).
pub const REDIRECT_SECRET: &str = "hostile-secret-token";
/// The path the redirect points to.
pub const REDIRECT_PATH: &str = "/elsewhere/v1/chat/completions";

pub(super) async fn respond(
    stream: &mut TcpStream,
    request: &Request,
    n: u64,
    on_connection: u64,
    stats: &Stats,
) -> io::Result<Next> {
    use std::sync::atomic::Ordering::SeqCst;
    let behaviour = request.segment.split('.').next().unwrap_or("");
    match behaviour {
        "close-idle" if on_connection == 0 => {
            healthy(stream, true).await?;
            return Ok(Next::KeepAlive);
        }
        "close-idle" | "close-always" => {
            stats.dropped.fetch_add(1, SeqCst);
            return Ok(Next::Close);
        }
        "drop-30" if matches!(n % 10, 1 | 4 | 7) => {
            stats.dropped.fetch_add(1, SeqCst);
            return Ok(Next::Close);
        }
        "drop-30" => {
            healthy(stream, false).await?;
            return Ok(Next::Close);
        }
        _ if n % 2 == 0 => {
            healthy(stream, false).await?;
            return Ok(Next::Close);
        }
        _ => {}
    }
    let ok = "HTTP/1.1 200 OK";
    match behaviour {
        "silent" => hold(stream).await,
        "tls-alert" => {
            // A TLS record: content type 21 (alert), TLS 1.2, length 2, fatal decode_error.
            stream
                .write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32])
                .await?;
            stream.flush().await?;
            return Ok(Next::Close);
        }
        "h2-goaway" => {
            // An empty SETTINGS frame, then GOAWAY(last stream 0, PROTOCOL_ERROR).
            let mut frames = vec![0, 0, 0, 0x04, 0, 0, 0, 0, 0];
            frames.extend([0, 0, 8, 0x07, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            stream.write_all(&frames).await?;
            stream.flush().await?;
            return Ok(Next::Close);
        }
        "head-stall" => {
            head(stream, ok, SSE_HEADERS, Framing::Chunked, false).await?;
            hold(stream).await;
        }
        "drip-early" => {
            head(stream, ok, SSE_HEADERS, Framing::Chunked, false).await?;
            drip(stream).await;
        }
        "drip-late" => {
            head(stream, ok, SSE_HEADERS, Framing::Chunked, false).await?;
            for event in [role_chunk(), content_chunk("a"), content_chunk("b")] {
                send(stream, Framing::Chunked, event.as_bytes()).await?;
            }
            drip(stream).await;
        }
        "reset" => {
            head(stream, ok, SSE_HEADERS, Framing::Chunked, false).await?;
            for event in [role_chunk(), content_chunk("a"), content_chunk("b")] {
                send(stream, Framing::Chunked, event.as_bytes()).await?;
            }
            sleep(Duration::from_millis(100)).await;
            // SO_LINGER 0 makes the close abortive: a real RST, not a FIN. (Deprecated in
            // tokio because a non-zero linger blocks on drop; zero does not.)
            #[allow(deprecated)]
            stream.set_linger(Some(Duration::ZERO))?;
            return Ok(Next::Drop);
        }
        "no-done-chunked" | "no-done-close" => {
            let framing = if behaviour == "no-done-close" {
                Framing::Close
            } else {
                Framing::Chunked
            };
            head(stream, ok, SSE_HEADERS, framing, false).await?;
            for event in [role_chunk(), content_chunk("a"), content_chunk("b")] {
                send(stream, framing, event.as_bytes()).await?;
            }
            end(stream, framing).await?;
        }
        "html" => {
            let body = "<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>";
            fixed(stream, ok, &["content-type: text/html"], body).await?;
        }
        "not-json" => {
            head(stream, ok, SSE_HEADERS, Framing::Chunked, false).await?;
            for event in [
                role_chunk(),
                "data: hello, world\n\n".into(),
                "data: [DONE]\n\n".into(),
            ] {
                send(stream, Framing::Chunked, event.as_bytes()).await?;
            }
            end(stream, Framing::Chunked).await?;
        }
        "error-event" => {
            let error = r#"data: {"error":{"object":"error","message":"The engine is overloaded","type":"InternalServerError","code":500}}"#;
            head(stream, ok, SSE_HEADERS, Framing::Chunked, false).await?;
            for event in [
                role_chunk(),
                format!("{error}\n\n"),
                "data: [DONE]\n\n".into(),
            ] {
                send(stream, Framing::Chunked, event.as_bytes()).await?;
            }
            end(stream, Framing::Chunked).await?;
        }
        "split-utf8" => {
            head(stream, ok, SSE_HEADERS, Framing::Close, false).await?;
            for event in healthy_events() {
                // Cut right after the lead byte of every multi-byte character.
                let cuts = (1..event.len())
                    .filter(|&i| !event.is_char_boundary(i) && event.is_char_boundary(i - 1));
                let mut from = 0;
                for cut in cuts.chain([event.len()]) {
                    send(stream, Framing::Close, &event.as_bytes()[from..cut]).await?;
                    from = cut;
                    sleep(Duration::from_millis(15)).await;
                }
            }
        }
        "huge-event" => {
            head(stream, ok, SSE_HEADERS, Framing::Chunked, false).await?;
            send(stream, Framing::Chunked, role_chunk().as_bytes()).await?;
            let start = br#"data: {"choices":[{"index":0,"delta":{"content":""#;
            send(stream, Framing::Chunked, start).await?;
            let piece = vec![b'x'; 64 * 1024];
            for _ in 0..18 {
                send(stream, Framing::Chunked, &piece).await?; // 1.125 MiB in all
            }
            send(stream, Framing::Chunked, b"\"}}]}\n\ndata: [DONE]\n\n").await?;
            end(stream, Framing::Chunked).await?;
        }
        "endless" => {
            head(stream, ok, SSE_HEADERS, Framing::Chunked, false).await?;
            send(stream, Framing::Chunked, role_chunk().as_bytes()).await?;
            let batch = content_chunk("tok").repeat(50);
            let until = tokio::time::Instant::now() + MAX_HOLD;
            // Bounded: 200k events or MAX_HOLD, whichever first; the probe stops far sooner.
            for _ in 0..4000 {
                if tokio::time::Instant::now() > until {
                    break;
                }
                send(stream, Framing::Chunked, batch.as_bytes()).await?;
            }
        }
        "gzip" => gzip(stream, GZIP_GAP, Gzip::Whole).await?,
        "gzip-corrupt" => gzip(stream, Duration::ZERO, Gzip::Corrupt).await?,
        "gzip-truncated" => gzip(stream, Duration::ZERO, Gzip::Truncated).await?,
        "negotiate" => {
            let accepts = header(&request.head, "accept-encoding").unwrap_or("");
            if accepts.contains("gzip") {
                gzip(stream, Duration::ZERO, Gzip::Whole).await?;
            } else {
                healthy(stream, false).await?;
            }
        }
        "http10" => {
            // keep_alive = true only to leave out `connection: close`: HTTP/1.0 closes.
            head(stream, "HTTP/1.0 200 OK", SSE_HEADERS, Framing::Close, true).await?;
            for event in healthy_events() {
                send(stream, Framing::Close, event.as_bytes()).await?;
            }
        }
        "redirect" => {
            let here = stream.local_addr()?;
            let location =
                format!("location: http://{here}{REDIRECT_PATH}?api_key={REDIRECT_SECRET}");
            fixed(stream, "HTTP/1.1 307 Temporary Redirect", &[&location], "").await?;
        }
        "rate-limited" => {
            let body = r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#;
            let headers = ["content-type: application/json", "retry-after: 1"];
            fixed(stream, "HTTP/1.1 429 Too Many Requests", &headers, body).await?;
        }
        "unavailable" => {
            let body = "upstream connect error or disconnect/reset before headers";
            let headers = ["content-type: text/plain"];
            fixed(stream, "HTTP/1.1 503 Service Unavailable", &headers, body).await?;
        }
        other => {
            let body = format!("unknown hostile behaviour `{other}`");
            fixed(stream, "HTTP/1.1 404 Not Found", &[], &body).await?;
        }
    }
    Ok(Next::Close)
}

/// One byte per [`DRIP_EVERY`] of an event that never completes, for at most [`MAX_HOLD`].
async fn drip(stream: &mut TcpStream) {
    let event = r#"data: {"choices":[{"index":0,"delta":{"content":"drip drip drip drip drip drip"#;
    let rounds = (MAX_HOLD.as_millis() / DRIP_EVERY.as_millis()) as usize;
    for byte in event.bytes().cycle().take(rounds) {
        sleep(DRIP_EVERY).await;
        if send(stream, Framing::Chunked, &[byte]).await.is_err() {
            return; // the client gave up
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Gzip {
    Whole,
    /// Garbage deflate data after the first token.
    Corrupt,
    /// The body ends (properly, as HTTP goes) in the middle of the gzip member.
    Truncated,
}

/// The healthy stream gzip-encoded, one sync-flushed piece per event (as a compressing
/// proxy does for event streams), with `gap` before the 2nd–4th tokens.
async fn gzip(stream: &mut TcpStream, gap: Duration, how: Gzip) -> io::Result<()> {
    let headers = [
        SSE_HEADERS,
        &["content-encoding: gzip", "vary: accept-encoding"],
    ]
    .concat();
    head(stream, "HTTP/1.1 200 OK", &headers, Framing::Chunked, false).await?;
    let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
    for (i, event) in healthy_events().iter().enumerate() {
        if how == Gzip::Truncated && i == 3 {
            return end(stream, Framing::Chunked).await;
        }
        if how == Gzip::Corrupt && i == 2 {
            // After a sync flush the deflate stream is byte-aligned: 0xde starts a block of
            // the reserved type 3, which no decoder accepts.
            send(
                stream,
                Framing::Chunked,
                b"\xde\xad\xbe\xef garbage \xff\xff",
            )
            .await?;
            return end(stream, Framing::Chunked).await;
        }
        if (2..=4).contains(&i) {
            sleep(gap).await;
        }
        encoder.write_all(event.as_bytes())?;
        encoder.flush()?; // Z_SYNC_FLUSH: everything so far is decodable now
        let piece = std::mem::take(encoder.get_mut());
        send(stream, Framing::Chunked, &piece).await?;
    }
    let tail = encoder.finish()?;
    send(stream, Framing::Chunked, &tail).await?;
    end(stream, Framing::Chunked).await
}
