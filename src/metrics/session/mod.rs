//! The session check's series (docs/sessions.md, docs/metrics.md): its turns by kind and
//! result, each turn's TTFT and end-to-end latency, whether a later turn found the
//! previous turn's prompt in the cache (and whether the session sent its affinity
//! headers), the tokens each kind of turn sent and got back, the switches of backend
//! within a session, and the window and depth the depth turn used. A session's requests
//! reach none of the target's own series: a conversation is not the workload's shape.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::{DualHistogram, E2EL_BUCKETS, LabeledFamily, TTFT_BUCKETS, TargetLabels, labels};

mod kinds;

use kinds::preset;
pub use kinds::{Refusal, SessionReason, SessionTurn, TurnCache};

type TurnLabels = (TargetLabels, [(&'static str, &'static str); 2]);
type CacheLabels = (TargetLabels, [(&'static str, &'static str); 3]);
type OneLabel = (TargetLabels, [(&'static str, &'static str); 1]);
type TwoLabels = (TargetLabels, [(&'static str, &'static str); 2]);

#[derive(Clone, Debug, Default)]
pub(super) struct SessionFamilies {
    turns: LabeledFamily<TurnLabels, Counter>,
    sessions: LabeledFamily<OneLabel, Counter>,
    /// Keyed by the target's labels and `turn`, in that order: the series' own label set,
    /// which the exposition looks them up by.
    pub(super) ttft: LabeledFamily<TargetLabels, DualHistogram>,
    pub(super) e2el: LabeledFamily<TargetLabels, DualHistogram>,
    /// A turn whose reply began with a tool call: the time to that call's first delta,
    /// which a server streams only once its tool parser has the function's name.
    pub(super) time_to_call: LabeledFamily<TargetLabels, DualHistogram>,
    cache: LabeledFamily<CacheLabels, Counter>,
    routed_cache: LabeledFamily<TwoLabels, Counter>,
    open: LabeledFamily<OneLabel, Gauge>,
    prompt_tokens: LabeledFamily<OneLabel, Counter>,
    cached_tokens: LabeledFamily<OneLabel, Counter>,
    output_tokens: LabeledFamily<OneLabel, Counter>,
    switches: LabeledFamily<TargetLabels, Counter>,
    routed: LabeledFamily<TargetLabels, Counter>,
    window: LabeledFamily<TargetLabels, Gauge>,
    depth: LabeledFamily<TargetLabels, Gauge>,
}

/// One target's.
#[derive(Clone, Debug)]
pub struct SessionSeries {
    target: TargetLabels,
    families: SessionFamilies,
}

/// What one turn measured, for [`SessionSeries::turn`].
#[derive(Clone, Copy, Debug, Default)]
pub struct TurnNumbers {
    pub ttft: Option<f64>,
    /// The first output was a tool call's delta: `ttft` is the time to the call, not to a
    /// token the user reads.
    pub call_first: bool,
    pub e2el: Option<f64>,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
}

fn with_turn(target: &TargetLabels, turn: SessionTurn) -> TargetLabels {
    let mut pairs = target.pairs().to_vec();
    pairs.push(("turn".to_owned(), turn.as_str().to_owned()));
    TargetLabels::new(pairs)
}

impl SessionSeries {
    /// Count a turn and what it measured.
    pub fn turn(&self, turn: SessionTurn, result: &'static str, numbers: TurnNumbers) {
        let f = &self.families;
        let t = &self.target;
        let key = (
            t.clone(),
            [("turn", turn.as_str()), (labels::RESULT, result)],
        );
        f.turns.get_or_insert(key, Counter::default).inc();
        let one = || (t.clone(), [("turn", turn.as_str())]);
        if let Some(ttft) = numbers.ttft {
            let family = if numbers.call_first {
                &f.time_to_call
            } else {
                &f.ttft
            };
            family
                .get_or_insert(with_turn(t, turn), ttft_histogram)
                .observe(ttft, None);
        }
        if let Some(e2el) = numbers.e2el {
            f.e2el
                .get_or_insert(with_turn(t, turn), e2el_histogram)
                .observe(e2el, None);
        }
        for (family, n) in [
            (&f.prompt_tokens, numbers.prompt_tokens),
            (&f.cached_tokens, numbers.cached_tokens),
            (&f.output_tokens, numbers.output_tokens),
        ] {
            if let Some(n) = n {
                family.get_or_insert(one(), Counter::default).inc_by(n);
            }
        }
    }

