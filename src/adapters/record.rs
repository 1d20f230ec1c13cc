//! `inferprobe canary record --adapters`: the adapter check's references from an endpoint
//! the user trusts. Each adapter is asked each of the canary's recorded prompts twice (an
//! adapter that answers one prompt two confidently different ways is no reference); only
//! the prompts on which its answer parts from the base model's are kept.

use std::collections::BTreeMap;

use tokio_util::sync::CancellationToken;

use super::judge::differ;
use crate::canary::compare::{self, Verdict};
use crate::canary::record::{RecordArgs, RecordError, Recording};
use crate::endpoint::canary::{CanarySpec, Golden, GoldenAdapter, GoldenAnswer};
use crate::probe::{Outcome, Prober};

/// `inferprobe canary record`: the canary's golden file, and with `--adapters` or
/// `--adapter` the adapters' answers in it.
pub async fn record_golden(args: &RecordArgs) -> Result<Golden, RecordError> {
    let mut recording = crate::canary::record::recording(args).await?;
    if args.adapters || !args.adapter.is_empty() {
        let Recording {
            golden,
            prober,
            spec,
        } = &mut recording;
        golden.adapters = record(prober, spec, &golden.answers, &args.adapter)
            .await
            .map_err(RecordError::Endpoint)?;
    }
    Ok(recording.golden)
}

/// Record the adapters `/v1/models` lists for the target's model, and `names`, on the
/// prompts `base` holds (the base model's recorded answers).
pub async fn record(
    prober: &Prober,
    spec: &CanarySpec,
    base: &[GoldenAnswer],
    names: &[String],
) -> Result<Vec<GoldenAdapter>, String> {
    let target = &prober.target;
    let mut adapters: BTreeMap<String, String> = match prober.models(false).await {
        Ok(models) => super::listing::adapters_of(&models, &target.model),
        Err(e) if !names.is_empty() => {
            eprintln!("warning: /v1/models unread ({e}): recording the named adapters only");
            BTreeMap::new()
        }
        Err(e) => return Err(format!("/v1/models unread, so no adapter is known: {e}")),
    };
    for name in names {
        adapters.entry(name.clone()).or_default();
    }
    if adapters.is_empty() {
        return Err(format!(
            "/v1/models lists no adapter whose parent is {:?}: name them with --adapter",
            target.model
        ));
    }
    let never = CancellationToken::new();
    let mut recorded = Vec::new();
    for (name, root) in adapters {
        let mut answers = Vec::new();
        let compared = base
            .iter()
            .filter(|b| b.expect.is_none() && !b.answer.positions.is_empty());
        for (i, reference) in compared.enumerate() {
            let request = crate::canary::prompt(spec, &reference.prompt, &name);
            let mut pair = Vec::new();
            for attempt in 0..2 {
                let id = format!("adapter-record-{i}-{attempt}");
                let report = prober.probe(&id, &request, &never).await;
                if let Outcome::Finished(Err(e)) = &report.outcome {
                    return Err(format!("adapter {name:?}, prompt {i}: {e}"));
                }
                let answer = crate::canary::answer(&report)
                    .filter(|a| !a.positions.is_empty())
                    .ok_or_else(|| format!("adapter {name:?}, prompt {i}: no logprobs"))?;
                pair.push(answer);
            }
            if let Verdict::Diverged(d) = compare::answers(&pair[0], &pair[1], spec.margin) {
                return Err(format!(
                    "adapter {name:?}: prompt {i} ({:?}) was answered two ways, {:?} then {:?} at position {}: the endpoint is not reproducible, so it is no reference",
                    reference.prompt, d.expected, d.received, d.position
                ));
            }
            let answer = pair.swap_remove(0);
            if differ(&reference.answer, &answer, spec.margin) {
                answers.push(GoldenAnswer {
                    prompt: reference.prompt.clone(),
                    expect: None,
                    answer,
                });
            }
        }
        if root.is_empty() {
            eprintln!(
                "warning: adapter {name:?} is recorded with no path (root): the server did not list it with one, so these references will judge every version of it (a rollout to new weights then reads diverged on the old replicas)"
            );
        }
        if answers.is_empty() {
            eprintln!(
                "warning: adapter {name:?} answers every prompt as the base model does: it is applied nowhere on this endpoint, or these prompts are outside its training; recorded with no prompt to judge it by (the check reads it as changing nothing)"
            );
        }
        recorded.push(GoldenAdapter {
            name,
            root,
            answers,
        });
    }
    Ok(recorded)
}
