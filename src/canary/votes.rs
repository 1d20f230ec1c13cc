//! A pool-wide reference for node-local blocks. A DaemonSet's node holds one to eight
//! replicas of a pool (one, for a model served with tensor parallelism 8), too few for a
//! majority: alone, a replica loaded with the wrong weights at start-up would be its own
//! reference. So when a node-local block's group has fewer than three replicas on this
//! node, the replicas of the same group on *other* nodes vote: up to `votes` of them
//! (default 3, chosen at random) are asked the same canary prompt, and their answers join
//! the group's majority as replicas of it for [`VOTE_TTL`].
//!
//! A vote is not a check of the voter: no series, no latency, not counted in its errors
//! (its own node's probe checks it); only `inferprobe_canary_votes_total{target, result}`
//! counts them. The pool is the block's own selector watched without the node filter
//! (read-only, as the block's own watch is).
//!
//! Load: a node asks at most `votes` replicas per prompt per [`VOTE_TTL`] — with the 8
//! built-in prompts and the defaults, 24 requests per 10 minutes, 0.04/s. Voters are drawn
//! at random from the pool, so a replica answers on average 0.04/s × (nodes asking) /
//! (replicas in the pool): 0.04/s with one replica per node however many nodes — in all,
//! 0.4/s over a pool of 10 nodes, 4/s over 100, 40/s over 1,000.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use rand::seq::SliceRandom;
use tokio_util::sync::CancellationToken;

use super::book::{Book, MAJORITY_FROM};
use super::lineage::Lineage;
use crate::endpoint::Target;
use crate::endpoint::canary::CanarySpec;
use crate::probe::{Outcome, Prober};

/// How long a vote counts (and so how often a node asks again, per prompt and group).
pub const VOTE_TTL: Duration = Duration::from_secs(600);

/// Every node-local block's pool: its replicas on every node, as targets.
#[derive(Debug, Default)]
pub struct Pools {
    blocks: Mutex<HashMap<String, Vec<Arc<Target>>>>,
    /// One asking at a time per block, group and prompt: a warm-up's checks run at once,
    /// and two of one prompt must not both find its votes missing and ask twice.
    asking: Mutex<HashMap<AskKey, Arc<tokio::sync::Mutex<()>>>>,
    /// Voters whose last vote failed, and when they may be asked again: a hung one would
    /// otherwise be asked again by every check, each waiting out its timeout.
    resting: Mutex<HashMap<String, std::time::Instant>>,
}

/// How long a voter whose vote failed is not asked again.
pub const VOTE_RETRY: Duration = Duration::from_secs(60);

type AskKey = (String, Option<String>, String);

impl Pools {
    pub fn set(&self, block: &str, targets: Vec<Arc<Target>>) {
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        blocks.insert(block.to_owned(), targets);
    }

    /// Forget the pools of blocks not in `watched` (removed, or no longer watching theirs).
    pub fn keep_only(&self, watched: &[&str]) {
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        blocks.retain(|block, _| watched.contains(&block.as_str()));
    }

    pub fn get(&self, block: &str) -> Vec<Arc<Target>> {
        let blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        blocks.get(block).cloned().unwrap_or_default()
    }

    fn resting(&self, voter: &str) -> bool {
        let mut resting = self.resting.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        resting.retain(|_, until| *until > now);
        resting.contains_key(voter)
    }

    fn rest(&self, voter: &str, failed: bool) {
        let mut resting = self.resting.lock().unwrap_or_else(|e| e.into_inner());
        if failed {
            resting.insert(voter.to_owned(), std::time::Instant::now() + VOTE_RETRY);
        } else {
            resting.remove(voter);
        }
    }

    /// Wait for the turn to ask `key`'s votes; the guard is held while asking.
    async fn turn(&self, key: AskKey) -> Asking<'_> {
        let lock = {
            let mut asking = self.asking.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(asking.entry(key.clone()).or_default())
        };
        let guard = Arc::clone(&lock).lock_owned().await;
        Asking {
            pools: self,
            key,
            lock,
            guard: Some(guard),
        }
    }
}

/// A turn to ask votes; the entry goes once no one waits for it.
struct Asking<'a> {
    pools: &'a Pools,
    key: AskKey,
    lock: Arc<tokio::sync::Mutex<()>>,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut asking = self.pools.asking.lock().unwrap_or_else(|e| e.into_inner());
        // The map's and this one's: nobody else holds or waits for it.
        if Arc::strong_count(&self.lock) == 2 {
            asking.remove(&self.key);
        }
    }
}