    /// A later turn's cache verdict, and whether its session sent affinity headers.
    pub fn cache(&self, turn: SessionTurn, verdict: TurnCache, affinity: bool) {
        let key = (
            self.target.clone(),
            [
                ("turn", turn.as_str()),
                (labels::RESULT, verdict.as_str()),
                ("affinity", if affinity { "header" } else { "none" }),
            ],
        );
        self.families
            .cache
            .get_or_insert(key, Counter::default)
            .inc();
    }

    /// A judged later turn whose backend and the previous turn's were both named: its
    /// verdict by whether the same backend served both (what proves the verdict).
    pub fn routed_cache(&self, verdict: TurnCache, same: bool) {
        let key = (
            self.target.clone(),
            [
                (labels::RESULT, verdict.as_str()),
                ("replica", if same { "same" } else { "other" }),
            ],
        );
        self.families
            .routed_cache
            .get_or_insert(key, Counter::default)
            .inc();
    }

    /// Whether a refusal of this kind holds (`session::pages`): what the session pages
    /// read.
    pub fn refusal_open(&self, refusal: Refusal, open: bool) {
        let key = (self.target.clone(), [("refusal", refusal.as_str())]);
        self.families
            .open
            .get_or_insert(key, Gauge::default)
            .set(i64::from(open));
    }

    /// A later turn whose backend and the previous turn's were both named.
    pub fn routed(&self, switched: bool) {
        let f = &self.families;
        f.routed
            .get_or_insert(self.target.clone(), Counter::default)
            .inc();
        let switches = f
            .switches
            .get_or_insert(self.target.clone(), Counter::default);
        if switched {
            switches.inc();
        }
    }

    /// A session's end: `complete`, or `failed` when a turn ended it.
    pub fn session(&self, complete: bool) {
        let result = if complete { "complete" } else { "failed" };
        let key = (self.target.clone(), [(labels::RESULT, result)]);
        self.families
            .sessions
            .get_or_insert(key, Counter::default)
            .inc();
    }

    pub fn served_window(&self, tokens: u64) {
        let g = self
            .families
            .window
            .get_or_insert(self.target.clone(), Gauge::default);
        g.set(i64::try_from(tokens).unwrap_or(i64::MAX));
    }

    pub fn depth(&self, tokens: u64) {
        let g = self
            .families
            .depth
            .get_or_insert(self.target.clone(), Gauge::default);
        g.set(i64::try_from(tokens).unwrap_or(i64::MAX));
    }
}

fn ttft_histogram() -> DualHistogram {
    DualHistogram::new(TTFT_BUCKETS.iter().copied())
}

fn e2el_histogram() -> DualHistogram {
    DualHistogram::new(E2EL_BUCKETS.iter().copied())
}

