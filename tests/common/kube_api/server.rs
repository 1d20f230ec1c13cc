//! The HTTP side: kube-apiserver's paths, list/get/watch responses and `Status` errors in
//! its wire format, served by hyper (HTTP/1.1, chunked watch bodies) on 127.0.0.1.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::discovery::{api_versions, group_list, resource_list, version_info};
use super::selector::{FieldSelector, LabelSelector};
use super::store::{Filter, Msg, RESOURCES, Resource, Store};
use super::{MAX_WATCH, Shared};

type Body = UnsyncBoxBody<Bytes, io::Error>;

pub async fn serve(listener: TcpListener, shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else { continue };
        if shared.down.load(Ordering::SeqCst) {
            // Unreachable server: the connection closes before any response.
            drop(stream);
            continue;
        }
        let cut = shared.connections.lock().unwrap().clone();
        let (shared, stop) = (Arc::clone(&shared), stop.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let shared = Arc::clone(&shared);
                async move { handle(&shared, &request) }
            });
            let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            // Dropping the connection future closes the socket: server stop or set_down.
            // Biased: once cut, not one more byte goes out (tests rely on the order).
            tokio::select! {
                biased;
                () = stop.cancelled() => {}
                () = cut.cancelled() => {}
                _ = connection => {}
            }
        });
    }
}

/// An `Err` makes hyper close the connection without a response (a request that raced
/// `set_down` on a kept-alive connection).
fn handle(shared: &Shared, request: &Request<Incoming>) -> io::Result<Response<Body>> {
    if shared.down.load(Ordering::SeqCst) {
        return Err(io::Error::other("kube_api is down"));
    }
    let uri = request.uri();
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let mut line = format!("{} {}", request.method(), uri.path());
    for (i, (k, v)) in query.iter().enumerate() {
        line.push_str(&format!("{}{k}={v}", if i == 0 { '?' } else { '&' }));
    }
    shared.store.lock().unwrap().requests.push(line);
    if request.method() != Method::GET {
        let message = "the server does not allow this method on the requested resource";
        return Ok(status(405, "MethodNotAllowed", message, None));
    }
    Ok(route(shared, uri.path(), &query))
}

fn route(shared: &Shared, path: &str, query: &[(String, String)]) -> Response<Body> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => return json_response(StatusCode::OK, &version_info()),
        ["api"] => return json_response(StatusCode::OK, &api_versions(shared)),
        ["apis"] => return json_response(StatusCode::OK, &group_list(shared)),
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return not_found(),
    };
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    let (namespace, plural, name) = match rest {
        [] => ("", "", None),
        [plural] => ("", *plural, None),
        ["namespaces", ns, plural] => (*ns, *plural, None),
        ["namespaces", ns, plural, name] => (*ns, *plural, Some(*name)),
        _ => return not_found(),
    };
    let store = shared.store.lock().unwrap();
    let watch = matches!(
        query
            .iter()
            .find(|(k, _)| k == "watch")
            .map(|(_, v)| v.as_str()),
        Some("true" | "1" | "t" | "T" | "True" | "TRUE")
    );
    // RBAC is checked before routing, as the real server's filter chain does: a missing
    // resource the user may not read is a 403, not a 404.
    if store.forbidden.contains(plural) {
        let verb = match (name, watch) {
            (Some(_), _) => "get",
            (None, true) => "watch",
            (None, false) => "list",
        };
        return forbidden(group, plural, verb, namespace);
    }
    let installed = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version && !store.uninstalled.contains(&gv));
    if rest.is_empty() && installed.clone().next().is_some() {
        return json_response(StatusCode::OK, &resource_list(&gv, installed));
    }
    let Some(resource) = installed.clone().find(|r| r.plural == plural) else {
        return not_found();
    };
    let namespace = (!namespace.is_empty()).then_some(namespace);
    match (namespace, name) {
        (Some(ns), Some(name)) => match store.get(resource, ns, name) {
            Some(object) => json_response(StatusCode::OK, &object),
            None => {
                let message = format!("{} \"{name}\" not found", noun(group, plural));
                status(
                    404,
                    "NotFound",
                    &message,
                    Some(details(group, plural, Some(name))),
                )
            }
        },
        (None, Some(_)) => not_found(),
        (namespace, None) => {
            let collection = Collection {
                resource,
                namespace,
                watch,
            };
            collection.respond(store, query)
        }
    }
}

/// A list or watch of a resource, in a namespace or all of them.
struct Collection<'a> {
    resource: &'static Resource,
    namespace: Option<&'a str>,
    watch: bool,
}

