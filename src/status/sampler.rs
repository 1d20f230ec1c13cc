//! The sampler check's state on the status page (docs/sampling.md): the server semantics
//! its logprobs are read by, its recent rounds with the setting each asked and what its
//! tokens came to, and the latest calibration window, so an `outside_support` or a
//! `miscalibrated` can be read without a query.

use std::collections::VecDeque;
use std::fmt::Write;
use std::time::SystemTime;

use super::html::{clock, escape};
use crate::prompt::sampled::Params;

/// One round, as the round code reports it.
#[derive(Clone, Debug)]
pub struct SamplerRound {
    /// Its (last) request's id: the one its tokens were reported with.
    pub request_id: String,
    /// What it asked of the sampler (temperature 1 and nothing else without logprobs).
    pub setting: Params,
    /// The semantics it was read by (`vllm`, `llama.cpp`, `unknown`, …).
    pub server: &'static str,
    /// `ok`, `outside_support`, `sampling_ignored`, `unscored`, or an error category.
    pub result: &'static str,
}

/// A judged answer's sampled tokens: inside the support, outside it, not judged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampledTokens {
    pub ok: u64,
    pub outside: u64,
    pub unscored: u64,
}

/// One round on the page: `None` tokens where none were judged (answers compared without
/// logprobs, a failed request).
#[derive(Clone, Debug)]
pub struct SamplerRow {
    pub at: SystemTime,
    pub round: SamplerRound,
    pub tokens: Option<SampledTokens>,
}

/// The latest full calibration window's χ² test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplerWindow {
    pub at: SystemTime,
    pub chi2: f64,
    pub p_value: f64,
    /// Windows in a row that failed, this one included (0: it passed).
    pub in_row: u32,
}

/// The server semantics in use, and how they were known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SamplerServer {
    pub server: &'static str,
    pub how: String,
}

/// A target's sampler check as the page shows it.
#[derive(Clone, Debug, Default)]
pub struct SamplerStatus {
    pub server: Option<SamplerServer>,
    /// Oldest first, at most [`super::CANARY_CHECKS`].
    pub rounds: VecDeque<SamplerRow>,
    pub window: Option<SamplerWindow>,
    /// Tokens reported for a request whose round has not ended yet.
    pending: Option<(String, SampledTokens)>,
}

impl SamplerStatus {
    /// What a restarted target keeps: its rounds and last window; the server semantics are
    /// resolved again.
    pub(super) fn kept(&self) -> Self {
        Self {
            server: None,
            rounds: self.rounds.clone(),
            window: self.window,
            pending: None,
        }
    }

    pub(super) fn tokens(&mut self, request_id: &str, tokens: SampledTokens) {
        self.pending = Some((request_id.to_owned(), tokens));
    }

    pub(super) fn round(&mut self, round: SamplerRound, capacity: usize) {
        let tokens = self
            .pending
            .take()
            .filter(|(id, _)| *id == round.request_id)
            .map(|(_, tokens)| tokens);
        if self.rounds.len() >= capacity {
            self.rounds.pop_front();
        }
        self.rounds.push_back(SamplerRow {
            at: SystemTime::now(),
            round,
            tokens,
        });
    }
}

/// `temperature 0.7 · top_k 19 · top_p 0.8 · min_p 0`, as the configuration spells them.
fn setting(p: &Params) -> String {
    format!(
        "temperature {} · top_k {} · top_p {} · min_p {}",
        p.temperature, p.top_k, p.top_p, p.min_p
    )
}

/// Three decimals, or three significant digits below 0.001 (a failed window's).
fn p_value(p: f64) -> String {
    if p >= 1e-3 {
        format!("{p:.3}")
    } else {
        format!("{p:.2e}")
    }
}

