//! The simulator as a gateway over its replicas (`--replicas`, `--route`) and each
//! replica's prefix cache: which replica a request goes to (by turn, by its prompt's
//! start, by a session header, by its first message), which faults that replica has of
//! its own, and what its cache serves and reports of it, as vLLM, llama-server, a P/D
//! decode side or Anthropic would say.

use super::faults::{self, Fault};
use super::request::{Dialect, SimRequest};
use super::{Shared, config};

/// The leading words prefix affinity routes by (as a router hashes a prompt's first
/// blocks).
const ROUTE_WORDS: usize = 16;

impl Shared {
    /// The replica the gateway sends `request` to.
    pub(super) fn route(&self, request: &SimRequest) -> usize {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let replicas = self.prefix_caches.len().max(1);
        let round_robin = || {
            self.next_replica
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                % replicas
        };
        let by_words = |text: &str, limit: usize| {
            let mut hasher = DefaultHasher::new();
            for word in text.split_whitespace().take(limit) {
                word.hash(&mut hasher);
            }
            (hasher.finish() % replicas as u64) as usize
        };
        match self.config.gateway.route {
            config::Route::RoundRobin => round_robin(),
            config::Route::PrefixAffinity => by_words(&request.prompt, ROUTE_WORDS),
            config::Route::SessionHeader => match &request.session {
                Some(session) => by_words(session, usize::MAX),
                None => round_robin(),
            },
            // A request with no messages (completions) by its prompt's start.
            config::Route::FirstMessage => match request.conversation.first.trim().is_empty() {
                true => by_words(&request.prompt, ROUTE_WORDS),
                false => by_words(&request.conversation.first, usize::MAX),
            },
        }
    }

    /// The fault for a request `replica` serves: its own (`--replica-fault`) first, then
    /// the gateway's (`--fault`).
    pub(super) fn pick_fault(&self, replica: usize) -> Option<Fault> {
        let own = self.config.gateway.faults_of(replica);
        self.with_rng(|rng| {
            // No draw for a replica without faults of its own: a seed's sequence stays.
            let own = match own.is_empty() {
                true => None,
                false => faults::pick(&own, rng),
            };
            own.or_else(|| faults::pick(&self.config.faults, rng))
        })
    }

    /// Serve `request` from its replica's prefix cache after a cache fault, and say so as
    /// its server would: what prefill skips, what usage reports, what was written.
    pub(super) fn cache(&self, request: &mut SimRequest, fault: Option<Fault>) {
        if request.dialect == Dialect::Anthropic {
            return self.anthropic_cache(request, fault);
        }
        request.cached_tokens = self.prefix(request, fault);
        request.reported_cached = self
            .config
            .prefill
            .report_cached
            .report(request.cached_tokens, request.prompt_tokens);
    }

    /// Anthropic's prompt cache: only the prompt up to its last breakpoint, and only when
    /// that is at least the model's minimum; read whole when the very same text was
    /// written before, else read up to the latest earlier block end an entry was written
    /// at (its lookback) and written whole.
    fn anthropic_cache(&self, request: &mut SimRequest, fault: Option<Fault>) {
        if self.config.prefill.prefix_cache_blocks == 0 {
            return;
        }
        let minimum = self.config.prefill.anthropic_min_cacheable;
        let breakpoint = request.cache_breakpoint.filter(|b| *b >= minimum.max(1));
        let (read, written) = match (breakpoint, fault) {
            (None, _) | (_, Some(Fault::CacheDisabled)) => (0, 0),
            (Some(words), _) => {
                let Some(cache) = self.prefix_caches.get(request.replica) else {
                    return;
                };
                let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
                if fault == Some(Fault::CacheEvicts) {
                    cache.clear();
                }
                let words = usize::try_from(words).unwrap_or(usize::MAX);
                let prompt: Vec<&str> = request.prompt.split_whitespace().take(words).collect();
                let ends: Vec<usize> = request
                    .block_ends
                    .iter()
                    .map(|&end| usize::try_from(end).unwrap_or(usize::MAX))
                    .collect();
                cache.serve_lookback(&prompt, &ends)
            }
        };
        request.cached_tokens = Some(read);
        request.reported_cached = Some(read);
        request.cache_written = Some(written);
    }

    /// What the prefix cache serves of `request`'s prompt (`None`: no cache), after a
    /// cache fault: `cache_disabled` neither reads nor fills it, `cache_evicts` empties it
    /// first.
    fn prefix(&self, request: &SimRequest, fault: Option<Fault>) -> Option<u64> {
        if self.config.prefill.prefix_cache_blocks == 0 {
            return None;
        }
        if fault == Some(Fault::CacheDisabled) {
            return Some(0);
        }
        let Some(cache) = self.prefix_caches.get(request.replica) else {
            return Some(0);
        };
        let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        if fault == Some(Fault::CacheEvicts) {
            cache.clear();
        }
        let served = cache.serve(request.prompt.split_whitespace());
        Some(served.min(request.prompt_tokens.saturating_sub(1)))
    }
}
