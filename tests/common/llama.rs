//! llama.cpp's `llama-server` for the real-server suites (scripts/real-server/setup.sh
//! builds it and the tiny models; paths from LLAMA_SERVER, TINY_GGUF, TINY_OTHER and
//! TINY_MMPROJ, else target/real-server/).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A file of the real-server setup: from `var`, else `target/real-server/<file>`.
pub fn path(var: &str, file: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/real-server");
    let path = std::env::var_os(var).map_or(root.join(file), PathBuf::from);
    assert!(
        path.exists(),
        "run scripts/real-server/setup.sh first (missing {})",
        path.display()
    );
    path
}

/// The tiny model every suite serves.
pub fn tiny() -> PathBuf {
    path("TINY_GGUF", "tiny.gguf")
}

pub struct Server {
    child: Child,
    pub url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `llama-server` serving `model` (as `tiny`) on a free port, four slots, healthy.
pub async fn start(model: &std::path::Path, context: u32, extra: &[&str]) -> Server {
    start_in(None, model, context, extra).await
}

/// [`start`] with its working directory `cwd` (relative `--lora` paths are listed as given).
pub async fn start_in(
    cwd: Option<&std::path::Path>,
    model: &std::path::Path,
    context: u32,
    extra: &[&str],
) -> Server {
    let binary = path("LLAMA_SERVER", "bin/llama-server");
    let port = super::closed_port().await;
    let mut command = Command::new(binary);
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    let child = command
        .args([
            "-m",
            model.to_str().unwrap(),
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .args([
            "-c",
            &context.to_string(),
            "-np",
            "4",
            "-t",
            "2",
            "--alias",
            "tiny",
            "--metrics",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Owned by the guard at once: it is killed and reaped on every path, panics included.
    let server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    for _ in 0..200 {
        if let Ok(r) = reqwest::get(format!("{}/health", server.url)).await {
            if r.status().is_success() {
                return server;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("llama-server did not become healthy");
}