impl SessionFamilies {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "session_turns",
            "Turns of the session check (a multi-turn conversation with tool calls, the whole history sent each turn) by turn kind (first, tool_result, follow_up, parallel, parallel_result, long_gap, depth) and result: ok, history_rejected (refused after the session's first turn was accepted), context_length, tool_result_ignored, parallel_calls_missing, no_tool_call, wrong_tool, bad_arguments, not_json, refused, truncated, or the probes' error category",
            self.turns.clone(),
        );
        r.register(
            "sessions",
            "Session checks ended, by result: complete (every turn sent), failed (a turn ended it)",
            self.sessions.clone(),
        );
        r.register_with_unit(
            "session_turn_ttft",
            "TTFT of a session's turn, by turn kind: what an agent waits at each step",
            Unit::Seconds,
            self.ttft.clone(),
        );
        r.register_with_unit(
            "session_turn_e2el",
            "End-to-end latency of a session's turn, by turn kind",
            Unit::Seconds,
            self.e2el.clone(),
        );
        r.register_with_unit(
            "session_turn_time_to_call",
            "Time to the first tool-call delta of a session turn whose reply began with a tool call, by turn kind: a server streams a call only once its tool parser has the function's name, so this is later than its first token (the turn is not in session_turn_ttft_seconds)",
            Unit::Seconds,
            self.time_to_call.clone(),
        );
        r.register(
            "session_turn_cache",
            "Later turns of sessions by whether the previous turn's prompt came back from the prefix cache (hit, miss, unreported: no cached-token count), by turn kind and affinity: header (the session sent its affinity headers) or none",
            self.cache.clone(),
        );
        r.register(
            "session_prompt_tokens",
            "Prompt tokens of session turns as the server counted them, by turn kind (over session_turns_total: the context size)",
            self.prompt_tokens.clone(),
        );
        r.register(
            "session_cached_tokens",
            "Of session_prompt_tokens_total, the tokens the server served from its prefix cache",
            self.cached_tokens.clone(),
        );
        r.register(
            "session_output_tokens",
            "Output tokens of session turns, by turn kind",
            self.output_tokens.clone(),
        );
        r.register(
            "session_routed_cache",
            "Of session_turn_cache_total's hits and misses, the turns whose backend and the previous turn's were both named (session.served_by), by whether the same backend served both (replica: same or other): with a cache per replica, hits are the same backend's",
            self.routed_cache.clone(),
        );
        r.register(
            "session_refusal_open",
            "1 while a refusal of this kind holds (refusal: tools, history, window, depth): from a refusal until two sessions passed where it stopped one (a depth turn: one accepted; twice as many when it came back within an hour of clearing); the session pages fire only while it is 1",
            self.open.clone(),
        );
        r.register(
            "session_routed_turns",
            "Later session turns whose response and the previous turn's both named the backend that served them (the target's session.served_by headers)",
            self.routed.clone(),
        );
        r.register(
            "session_replica_switches",
            "Of session_routed_turns_total, the turns another backend served than the previous turn",
            self.switches.clone(),
        );
        r.register(
            "session_served_window_tokens",
            "The context window the server advertises (/v1/models max_model_len), as the session check's depth turn last read it",
            self.window.clone(),
        );
        r.register(
            "session_depth_tokens",
            "The prompt tokens the last depth turn of the session check was padded to",
            self.depth.clone(),
        );
    }

    /// A target's series, the ones alerts read at 0 from the start.
    pub(super) fn series(&self, target: &TargetLabels) -> SessionSeries {
        for turn in SessionTurn::ALL {
            for result in preset(turn) {
                let key = (
                    target.clone(),
                    [("turn", turn.as_str()), (labels::RESULT, result)],
                );
                self.turns.get_or_insert(key, Counter::default);
            }
        }
        // From the start, at 0: a daemon restarted after a fault was fixed does not page on
        // the refusals of the hour before the restart.
        for refusal in Refusal::ALL {
            self.open.get_or_insert(
                (target.clone(), [("refusal", refusal.as_str())]),
                Gauge::default,
            );
        }
        for result in ["complete", "failed"] {
            self.sessions.get_or_insert(
                (target.clone(), [(labels::RESULT, result)]),
                Counter::default,
            );
        }
        SessionSeries {
            target: target.clone(),
            families: self.clone(),
        }
    }

    pub(super) fn remove(&self, target: &TargetLabels) {
        self.turns.retain(|(l, _)| l != target);
        self.sessions.retain(|(l, _)| l != target);
        self.cache.retain(|(l, _)| l != target);
        self.routed_cache.retain(|(l, _)| l != target);
        self.open.retain(|(l, _)| l != target);
        for family in [
            &self.prompt_tokens,
            &self.cached_tokens,
            &self.output_tokens,
        ] {
            family.retain(|(l, _)| l != target);
        }
        for turn in SessionTurn::ALL {
            self.ttft.remove(&with_turn(target, turn));
            self.e2el.remove(&with_turn(target, turn));
            self.time_to_call.remove(&with_turn(target, turn));
        }
        for family in [&self.switches, &self.routed] {
            family.remove(target);
        }
        self.window.remove(target);
        self.depth.remove(target);
    }
}
