//! What a discovery block's canary groups can be made of, checked against its source, so a
//! block that cannot tell a rollout's versions apart fails `check` instead of paging
//! mid-rollout (a new replica judged by the old version's majority).
//!
//! - `endpointslices`: a slice names a pod (`targetRef`) but carries none of its labels nor
//!   its controller revision, so neither the default group nor `group_by` can separate
//!   versions: a canary is refused there, naming the `pods` source that can.
//! - `pods` / `inferencepool`: `group_by` may name a pod label as users write it
//!   (`app.kubernetes.io/version`) when `pod_labels` copies it (stored as
//!   `app_kubernetes_io_version`); a name that is no label of the block's replicas — which
//!   would silently give every replica the group `""` — is refused, naming those it has.
//! - `file`: its labels are the file's, unknown until read; nothing to check.

use std::collections::BTreeSet;

use super::Source;
use crate::config::ConfigError;
use crate::config::raw::RawTarget;

/// Check `template`'s canary against `source`, and rewrite its `group_by` pod-label
/// spellings to the target labels `pod_labels` stores them as.
pub fn check(
    key: &str,
    source: &Source,
    pod_labels: &[(String, String)],
    template: &mut RawTarget,
) -> Result<(), ConfigError> {
    let labels: BTreeSet<String> = template
        .labels
        .iter()
        .flatten()
        .map(|(k, _)| k.clone())
        .collect();
    let Some(canary) = template.canary.as_mut() else {
        return Ok(());
    };
    let at = format!("{key}.template.canary");
    match source {
        Source::EndpointSlices { .. } => Err(ConfigError::new(
            at,
            "cannot tell a rollout's versions apart on source = \"endpointslices\": a slice \
             carries no pod labels nor the pod's controller revision, so mid-rollout a new \
             replica would be judged by the old version's answers and page. Use source = \
             \"pods\" with the Service's selector (its pods' revisions are their groups)",
        )),
        Source::File { .. } => Ok(()),
        Source::Pods { .. } | Source::InferencePool { .. } => {
            let Some(group_by) = canary.group_by.as_mut() else {
                return Ok(());
            };
            let mut known: BTreeSet<String> =
                source.labels().iter().map(|s| (*s).to_owned()).collect();
            known.extend(labels);
            known.extend(pod_labels.iter().map(|(_, stored)| stored.clone()));
            for name in group_by.iter_mut() {
                if let Some((_, stored)) = pod_labels.iter().find(|(label, _)| label == name) {
                    *name = stored.clone();
                }
                if !known.contains(name.as_str()) {
                    let known: Vec<&str> = known.iter().map(String::as_str).collect();
                    return Err(ConfigError::new(
                        format!("{at}.group_by"),
                        format!(
                            "`{name}` is no label of this block's replicas, so every replica \
                             would be in the group \"\"; a pod label must be copied with \
                             pod_labels first (its replicas have: {})",
                            known.join(", ")
                        ),
                    ));
                }
            }
            Ok(())
        }
    }
}
