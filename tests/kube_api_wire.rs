//! The Kubernetes test API server's wire format, read with a plain HTTP client: list
//! bodies, selectors and Status errors, and chunked watch streams with bookmarks,
//! timeouts and the 410 a too-old resourceVersion gets. (tests/kube_api.rs shows the same
//! server through kube-rs.) Every test is time-bounded.

use crate::common;

use common::kube_api::KubeApi;
use common::kube_api::client::{EVENT_LIMIT, bounded};
use common::kube_api::objects::{pod, vllm_pod};
use serde_json::{Value, json};

const NS: &str = "inference";

/// GET `path?query` with a plain HTTP client.
async fn get(api: &KubeApi, path: &str, query: &[(&str, &str)]) -> reqwest::Response {
    let url = url::Url::parse_with_params(&format!("{}{path}", api.url()), query).unwrap();
    reqwest::get(url).await.unwrap()
}

/// The names of a list's items, or of watch events' objects.
fn names<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Vec<&'a str> {
    let name = |o: &'a Value| o["metadata"]["name"].as_str().unwrap();
    objects.into_iter().map(name).collect()
}

fn kind_and_code(status: &Value) -> (&str, &str, u64) {
    let reason = status["reason"].as_str().unwrap();
    (
        status["kind"].as_str().unwrap(),
        reason,
        status["code"].as_u64().unwrap(),
    )
}

const PODS: &str = "/api/v1/namespaces/inference/pods";

/// The list wire format and server-side selectors, read with a plain HTTP client.
#[tokio::test]
async fn list_wire_format_and_selectors() {
    bounded(async {
        let api = KubeApi::start().await;
        api.apply(vllm_pod(NS, "a", "node-1", "10.1.0.1", true));
        let labels = [("app", "sgl"), ("tier", "gpu")];
        api.apply(pod(NS, "b", "", None, false, &labels, &[]));
        let response = get(&api, PODS, &[]).await;
        assert_eq!(response.headers()["content-type"], "application/json");
        let text = response.text().await.unwrap();
        assert!(text.starts_with(r#"{"kind":"PodList","apiVersion":"v1","metadata":{"#));
        let list: Value = serde_json::from_str(&text).unwrap();
        assert!(list["metadata"]["resourceVersion"].is_string());
        let item = &list["items"][0];
        assert!(
            item.get("kind").is_none(),
            "built-in list items carry no kind"
        );
        for field in ["uid", "creationTimestamp", "resourceVersion"] {
            assert!(item["metadata"][field].is_string(), "{field}");
        }
        assert_eq!(list["items"][1]["status"]["phase"], "Pending");

        for (key, selector, expected) in [
            ("labelSelector", "app in (vllm,sgl)", &["a", "b"][..]),
            ("labelSelector", "app notin (vllm)", &["b"]),
            ("labelSelector", "tier", &["b"]),
            ("labelSelector", "!tier", &["a"]),
            ("labelSelector", "app!=vllm,tier==gpu", &["b"]),
            ("fieldSelector", "status.phase=Pending", &["b"]),
            (
                "fieldSelector",
                "spec.nodeName!=node-1,metadata.name!=x",
                &["b"],
            ),
        ] {
            let list: Value = get(&api, PODS, &[(key, selector)])
                .await
                .json()
                .await
                .unwrap();
            let items = list["items"].as_array().unwrap();
            assert_eq!(names(items), expected, "{selector}");
        }
        for (key, selector, message) in [
            (
                "labelSelector",
                "app in (vllm",
                "unable to parse requirement",
            ),
            (
                "fieldSelector",
                "spec.foo=x",
                "field label not supported: spec.foo",
            ),
        ] {
            let response = get(&api, PODS, &[(key, selector)]).await;
            assert_eq!(response.status(), 400);
            let status: Value = response.json().await.unwrap();
            assert_eq!(kind_and_code(&status), ("Status", "BadRequest", 400));
            let text = status["message"].as_str().unwrap();
            assert!(text.starts_with(message), "{text}");
        }

        api.forbid("pods", true);
        let response = get(&api, "/api/v1/pods", &[("watch", "true")]).await;
        assert_eq!(response.status(), 403);
        let status: Value = response.json().await.unwrap();
        assert_eq!(kind_and_code(&status), ("Status", "Forbidden", 403));
        let message = "pods is forbidden: User \"system:anonymous\" cannot watch resource \
                       \"pods\" in API group \"\" at the cluster scope";
        assert_eq!(status["message"], message);
        assert_eq!(status["details"], json!({"kind": "pods"}));

        api.install_group("inference.networking.x-k8s.io/v1alpha2", false);
        let pools = "/apis/inference.networking.x-k8s.io/v1alpha2/inferencepools";
        let response = get(&api, pools, &[]).await;
        assert_eq!(response.status(), 404);
        let not_found = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "the server could not find the requested resource",
            "reason": "NotFound", "details": {}, "code": 404,
        });
        assert_eq!(response.json::<Value>().await.unwrap(), not_found);
        // RBAC comes first, as in the real filter chain: forbidden, even if not installed.
        api.forbid("inferencepools", true);
        let response = get(&api, pools, &[]).await;
        let status: Value = response.json().await.unwrap();
        assert_eq!(kind_and_code(&status), ("Status", "Forbidden", 403));
        let message = "inferencepools.inference.networking.x-k8s.io is forbidden: User \
                       \"system:anonymous\" cannot list resource \"inferencepools\" in API group \
                       \"inference.networking.x-k8s.io\" at the cluster scope";
        assert_eq!(status["message"], message);
        let details = json!({"group": "inference.networking.x-k8s.io", "kind": "inferencepools"});
        assert_eq!(status["details"], details);
    })
    .await;
}

