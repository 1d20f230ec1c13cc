//! A target's validated adapter-check settings (docs/adapters.md): which LoRA adapters it
//! checks, how many per round, and the greedy prompts their answers are compared on.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::canary::Reference;

#[derive(Clone, Debug, PartialEq)]
pub struct AdapterSpec {
    pub interval: Duration,
    /// Adapters asked per round, in turn (with the base model once).
    pub per_round: usize,
    /// Adapters that get their own series; the rest are counted, never labelled.
    pub max_adapters: usize,
    pub max_tokens: u32,
    pub top_logprobs: u32,
    /// The canary's rule: how far (nats) a reference must lead a received token.
    pub margin: f64,
    /// Greedy prompts, one per round in turn.
    pub prompts: Arc<[String]>,
    /// Adapters checked whether `/v1/models` lists them or not (first in the cap).
    pub names: Vec<String>,
    /// Follow the adapters `/v1/models` lists (`parent` = the base model).
    pub discover: bool,
    /// References recorded on a trusted endpoint (`canary record --adapters`).
    pub golden: Option<Arc<Recorded>>,
    /// How adapters are listed and chosen: `Some(true)` llama-server's (`/lora-adapters`,
    /// a `lora` list per request), `Some(false)` vLLM's (`/v1/models`, `model`), `None`
    /// read from `/v1/models`' `owned_by`.
    pub llama_cpp: Option<bool>,
}

/// A golden file's references for the adapter check, by prompt.
#[derive(Debug, PartialEq)]
pub struct Recorded {
    pub path: String,
    /// The model it was recorded for: it applies to replicas of that model only.
    pub model: String,
    pub base: HashMap<String, Arc<Reference>>,
    pub adapters: HashMap<String, RecordedAdapter>,
}

#[derive(Debug, PartialEq)]
pub struct RecordedAdapter {
    /// The version recorded (`root` in `/v1/models`; empty: any).
    pub root: String,
    /// Its answers on the prompts where they part from the base's; no other prompt tells.
    pub answers: HashMap<String, Arc<Reference>>,
}

impl Recorded {
    /// The recorded references of adapter `name` listed at `root`: another version (a
    /// new path) learns its own.
    pub fn adapter(&self, name: &str, root: &str) -> Option<&RecordedAdapter> {
        let recorded = self.adapters.get(name)?;
        let same = recorded.root.is_empty() || root.is_empty() || recorded.root == root;
        same.then_some(recorded)
    }

    /// Whether the file records adapter `name` at another path than `root`: the replica
    /// serves a version that was not recorded.
    pub fn other_version(&self, name: &str, root: &str) -> bool {
        self.adapters.contains_key(name) && self.adapter(name, root).is_none()
    }
}

impl AdapterSpec {
    /// Requests a replica gets an hour, and output tokens at most: a round per interval,
    /// the base model and `per_round` adapters (fewer while fewer are loaded).
    pub fn requests_per_hour(&self, adapters: usize) -> (f64, f64) {
        let rounds = 3600.0 / self.interval.as_secs_f64().max(1e-3);
        let requests = rounds * (1 + self.per_round.min(adapters)) as f64;
        (requests, requests * f64::from(self.max_tokens))
    }

    /// Prompt and at most output tokens an hour on a replica with `per_round` adapters or
    /// more: the prompts' words at 4 tokens per 3, in turn.
    pub fn tokens_per_hour(&self) -> (u64, u64) {
        let (requests, output) = self.requests_per_hour(self.per_round);
        let words: usize = self
            .prompts
            .iter()
            .map(|p| p.split_whitespace().count())
            .sum();
        let per_prompt = (words as f64 * 4.0 / 3.0) / self.prompts.len().max(1) as f64;
        (
            (requests * per_prompt).round() as u64,
            output.round() as u64,
        )
    }

    /// What `check` says of the check.
    pub fn describe(&self) -> String {
        let names = match self.names.is_empty() {
            true => String::new(),
            false => format!(" and {}", self.names.join(", ")),
        };
        let listed = if self.discover {
            "the adapters /v1/models lists"
        } else {
            ""
        };
        let every = |n: usize| self.rounds_per_adapter(n) as f64 * self.interval.as_secs_f64();
        format!(
            "adapter check of {listed}{names}: a round every {:?}, the base model and {} adapter(s) asked {} greedy tokens each; an adapter is asked every {:.0}s with 10 adapters, every {:.0}s at the cap of {}",
            self.interval,
            self.per_round,
            self.max_tokens,
            every(10),
            every(self.max_adapters),
            self.max_adapters
        )
        .replace("of  and ", "of ")
    }

    /// What the configuration leaves the check unable to see (`check` says).
    pub fn warnings(&self, node_local: bool) -> Vec<String> {
        let mut said = Vec::new();
        // The shipped alerts need 3 answers (2 refusals) in 30 minutes: an adapter asked
        // every 10 minutes at most.
        let every = self.interval.as_secs_f64().max(1e-3);
        let seen = (600.0 / every).floor() as usize * self.per_round;
        if self.max_adapters > seen {
            said.push(format!(
                "adapters: with more than {seen} adapters an adapter is asked on a replica less than every 10 minutes (max_adapters = {}), and the shipped alerts, which need 3 answers in 30 minutes, cannot fire for them: raise per_round or shorten interval",
                self.max_adapters
            ));
        }
        if let Some(golden) = &self.golden {
            let mut any_root: Vec<&str> = golden
                .adapters
                .iter()
                .filter(|(_, a)| a.root.is_empty())
                .map(|(name, _)| name.as_str())
                .collect();
            any_root.sort_unstable();
            if !any_root.is_empty() {
                said.push(format!(
                    "adapters: {} records {} with no path (root): their references judge every version of them, so during a rollout to new weights the replicas still serving the old read diverged and page; record on a server that lists the adapters' paths",
                    golden.path,
                    any_root.join(", ")
                ));
            }
        }
        if node_local && self.golden.is_none() {
            said.push("adapters: on a node_local block each probe pod compares only the replicas on its node (no votes from other nodes, unlike the canary): with one replica per node an adapter's reference is that replica's own first answer, and one served as the base from the start is never seen; record references (adapters.golden, `inferprobe canary record --adapters`)".to_owned());
        }
        said
    }

    /// How often one of `adapters` is asked on a replica: every this many rounds.
    pub fn rounds_per_adapter(&self, adapters: usize) -> usize {
        adapters
            .min(self.max_adapters)
            .div_ceil(self.per_round)
            .max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(per_round: usize, max_adapters: usize) -> AdapterSpec {
        AdapterSpec {
            interval: Duration::from_secs(60),
            per_round,
            max_adapters,
            max_tokens: 16,
            top_logprobs: 5,
            margin: 1.0,
            prompts: Arc::from(vec!["p".to_owned()]),
            names: Vec::new(),
            discover: true,
            golden: None,
            llama_cpp: None,
        }
    }

    #[test]
    fn check_says_when_the_alerts_cannot_see_every_adapter() {
        assert!(
            spec(2, 20).warnings(false).is_empty(),
            "the defaults are seen"
        );
        let said = spec(2, 21).warnings(false);
        assert!(said[0].contains("more than 20 adapters"), "{said:?}");
        assert!(spec(4, 40).warnings(false).is_empty());
        let said = spec(2, 20).warnings(true);
        assert!(said[0].contains("node_local"), "{said:?}");
        assert_eq!(spec(2, 20).rounds_per_adapter(20), 10);
        assert_eq!(spec(2, 20).requests_per_hour(10), (180.0, 2880.0));
    }
}
