//! The daemon as a real process (`inferprobe run --config …`, JSON logs at debug), for
//! tests that send it signals: its log lines arrive on a channel as they are written.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::Value;

pub struct DaemonProcess {
    child: Child,
    lines: Receiver<String>,
    /// Every line read so far, for failure messages.
    pub log: Vec<String>,
}

impl DaemonProcess {
    pub fn spawn(config: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_inferprobe"))
            .arg("run")
            .arg("--config")
            .arg(config)
            .args(["--log-format", "json", "--log-level", "debug"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn inferprobe");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Self {
            child,
            lines,
            log: Vec::new(),
        }
    }

    /// The next log line, parsed; `None` once the process closed its log.
    pub fn next_line(&mut self, within: Duration) -> Option<Value> {
        let line = match self.lines.recv_timeout(within) {
            Ok(line) => line,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return None,
            Err(e) => panic!("no log line within {within:?} ({e}): {:#?}", self.log),
        };
        self.log.push(line.clone());
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")))
    }

    /// Read lines until one has this `message`; panics if the log ends first.
    pub fn wait_for(&mut self, message: &str, within: Duration) -> Value {
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.next_line(left.max(Duration::from_millis(1))) {
                Some(line) if line["message"] == message => return line,
                Some(_) => {}
                None => panic!("log ended before {message:?}: {:#?}", self.log),
            }
        }
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal}");
    }

    pub fn wait(&mut self) -> ExitStatus {
        self.child.wait().expect("wait")
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `inferprobe ARGS` run to its end (no `INFERPROBE_CONFIG` from the environment).
pub fn inferprobe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args(args)
        .env_remove("INFERPROBE_CONFIG")
        .output()
        .unwrap()
}