/// The first `n` lines of a watch body, parsed.
async fn lines(response: &mut reqwest::Response, n: usize) -> Vec<Value> {
    let mut buffer = Vec::new();
    while buffer.iter().filter(|b| **b == b'\n').count() < n {
        let chunk = tokio::time::timeout(EVENT_LIMIT, response.chunk()).await;
        let chunk = chunk.expect("no watch line in time").unwrap();
        buffer.extend_from_slice(&chunk.expect("watch ended"));
    }
    let text = String::from_utf8(buffer).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The stream ends cleanly (final chunk) within the event limit, with at most periodic
/// BOOKMARKs before the end.
async fn ends(response: &mut reqwest::Response) {
    loop {
        let chunk = tokio::time::timeout(EVENT_LIMIT, response.chunk()).await;
        let Some(chunk) = chunk.expect("watch did not end").unwrap() else {
            return;
        };
        let text = String::from_utf8(chunk.to_vec()).unwrap();
        let bookmark = |l: &str| l.starts_with(r#"{"type":"BOOKMARK","object":{"#);
        assert!(text.lines().all(bookmark), "{text}");
    }
}

/// The watch wire format: chunked JSON lines, replay after the resourceVersion, live
/// events, bookmarks, the timeout, and the 410 ERROR event from a forgotten version.
#[tokio::test]
async fn watch_wire_format() {
    bounded(async {
        let api = KubeApi::start().await;
        api.apply(vllm_pod(NS, "a", "node-1", "10.1.0.1", true));
        api.apply(vllm_pod(NS, "b", "node-1", "10.1.0.2", true));
        let rv = api.resource_version().to_string();
        let rv = rv.as_str();
        let query = [
            ("watch", "1"),
            ("resourceVersion", rv),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", "1"),
        ];
        let mut watch = get(&api, PODS, &query).await;
        assert_eq!(watch.status(), 200);
        assert_eq!(watch.headers()["transfer-encoding"], "chunked");
        assert_eq!(watch.headers()["content-type"], "application/json");
        api.apply(vllm_pod(NS, "c", "node-1", "10.1.0.3", true));
        api.bookmark_now();
        let seen = lines(&mut watch, 2).await;
        assert_eq!(
            (&seen[0]["type"], &seen[0]["object"]["kind"]),
            (&json!("ADDED"), &json!("Pod"))
        );
        assert_eq!(seen[0]["object"]["metadata"]["name"], "c");
        let current = api.resource_version().to_string();
        let bookmark = json!({"type": "BOOKMARK", "object": {
            "kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": current},
        }});
        assert_eq!(seen[1], bookmark);
        ends(&mut watch).await;

        let mut replay = get(&api, PODS, &[("watch", "true"), ("resourceVersion", rv)]).await;
        assert_eq!(
            names(lines(&mut replay, 1).await.iter().map(|l| &l["object"])),
            ["c"]
        );
        let mut from_any = get(&api, PODS, &[("watch", "true"), ("resourceVersion", "0")]).await;
        let synthetic = lines(&mut from_any, 3).await;
        assert!(synthetic.iter().all(|l| l["type"] == "ADDED"));
        assert_eq!(
            names(synthetic.iter().map(|l| &l["object"])),
            ["a", "b", "c"]
        );

        api.expire_history();
        let mut expired = get(&api, PODS, &[("watch", "true"), ("resourceVersion", rv)]).await;
        assert_eq!(expired.status(), 200);
        let error = &lines(&mut expired, 1).await[0];
        assert_eq!(error["type"], "ERROR");
        assert_eq!(kind_and_code(&error["object"]), ("Status", "Expired", 410));
        let message = format!(
            "too old resource version: {rv} ({})",
            api.resource_version()
        );
        assert_eq!(error["object"]["message"], message);
        ends(&mut expired).await;
        let exact = [("resourceVersion", rv), ("resourceVersionMatch", "Exact")];
        assert_eq!(get(&api, PODS, &exact).await.status(), 410);
    })
    .await;
}
