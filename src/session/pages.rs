//! Whether each refusal a session page is about still holds (docs/sessions.md, "Alerts"),
//! apart from the turns so every rule is a unit test. A refusal opens it; it closes once
//! enough sessions passed where the refusal stopped one: two (a depth turn: one). A
//! refusal that comes back within an hour of closing doubles what closes it (up to 16),
//! so a fault that comes and goes keeps its page instead of flapping, while a fault fixed
//! for good stops paging within two sessions. Exported as
//! `inferprobe_session_refusal_open`: the rules page only while it is 1, so a page also
//! stops with its series (a replica replaced, a probe pod rolled, a daemon restarted).

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::metrics::Refusal;

/// A refusal back within this long of closing is the same fault coming back.
const COMES_BACK: Duration = Duration::from_secs(3600);
const MOST_NEEDED: u32 = 16;

#[derive(Clone, Copy, Debug, Default)]
struct State {
    open: bool,
    passed: u32,
    /// Passes that close it: 0 until a first refusal.
    needed: u32,
    closed_at: Option<Instant>,
    /// The history the refused turn was built on (a window refusal): a shorter session
    /// passes nothing.
    tokens: u64,
}

/// What a session showed of one refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    Refused {
        /// The refused turn's history, in tokens, where known.
        tokens: Option<u64>,
    },
    /// Passed where the refusal stopped a session; `tokens`: its largest prompt.
    Passed { tokens: u64 },
}

/// One target's, shared by its sessions (which never overlap).
#[derive(Debug, Default)]
pub struct Pages(Mutex<[State; 4]>);

impl Pages {
    /// Record what a session showed of `refusal` at `now`; whether it is open after.
    pub fn record(&self, refusal: Refusal, shown: Shown, now: Instant) -> bool {
        let mut states = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let base = match refusal {
            Refusal::Depth => 1,
            _ => 2,
        };
        let s = &mut states[index(refusal)];
        match shown {
            Shown::Refused { tokens } => {
                if !s.open {
                    let back = s
                        .closed_at
                        .is_some_and(|at| now.saturating_duration_since(at) < COMES_BACK);
                    s.needed = match back {
                        true => (s.needed * 2).clamp(base, MOST_NEEDED),
                        false => base,
                    };
                }
                s.open = true;
                s.passed = 0;
                s.tokens = tokens.unwrap_or(0);
            }
            Shown::Passed { tokens } if s.open && tokens >= s.tokens => {
                s.passed += 1;
                if s.passed >= s.needed {
                    s.open = false;
                    s.closed_at = Some(now);
                }
            }
            Shown::Passed { .. } => {}
        }
        s.open
    }
}

fn index(refusal: Refusal) -> usize {
    match refusal {
        Refusal::Tools => 0,
        Refusal::History => 1,
        Refusal::Window => 2,
        Refusal::Depth => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn refused() -> Shown {
        Shown::Refused { tokens: None }
    }

    fn passed() -> Shown {
        Shown::Passed { tokens: 0 }
    }

    #[tokio::test(start_paused = true)]
    async fn a_fixed_fault_closes_after_two_passes_and_one_that_comes_back_holds_longer() {
        let pages = Pages::default();
        let h = Refusal::History;
        let t0 = Instant::now();
        // Nothing refused: passes open nothing.
        assert!(!pages.record(h, passed(), t0));
        for k in 0..4 {
            assert!(pages.record(h, refused(), t0 + MIN * 10 * k));
        }
        // Fixed: the first pass holds it, the second closes it.
        assert!(pages.record(h, passed(), t0 + MIN * 40));
        assert!(!pages.record(h, passed(), t0 + MIN * 50));
        // Back 20 minutes later: the same fault, coming and going; four passes close it now.
        assert!(pages.record(h, refused(), t0 + MIN * 70));
        for k in 0..3 {
            assert!(pages.record(h, passed(), t0 + MIN * (80 + 10 * k)));
        }
        assert!(!pages.record(h, passed(), t0 + MIN * 110));
        // Back after more than an hour closed: a new fault, two passes again.
        assert!(pages.record(h, refused(), t0 + MIN * 175));
        assert!(pages.record(h, passed(), t0 + MIN * 185));
        assert!(!pages.record(h, passed(), t0 + MIN * 195));
        // One in three sessions refused: open from the second episode on, for good.
        let flaky = Pages::default();
        let mut open = Vec::new();
        for k in 0..18u32 {
            let seen = if k % 3 == 0 { refused() } else { passed() };
            open.push(flaky.record(h, seen, t0 + MIN * 10 * k));
        }
        assert_eq!(&open[..3], [true, true, false]);
        assert!(open[3..].iter().all(|o| *o), "{open:?}");
        // Each kind apart; a depth turn accepted closes its own at once.
        assert!(pages.record(Refusal::Depth, refused(), t0));
        assert!(!pages.record(Refusal::Tools, passed(), t0));
        assert!(!pages.record(Refusal::Depth, passed(), t0 + MIN));
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_closes_only_on_sessions_as_long_as_the_refused_one() {
        let pages = Pages::default();
        let w = Refusal::Window;
        let t0 = Instant::now();
        assert!(pages.record(w, Shown::Refused { tokens: Some(900) }, t0));
        // Sessions that ended shorter (no calls, so no results) prove nothing.
        for k in 1..5 {
            assert!(pages.record(w, Shown::Passed { tokens: 600 }, t0 + MIN * k));
        }
        assert!(pages.record(w, Shown::Passed { tokens: 1_200 }, t0 + MIN * 6));
        assert!(!pages.record(w, Shown::Passed { tokens: 1_200 }, t0 + MIN * 7));
    }
}
