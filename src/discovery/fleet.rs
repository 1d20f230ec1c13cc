//! The probe's own fleet: its Ready pods (the DaemonSet's, by `kubernetes.fleet_selector`
//! in `fleet_namespace`). Every target's `fleet_rate` is divided by their number, so a
//! central endpoint's probe load stays the same from 3 nodes to 3,000. Until the first
//! list arrives (or without a fleet) the size is 1; it never drops to 0, since this pod is
//! running even before it is Ready.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::health::Health;
use super::kube::{Connector, Watched, follow};
use crate::config::Fleet;

pub async fn run(
    fleet: Fleet,
    connector: Connector,
    size: watch::Sender<usize>,
    gauge: Gauge,
    stop: CancellationToken,
) {
    // The fleet's health is in the log; its number is in inferprobe_fleet_size.
    let mut health = Health::new("fleet", Gauge::default());
    let Some(client) = connector.client(&mut health).await else {
        return;
    };
    let api: Api<Pod> = Api::namespaced(client, &fleet.namespace);
    let watched = Watched::new(api, Some(&fleet.selector), None);
    follow(watched, &mut health, &stop, |pods| {
        let ready = pods.objects().filter(|pod| is_ready(pod)).count().max(1);
        gauge.set(ready as i64);
        size.send_if_modified(|current| {
            let changed = *current != ready;
            if changed {
                tracing::info!(
                    pods = ready,
                    "fleet size changed; fleet_rate targets rescaled"
                );
            }
            *current = ready;
            changed
        });
    })
    .await;
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