/// Where one replica's canary finds voters, and how it counts them.
#[derive(Clone, Debug)]
pub struct Voters {
    pub pools: Arc<Pools>,
    /// The block, and the replica's group in it.
    pub block: String,
    pub group: Option<String>,
    pub answered: Counter,
    pub failed: Counter,
}

impl Voters {
    /// While `target` is asked `prompt`: for each of `groups` (its own group, whose replicas
    /// on this node may be too few for a majority, and the other groups it is compared
    /// with that run on other nodes only), the votes the prompt ran out of, all at once.
    pub async fn ensure_all(
        &self,
        groups: Vec<(Option<String>, Arc<Book>)>,
        target: &Target,
        spec: &CanarySpec,
        prompt: &str,
        abort: &CancellationToken,
    ) {
        let asks = groups.iter().map(|(group, book)| {
            self.ensure_for(group.as_deref(), target, spec, book, prompt, abort)
        });
        futures_util::future::join_all(asks).await;
    }

    /// The same for `group`'s `book`, which may be another group's with no replica on this
    /// node (its book has no members; votes alone answer).
    pub async fn ensure_for(
        &self,
        group: Option<&str>,
        target: &Target,
        spec: &CanarySpec,
        book: &Arc<Book>,
        prompt: &str,
        abort: &CancellationToken,
    ) {
        let pool = self.pools.get(&self.block);
        book.keep_voters(&pool.iter().map(|p| p.id.as_str()).collect());
        if spec.votes == 0 {
            return;
        }
        // For the replica's own group, another revision of its workload is no voter nor a
        // member that counts (`super::lineage`): it must not fill the quota either.
        let mine = (group == self.group.as_deref())
            .then(|| Lineage::of(target))
            .flatten();
        let kin = |p: &Target| match (&mine, Lineage::of(p)) {
            (Some(mine), Some(theirs)) => !mine.rivals(&theirs),
            _ => true,
        };
        let members = book.members();
        let rival_members = pool
            .iter()
            .filter(|p| members.contains(&p.id) && !kin(p))
            .count();
        if members.len().saturating_sub(rival_members) >= MAJORITY_FROM {
            return;
        }
        let key = (
            self.block.clone(),
            group.map(str::to_owned),
            prompt.to_owned(),
        );
        let _turn = self.pools.turn(key).await;
        let voted = book.fresh_voters(prompt);
        let counted = pool
            .iter()
            .filter(|p| voted.contains(&p.id) && kin(p))
            .count();
        let missing = spec.votes.saturating_sub(counted);
        if missing == 0 {
            return;
        }
        let mut peers: Vec<Arc<Target>> = pool
            .into_iter()
            .filter(|p| {
                p.model == target.model
                    && !members.contains(&p.id)
                    && !voted.contains(&p.id)
                    && p.canary_group().as_deref() == group
                    && kin(p)
                    && !self.pools.resting(&p.id)
            })
            .collect();
        peers.shuffle(&mut rand::rng());
        peers.truncate(missing);
        let request = super::prompt(spec, prompt, &target.model);
        // All at once: three voters one after another at 3 s an answer held a new
        // version's first comparison back by 9 s a prompt.
        let asks = peers
            .into_iter()
            .map(|peer| self.ask(peer, target, spec, book, (prompt, &request), abort));
        futures_util::future::join_all(asks).await;
    }

    /// One voter's answer, into `book`.
    async fn ask(
        &self,
        peer: Arc<Target>,
        target: &Target,
        spec: &CanarySpec,
        book: &Arc<Book>,
        (prompt, request): (&str, &crate::prompt::Prompt),
        abort: &CancellationToken,
    ) {
        let Ok(prober) = Prober::new(Arc::clone(&peer), Counter::default()) else {
            self.failed.inc();
            self.pools.rest(&peer.id, true);
            return;
        };
        let id = format!(
            "{}canary-vote-{:016x}",
            target.request_id_prefix,
            rand::random::<u64>()
        );
        let report = prober.probe_sampled(&id, request, abort, false).await;
        let answer = match &report.outcome {
            Outcome::Finished(Ok(_)) => super::answer(&report).filter(|a| !a.positions.is_empty()),
            Outcome::Finished(Err(_)) => None,
            Outcome::Cut => return,
        };
        match answer {
            Some(answer) => {
                self.answered.inc();
                self.pools.rest(&peer.id, false);
                let until = std::time::Instant::now() + VOTE_TTL;
                let lineage = Lineage::of(&peer);
                book.vote(
                    &peer.id,
                    prompt,
                    Arc::new(answer),
                    spec.margin,
                    until,
                    lineage,
                );
            }
            None => {
                self.failed.inc();
                self.pools.rest(&peer.id, true);
                tracing::debug!(target = %target.id, voter = %peer.id, "a canary vote failed");
            }
        }
    }
}