impl Collection<'_> {
    fn respond(
        self,
        mut store: MutexGuard<'_, Store>,
        query: &[(String, String)],
    ) -> Response<Body> {
        let param = |name: &str| {
            let found = query.iter().find(|(k, _)| k == name);
            found.map(|(_, v)| v.as_str()).unwrap_or_default()
        };
        let resource = self.resource;
        let labels = LabelSelector::parse(param("labelSelector"));
        let fields = FieldSelector::parse(param("fieldSelector"), resource.fields);
        let (labels, fields) = match (labels, fields) {
            (Ok(labels), Ok(fields)) => (labels, fields),
            (Err(message), _) | (_, Err(message)) => {
                return status(400, "BadRequest", &message, None);
            }
        };
        let filter = Filter {
            resource,
            namespace: self.namespace.map(str::to_owned),
            labels,
            fields,
        };
        // Unset and "0" both mean "any/most recent": a list of now, a watch from now.
        let rv = match param("resourceVersion") {
            "" | "0" => None,
            rv => match rv.parse::<u64>() {
                Ok(rv) => Some(rv),
                Err(_) => {
                    let message = format!("invalid resource version: {rv}");
                    return status(400, "BadRequest", &message, None);
                }
            },
        };
        if self.watch {
            let timeout = param("timeoutSeconds")
                .parse()
                .map_or(MAX_WATCH, |s| Duration::from_secs(s).min(MAX_WATCH));
            let bookmarks = param("allowWatchBookmarks") == "true";
            let initial_end = param("sendInitialEvents") == "true";
            let rx = store.watch(filter, rv, bookmarks, initial_end);
            return watch_response(rx, Instant::now() + timeout);
        }
        // An exact list at a forgotten rv is gone (kube's watcher never asks for one: it
        // lists at "most recent" or at "0").
        if rv.is_some_and(|rv| rv < store.oldest) && param("resourceVersionMatch") == "Exact" {
            let message = "The resourceVersion for the provided list is too old.";
            return status(410, "Expired", message, None);
        }
        let items: Vec<Value> = store
            .list(&filter)
            .into_iter()
            .map(|mut object| {
                if resource.builtin {
                    let map = object.as_object_mut().unwrap();
                    map.remove("apiVersion");
                    map.remove("kind");
                }
                object
            })
            .collect();
        // Written by hand to keep the server's key order (serde_json's maps sort keys).
        let (kind, api_version) = (resource.kind, resource.api_version());
        let list = format!(
            "{{\"kind\":\"{kind}List\",\"apiVersion\":\"{api_version}\",\
             \"metadata\":{{\"resourceVersion\":\"{}\"}},\"items\":{}}}",
            store.rv,
            Value::Array(items),
        );
        respond(StatusCode::OK, Bytes::from(list))
    }
}

/// A chunked 200 whose body is the watch's lines until it ends, is aborted, or times out.
fn watch_response(
    rx: tokio::sync::mpsc::UnboundedReceiver<Msg>,
    deadline: Instant,
) -> Response<Body> {
    let lines = futures_util::stream::unfold(Some(rx), move |rx| async move {
        let mut rx = rx?;
        let msg = tokio::select! {
            msg = rx.recv() => msg?,
            () = tokio::time::sleep_until(deadline) => return None,
        };
        match msg {
            Msg::Line(bytes) => Some((Ok(Frame::data(bytes)), Some(rx))),
            Msg::End => None,
            // A body error makes hyper drop the connection without the last chunk.
            Msg::Abort => Some((Err(io::Error::other("watch dropped")), None)),
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache, private")
        .body(BodyExt::boxed_unsync(StreamBody::new(lines)))
        .unwrap()
}

fn json_response(code: StatusCode, value: &Value) -> Response<Body> {
    respond(code, Bytes::from(serde_json::to_vec(value).unwrap()))
}

fn respond(code: StatusCode, json: Bytes) -> Response<Body> {
    let body = Full::new(json)
        .map_err(|never| match never {})
        .boxed_unsync();
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache, private")
        .body(body)
        .unwrap()
}

/// A `Status` object, as the real server writes it in error bodies and ERROR events.
pub fn status_body(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    // Absent unless the reason has some (the real 404 for a path carries an empty one).
    if let Some(details) = details {
        status["details"] = details;
    }
    status
}

fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Response<Body> {
    let body = status_body(code, reason, message, details);
    json_response(StatusCode::from_u16(code).unwrap(), &body)
}

/// What an uninstalled group or unknown path answers (a missing CRD).
fn not_found() -> Response<Body> {
    let message = "the server could not find the requested resource";
    status(404, "NotFound", message, Some(json!({})))
}

fn forbidden(group: &str, plural: &str, verb: &str, namespace: &str) -> Response<Body> {
    let scope = match namespace {
        "" => "at the cluster scope".to_owned(),
        ns => format!("in the namespace \"{ns}\""),
    };
    let message = format!(
        "{} is forbidden: User \"system:anonymous\" cannot {verb} resource \"{plural}\" in \
         API group \"{group}\" {scope}",
        noun(group, plural),
    );
    status(
        403,
        "Forbidden",
        &message,
        Some(details(group, plural, None)),
    )
}

/// `pods`, `inferencepools.inference.networking.k8s.io`: a resource in messages.
fn noun(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    }
}

fn details(group: &str, plural: &str, name: Option<&str>) -> Value {
    let mut details = json!({"kind": plural});
    if let Some(name) = name {
        details["name"] = json!(name);
    }
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    details
}
