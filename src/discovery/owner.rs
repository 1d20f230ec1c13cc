//! What a discovered pod runs, as the canary needs it: which revision of its controller's
//! spec (its group when `group_by` is not set) and which workload owns it (so that one
//! workload's two revisions mid-rollout are not each other's reference). Neither is ever a
//! label.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

/// The pod labels that name the revision of the controller that made it, most specific
/// first: an Argo Rollout's (its ReplicaSets and pods carry `rollouts-pod-template-hash`
/// only: argo-rollouts `rollout/sync.go` `createDesiredReplicaSet` adds that one key), a
/// Deployment's ReplicaSet's, a StatefulSet's (LeaderWorkerSet's leaders are one).
pub const REVISION_LABELS: [&str; 3] = [
    "rollouts-pod-template-hash",
    "pod-template-hash",
    "controller-revision-hash",
];

/// The revision of the controller that made `pod`, by the first of [`REVISION_LABELS`] it
/// carries.
pub fn revision(pod: &Pod) -> Option<String> {
    let labels = pod.labels();
    REVISION_LABELS
        .iter()
        .find_map(|label| labels.get(*label))
        .cloned()
}

/// The workload a pod belongs to, `namespace/kind/name`, from its controlling owner: a
/// ReplicaSet's name less its `-<revision>` suffix (a Deployment's or an Argo Rollout's
/// ReplicaSets are named so), a DaemonSet's, StatefulSet's or any other owner's name as it
/// is. A Flagger promotion rolls the primary to the canary's spec under one app label: its
/// old and new pods share a group but not a revision, and this tells that they are one
/// workload's two revisions, not two workloads ([`crate::canary::lineage`]).
pub fn workload(pod: &Pod, revision: Option<&str>) -> Option<String> {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))?;
    let mut name = owner.name.as_str();
    if owner.kind == "ReplicaSet" {
        if let Some(base) = revision.and_then(|r| name.strip_suffix(r)?.strip_suffix('-')) {
            name = base;
        }
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    Some(format!("{namespace}/{}/{name}", owner.kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(owner: Option<(&str, &str)>, labels: &[(&str, &str)]) -> Pod {
        let mut pod = serde_json::json!({
            "metadata": {
                "name": "p",
                "namespace": "inference",
                "labels": labels.iter().copied().collect::<std::collections::BTreeMap<_, _>>(),
            }
        });
        if let Some((kind, name)) = owner {
            pod["metadata"]["ownerReferences"] = serde_json::json!([
                { "apiVersion": "v1", "kind": "Other", "name": "not-the-controller", "uid": "1" },
                { "apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "2", "controller": true },
            ]);
        }
        serde_json::from_value(pod).unwrap()
    }

    fn of(pod: &Pod) -> Option<String> {
        workload(pod, revision(pod).as_deref())
    }

    #[test]
    fn a_replica_set_s_revision_is_not_part_of_its_workload() {
        // A Deployment's and an Argo Rollout's ReplicaSets: `<name>-<hash>`.
        let deployment = pod(
            Some(("ReplicaSet", "llm-primary-5d8f7c9b4")),
            &[("pod-template-hash", "5d8f7c9b4")],
        );
        assert_eq!(
            of(&deployment).as_deref(),
            Some("inference/ReplicaSet/llm-primary")
        );
        let rollout = pod(
            Some(("ReplicaSet", "llm-6c5b4a3f2")),
            &[("rollouts-pod-template-hash", "6c5b4a3f2")],
        );
        assert_eq!(of(&rollout).as_deref(), Some("inference/ReplicaSet/llm"));
        // A ReplicaSet made by hand keeps its name; a DaemonSet's is its name.
        let bare = pod(Some(("ReplicaSet", "llm")), &[("pod-template-hash", "abc")]);
        assert_eq!(of(&bare).as_deref(), Some("inference/ReplicaSet/llm"));
        let daemonset = pod(
            Some(("DaemonSet", "llm")),
            &[("controller-revision-hash", "7c9d")],
        );
        assert_eq!(of(&daemonset).as_deref(), Some("inference/DaemonSet/llm"));
        assert_eq!(revision(&daemonset).as_deref(), Some("7c9d"));
        // No controlling owner: no workload (no lineage: everyone's kin).
        assert_eq!(of(&pod(None, &[("pod-template-hash", "abc")])), None);
    }
}