/// The target's sampler check, when it has one (its server semantics are set as it starts
/// or on its first round).
pub(super) fn section(out: &mut String, sampler: &SamplerStatus) {
    if sampler.server.is_none() && sampler.rounds.is_empty() && sampler.window.is_none() {
        return;
    }
    out.push_str("<h3>Sampler</h3><p class=\"meta\">server semantics: ");
    match &sampler.server {
        Some(s) => {
            let _ = write!(out, "<b>{}</b> ({})", s.server, escape(&s.how));
        }
        None => out.push_str("not known yet"),
    }
    out.push_str(" · calibration: ");
    match &sampler.window {
        Some(w) => {
            let (class, verdict) = match w.in_row {
                0 => ("ok", "ok".to_owned()),
                n => ("bad", format!("miscalibrated, {n} in a row")),
            };
            let _ = write!(
                out,
                "last window <span class=\"{class}\">{verdict}</span>: χ² {:.2}, p {}, at {}",
                w.chi2,
                p_value(w.p_value),
                clock(w.at)
            );
        }
        None => out.push_str("no full window yet"),
    }
    out.push_str("</p>");
    if sampler.rounds.is_empty() {
        return;
    }
    out.push_str(
        "<table><thead><tr><th>time</th><th>result</th><th>setting</th><th>server</th>\
<th>tokens ok / outside / unscored</th><th>request id</th></tr></thead><tbody>",
    );
    for r in sampler.rounds.iter().rev() {
        let class = match r.round.result {
            "ok" => "",
            "unscored" => "muted",
            _ => "bad",
        };
        let tokens = r.tokens.map_or_else(
            || "–".into(),
            |t| format!("{} / {} / {}", t.ok, t.outside, t.unscored),
        );
        let _ = write!(
            out,
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{tokens}</td><td><code>{}</code></td></tr>",
            clock(r.at),
            r.round.result,
            setting(&r.round.setting),
            r.round.server,
            escape(&r.round.request_id),
        );
    }
    out.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn round(request_id: &str, result: &'static str) -> SamplerRound {
        SamplerRound {
            request_id: request_id.into(),
            setting: Params {
                temperature: 0.7,
                top_k: 19,
                top_p: 0.8,
                min_p: 0.0,
            },
            server: "vllm",
            result,
        }
    }

    fn page(sampler: &SamplerStatus) -> String {
        let mut out = String::new();
        section(&mut out, sampler);
        out
    }

    #[test]
    fn a_rounds_tokens_go_on_its_row_and_the_ring_keeps_the_newest() {
        let mut s = SamplerStatus::default();
        let tokens = SampledTokens {
            ok: 60,
            outside: 1,
            unscored: 3,
        };
        s.tokens("sampler-a-0", tokens);
        s.round(round("sampler-a-0", "outside_support"), 3);
        // Answers compared without logprobs: no tokens judged; tokens reported for another
        // request are not this round's.
        s.round(round("sampler-b-2", "sampling_ignored"), 3);
        s.tokens("sampler-c-0", tokens);
        s.round(round("sampler-d-0", "ok"), 3);
        let got: Vec<_> = s
            .rounds
            .iter()
            .map(|r| (r.round.request_id.as_str(), r.tokens))
            .collect();
        assert_eq!(
            got,
            [
                ("sampler-a-0", Some(tokens)),
                ("sampler-b-2", None),
                ("sampler-d-0", None)
            ]
        );
        s.round(round("sampler-e-0", "ok"), 3);
        assert_eq!(s.rounds.len(), 3);
        assert_eq!(s.rounds[0].round.request_id, "sampler-b-2");
        // A restart keeps the rounds and the window, not the server: it is resolved again.
        s.server = Some(SamplerServer {
            server: "vllm",
            how: "configured".into(),
        });
        let kept = s.kept();
        assert_eq!((kept.rounds.len(), kept.server), (3, None));
    }

    #[test]
    fn the_section_shows_the_server_each_round_and_the_last_window() {
        assert_eq!(page(&SamplerStatus::default()), "", "no sampler check");
        let mut s = SamplerStatus {
            server: Some(SamplerServer {
                server: "unknown",
                how: "/v1/models: owned_by \"<sglang>\"".into(),
            }),
            ..SamplerStatus::default()
        };
        let html = page(&s);
        assert!(
            html.contains(
                "server semantics: <b>unknown</b> (/v1/models: owned_by &quot;&lt;sglang&gt;&quot;)"
            ) && html.contains("calibration: no full window yet")
                && !html.contains("<table>"),
            "{html}"
        );
        s.tokens(
            "sampler-1",
            SampledTokens {
                ok: 62,
                outside: 2,
                unscored: 0,
            },
        );
        s.round(round("sampler-1", "outside_support"), 20);
        s.round(round("sampler-<2>", "http_5xx"), 20);
        s.rounds[0].at = UNIX_EPOCH + Duration::from_secs(3661);
        s.window = Some(SamplerWindow {
            at: UNIX_EPOCH + Duration::from_secs(7322),
            chi2: 40.123,
            p_value: 3.2e-6,
            in_row: 2,
        });
        let html = page(&s);
        assert!(
            html.contains(
                "last window <span class=\"bad\">miscalibrated, 2 in a row</span>: χ² 40.12, p 3.20e-6, at 02:02:02"
            ),
            "{html}"
        );
        // Newest first; a failed request's row has no tokens.
        let rows: Vec<&str> = html.split("<tr class=").skip(1).collect();
        assert_eq!(rows.len(), 2, "{html}");
        assert!(
            rows[0].starts_with("\"bad\">")
                && rows[0].contains("<td>http_5xx</td>")
                && rows[0].contains("<td>–</td><td><code>sampler-&lt;2&gt;</code>"),
            "{}",
            rows[0]
        );
        assert_eq!(
            rows[1],
            "\"bad\"><td>01:01:01</td><td>outside_support</td><td>temperature 0.7 · top_k 19 · top_p 0.8 · min_p 0</td><td>vllm</td><td>62 / 2 / 0</td><td><code>sampler-1</code></td></tr></tbody></table>"
        );
        s.window = Some(SamplerWindow {
            p_value: 0.51234,
            in_row: 0,
            ..s.window.unwrap()
        });
        assert!(
            page(&s).contains("<span class=\"ok\">ok</span>: χ² 40.12, p 0.512,"),
            "{}",
            page(&s)
        );
    }
}
