//! The mutating built-ins (`set-*`). Each takes the documents, returns new ones, and leaves
//! documents that are not objects (empty YAML documents, scalars) untouched.
//!
//! Workloads are the kinds whose pod spec these functions know how to find: Deployment,
//! StatefulSet, DaemonSet, ReplicaSet and Job (`spec.template.spec`), CronJob
//! (`spec.jobTemplate.spec.template.spec`) and Pod (`spec`). Their containers are those in
//! `containers` and `initContainers`.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::registry::{BoundCall, Handler, param, signature, text};
use super::{
    DataType, FunctionOutcome, FunctionSignature, InvokeError, parse_scalar, resource_id, set_at, split_path,
};

const TEMPLATE_WORKLOADS: [&str; 5] = ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"];
const SCALABLE: [&str; 3] = ["Deployment", "StatefulSet", "ReplicaSet"];
const CLUSTER_SCOPED: [&str; 7] = [
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
];

static DNS_LABEL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").expect("valid regex"));
static DNS_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").expect("valid regex")
});
static QUALIFIED_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$").expect("valid regex"));

pub(super) fn builtins() -> Vec<(FunctionSignature, Handler)> {
    let container = |what: &str| {
        text(
            "container-name",
            &format!("Name of the container {what} (in containers or initContainers); * for all"),
        )
    };
    let sigs = [
        signature(
            "set-image",
            "Sets the full image (repository:tag or @digest) of a container in every workload. Nothing changes when no container matches.",
            vec![
                container("whose image to set"),
                text("image", "The new image, e.g. ghcr.io/acme/web:1.4.2"),
            ],
            true,
        ),
        signature(
            "set-label",
            "Adds or updates a label in metadata.labels of every resource (pod template labels are not touched).",
            vec![
                text("key", "Label key, e.g. team or app.kubernetes.io/part-of"),
                text("value", "Label value: up to 63 letters, digits, '-', '_' or '.'"),
            ],
            true,
        ),
        signature(
            "set-annotation",
            "Adds or updates an annotation in metadata.annotations of every resource (pod template annotations are not touched).",
            vec![
                text("key", "Annotation key, e.g. example.com/owner"),
                text("value", "Annotation value (any text)"),
            ],
            true,
        ),
        signature(
            "set-replicas",
            "Sets spec.replicas of every Deployment, StatefulSet and ReplicaSet.",
            vec![param("replicas", DataType::Int, true, "Number of pod replicas, 0 or more")],
            true,
        ),
        signature(
            "set-namespace",
            "Sets metadata.namespace of every namespaced resource; cluster-scoped kinds (Namespace, ClusterRole, ...) and documents without a kind are left alone.",
            vec![text(
                "namespace",
                "Namespace name: lowercase letters, digits and '-', at most 63 characters",
            )],
            true,
        ),
        signature(
            "set-env-var",
            "Adds or updates an environment variable of a container in every workload (an existing valueFrom is replaced by the value).",
            vec![
                container("to change"),
                text("env-var-name", "Name of the environment variable, e.g. LOG_LEVEL"),
                text("value", "Value of the environment variable"),
            ],
            true,
        ),
        signature(
            "set-path",
            "Sets the value at a dotted path in every resource, or in one resource; missing mappings along the path are created.",
            vec![
                text(
                    "path",
                    "Dotted path such as spec.template.spec.containers.0.image; numbers index lists, \\. escapes a dot in a key",
                ),
                text(
                    "value",
                    "Value to set: true/false, an integer and null are typed, anything else is a string ('quotes' force a string)",
                ),
                param(
                    "resource",
                    DataType::String,
                    false,
                    "Only change this resource, given as Kind/name (e.g. Deployment/web)",
                ),
            ],
            true,
        ),
    ];
    let handlers: [Handler; 7] =
        [set_image, set_label, set_annotation, set_replicas, set_namespace, set_env_var, set_path];
    sigs.into_iter().zip(handlers).collect()
}

fn outcome(documents: Vec<Value>) -> Result<FunctionOutcome, InvokeError> {
    // `changed` is recomputed by the registry.
    Ok(FunctionOutcome { documents, changed: false, validation: None })
}

/// The pod spec of a workload document, if it is one and has a pod spec object.
fn pod_spec_mut(doc: &mut Value) -> Option<&mut Map<String, Value>> {
    let kind = doc.get("kind")?.as_str()?;
    let path: &[&str] = if TEMPLATE_WORKLOADS.contains(&kind) {
        &["spec", "template", "spec"]
    } else if kind == "CronJob" {
        &["spec", "jobTemplate", "spec", "template", "spec"]
    } else if kind == "Pod" {
        &["spec"]
    } else {
        return None;
    };
    let mut cur = doc;
    for seg in path {
        cur = cur.get_mut(*seg)?;
    }
    cur.as_object_mut()
}

/// Calls `f` on every container (and init container) of every workload named `name` (`*`:
/// all). Errors name the resource.
fn each_container(
    docs: &mut [Value],
    name: &str,
    mut f: impl FnMut(&mut Map<String, Value>) -> Result<(), String>,
) -> Result<(), String> {
    for (index, doc) in docs.iter_mut().enumerate() {
        let id = resource_id(doc, index);
        let Some(spec) = pod_spec_mut(doc) else {
            continue;
        };
        for list in ["initContainers", "containers"] {
            let Some(Value::Array(containers)) = spec.get_mut(list) else {
                continue;
            };
            for c in containers.iter_mut().filter_map(Value::as_object_mut) {
                if name == "*" || c.get("name").and_then(Value::as_str) == Some(name) {
                    f(c).map_err(|e| format!("{id}: {e}"))?;
                }
            }
        }
    }
    Ok(())
}

/// `map[key]` as a mapping, created when absent or null; an error when it is something else.
fn child_object<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Result<&'a mut Map<String, Value>, String> {
    let slot = map.entry(key.to_string()).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().ok_or_else(|| format!("{key} is not a mapping"))
}

/// `set-image <container-name> <image>`: sets `image` of the named container (`*`: all) in
/// every workload; nothing changes when no container matches.
fn set_image(docs: &[Value], call: &BoundCall) -> Result<FunctionOutcome, InvokeError> {
    let name = call.required_str("container-name")?;
    let image = call.required_str("image")?;
    if image.trim().is_empty() {
        return Err(call.bad_argument("image", &Value::from(image), "must not be empty"));
    }
    let mut out = docs.to_vec();
    each_container(&mut out, name, |c| {
        c.insert("image".into(), Value::from(image));
        Ok(())
    })
    .map_err(|e| call.execution(e))?;
    outcome(out)
}

/// Checks a label or annotation key: an optional DNS-subdomain prefix and `/`, then a name of
/// at most 63 letters, digits, `-`, `_` and `.`, starting and ending alphanumeric.
fn check_key(call: &BoundCall, key: &str) -> Result<(), InvokeError> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| p.len() <= 253 && DNS_SUBDOMAIN.is_match(p));
    if !prefix_ok || name.len() > 63 || !QUALIFIED_NAME.is_match(name) {
        return Err(call.bad_argument(
            "key",
            &Value::from(key),
            "must be [prefix/]name: an optional DNS subdomain prefix, then up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
        ));
    }
    Ok(())
}

fn upsert_metadata(docs: &[Value], call: &BoundCall, field: &str) -> Result<FunctionOutcome, InvokeError> {
    let key = call.required_str("key")?;
    let value = call.required_str("value")?;
    check_key(call, key)?;
    let mut out = docs.to_vec();
    for (index, doc) in out.iter_mut().enumerate() {
        let id = resource_id(doc, index);
        let Some(obj) = doc.as_object_mut() else {
            continue;
        };
        child_object(obj, "metadata")
            .and_then(|m| child_object(m, field))
            .map_err(|e| call.execution(format!("{id}: {e}")))?
            .insert(key.to_string(), Value::from(value));
    }
    outcome(out)
}

/// `set-label <key> <value>`: upserts `metadata.labels[key]` on every object document. Only
/// `metadata.labels`: a workload's pod template labels (and so its selector) are left alone.
fn set_label(docs: &[Value], call: &BoundCall) -> Result<FunctionOutcome, InvokeError> {
    let value = call.required_str("value")?;
    if value.len() > 63 || !(value.is_empty() || QUALIFIED_NAME.is_match(value)) {
        return Err(call.bad_argument(
            "value",
            &Value::from(value),
            "must be empty or up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
        ));
    }
    upsert_metadata(docs, call, "labels")
}

/// `set-annotation <key> <value>`: upserts `metadata.annotations[key]` on every object
/// document (pod template annotations are left alone).
fn set_annotation(docs: &[Value], call: &BoundCall) -> Result<FunctionOutcome, InvokeError> {
    upsert_metadata(docs, call, "annotations")
}

/// `set-replicas <replicas>`: sets `spec.replicas` on Deployments, StatefulSets and ReplicaSets.
fn set_replicas(docs: &[Value], call: &BoundCall) -> Result<FunctionOutcome, InvokeError> {
    let replicas = call.required_int("replicas")?;
    if replicas < 0 {
        return Err(call.bad_argument("replicas", &Value::from(replicas), "must not be negative"));
    }
    if replicas > i64::from(i32::MAX) {
        return Err(call.bad_argument("replicas", &Value::from(replicas), "must be at most 2147483647"));
    }
    let mut out = docs.to_vec();
    for (index, doc) in out.iter_mut().enumerate() {
        let id = resource_id(doc, index);
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
        if !SCALABLE.contains(&kind) {
            continue;
        }
        if let Some(obj) = doc.as_object_mut() {
            child_object(obj, "spec")
                .map_err(|e| call.execution(format!("{id}: {e}")))?
                .insert("replicas".into(), Value::from(replicas));
        }
    }
    outcome(out)
}

/// `set-namespace <namespace>`: sets `metadata.namespace` on every namespaced resource, skipping
/// cluster-scoped kinds (including Namespace itself) and documents without a kind.
fn set_namespace(docs: &[Value], call: &BoundCall) -> Result<FunctionOutcome, InvokeError> {
    let namespace = call.required_str("namespace")?;
    if namespace.len() > 63 || !DNS_LABEL.is_match(namespace) {
        return Err(call.bad_argument(
            "namespace",
            &Value::from(namespace),
            "must be an RFC 1123 label (lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit)",
        ));
    }
    let mut out = docs.to_vec();
    for (index, doc) in out.iter_mut().enumerate() {
        let id = resource_id(doc, index);
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
        if kind.is_empty() || CLUSTER_SCOPED.contains(&kind) {
            continue;
        }
        if let Some(obj) = doc.as_object_mut() {
            child_object(obj, "metadata")
                .map_err(|e| call.execution(format!("{id}: {e}")))?
                .insert("namespace".into(), Value::from(namespace));
        }
    }
    outcome(out)
}

/// `set-env-var <container-name> <env-var-name> <value>`: upserts `{name, value}` in the `env`
/// of the named container (`*`: all); an existing entry keeps its place and loses `valueFrom`.
fn set_env_var(docs: &[Value], call: &BoundCall) -> Result<FunctionOutcome, InvokeError> {
    let container = call.required_str("container-name")?;
    let name = call.required_str("env-var-name")?;
    let value = call.required_str("value")?;
    if name.is_empty() || name.contains('=') {
        return Err(call.bad_argument(
            "env-var-name",
            &Value::from(name),
            "must be non-empty and contain no '='",
        ));
    }
    let mut out = docs.to_vec();
    each_container(&mut out, container, |c| {
        let slot = c.entry("env").or_insert(Value::Null);
        if slot.is_null() {
            *slot = Value::Array(Vec::new());
        }
        let env = slot.as_array_mut().ok_or("env is not a list")?;
        let existing = env
            .iter_mut()
            .filter_map(Value::as_object_mut)
            .find(|e| e.get("name").and_then(Value::as_str) == Some(name));
        match existing {
            Some(entry) => {
                entry.remove("valueFrom");
                entry.insert("value".into(), Value::from(value));
            }
            None => {
                let mut entry = Map::new();
                entry.insert("name".into(), Value::from(name));
                entry.insert("value".into(), Value::from(value));
                env.push(Value::Object(entry));
            }
        }
        Ok(())
    })
    .map_err(|e| call.execution(e))?;
    outcome(out)
}

/// `set-path <path> <value> [resource]`: sets a scalar at a dotted path in every object
/// document, or only in the one whose `Kind/name` (or `#index`) is `resource`; no match is a no-op.
fn set_path(docs: &[Value], call: &BoundCall) -> Result<FunctionOutcome, InvokeError> {
    let path = call.required_str("path")?;
    let value = parse_scalar(call.required_str("value")?);
    let resource = call.optional_str("resource")?;
    let segments = split_path(path);
    if segments.iter().any(String::is_empty) {
        return Err(call.bad_argument(
            "path",
            &Value::from(path),
            "must be dot-separated keys with no empty segment",
        ));
    }
    let mut out = docs.to_vec();
    for (index, doc) in out.iter_mut().enumerate() {
        let id = resource_id(doc, index);
        if !doc.is_object() || resource.is_some_and(|r| r != id) {
            continue;
        }
        set_at(doc, &segments, value.clone()).map_err(|e| call.execution(format!("{id}: {e}")))?;
    }
    outcome(out)
}

#[cfg(test)]
mod tests {
    use super::super::{FunctionCall, InvokeError, Registry, testdata::stream};
    use super::*;
    use serde_json::json;

    fn run(name: &str, args: &[&str]) -> FunctionOutcome {
        Registry::builtin().invoke(&stream(), &FunctionCall::new(name, args.iter().copied())).unwrap()
    }

    fn run_err(name: &str, args: &[&str]) -> InvokeError {
        Registry::builtin().invoke(&stream(), &FunctionCall::new(name, args.iter().copied())).unwrap_err()
    }

    fn containers(doc: &Value) -> &Vec<Value> {
        doc["spec"]["template"]["spec"]["containers"].as_array().unwrap()
    }

    #[test]
    fn set_image_named_container() {
        let out = run("set-image", &["web", "shop/web:2.0"]);
        assert!(out.changed);
        assert!(out.validation.is_none());
        let c = containers(&out.documents[1]);
        assert_eq!(c[0]["image"], "shop/web:2.0");
        assert_eq!(c[1]["image"], "envoy:1.30");
        assert_eq!(
            out.documents[1]["spec"]["template"]["spec"]["initContainers"][0]["image"],
            "shop/migrate:1.0"
        );
        assert_eq!(out.documents[2], stream()[2]);
    }

    #[test]
    fn set_image_star_includes_init_containers() {
        let out = run("set-image", &["*", "busybox:1"]);
        let spec = &out.documents[1]["spec"]["template"]["spec"];
        assert_eq!(spec["initContainers"][0]["image"], "busybox:1");
        assert!(containers(&out.documents[1]).iter().all(|c| c["image"] == "busybox:1"));
    }

    #[test]
    fn set_image_no_match_or_same_image_is_no_op() {
        for args in [["nosuch", "x:1"], ["web", "shop/web:1.0"]] {
            let out = run("set-image", &args);
            assert!(!out.changed, "{args:?}");
            assert_eq!(out.documents, stream());
        }
        assert!(run_err("set-image", &["web", " "]).to_string().contains("must not be empty"));
    }

    #[test]
    fn workload_kinds_find_their_pod_spec() {
        let docs = vec![
            json!({"kind": "CronJob", "metadata": {"name": "c"}, "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "old"}]}}}}}}),
            json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "old"}]}}),
            json!({"kind": "DaemonSet", "metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "old"}]}}}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "m"}, "data": {"spec": {"containers": [{"name": "a", "image": "old"}]}}}),
            Value::Null,
        ];
        let out = Registry::builtin().invoke(&docs, &FunctionCall::new("set-image", ["a", "new"])).unwrap();
        assert_eq!(
            out.documents[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"],
            "new"
        );
        assert_eq!(out.documents[1]["spec"]["containers"][0]["image"], "new");
        assert_eq!(out.documents[2]["spec"]["template"]["spec"]["containers"][0]["image"], "new");
        assert_eq!(out.documents[3], docs[3]);
        assert_eq!(out.documents[4], Value::Null);
    }

    #[test]
    fn set_label_on_every_resource_only_in_metadata() {
        let out = run("set-label", &["team", "payments"]);
        assert!(out.changed);
        for doc in &out.documents {
            assert_eq!(doc["metadata"]["labels"]["team"], "payments");
        }
        assert_eq!(out.documents[1]["metadata"]["labels"]["app"], "web");
        assert_eq!(out.documents[1]["spec"]["template"]["metadata"]["labels"], json!({"app": "web"}));
        let again = Registry::builtin()
            .invoke(&out.documents, &FunctionCall::new("set-label", ["team", "payments"]))
            .unwrap();
        assert!(!again.changed);
        assert_eq!(again.documents, out.documents);
        let err = run_err("set-label", &["team", "has space"]);
        assert!(err.to_string().contains("parameter 'value'"), "{err}");
        let err = run_err("set-label", &["/bad", "x"]);
        assert!(err.to_string().contains("parameter 'key'"), "{err}");
        assert!(run("set-label", &["app.kubernetes.io/part-of", "shop"]).changed);
    }

    #[test]
    fn set_annotation_upserts() {
        let out = run("set-annotation", &["example.com/owner", "Team Payments <p@x.io>"]);
        assert!(out.changed);
        assert_eq!(
            out.documents[3]["metadata"]["annotations"]["example.com/owner"],
            "Team Payments <p@x.io>"
        );
        let again = Registry::builtin()
            .invoke(
                &out.documents,
                &FunctionCall::new("set-annotation", ["example.com/owner", "Team Payments <p@x.io>"]),
            )
            .unwrap();
        assert!(!again.changed);
        assert_eq!(again.documents, out.documents);
    }

    #[test]
    fn set_replicas_only_on_scalable_kinds() {
        let out = run("set-replicas", &["5"]);
        assert!(out.changed);
        assert_eq!(out.documents[1]["spec"]["replicas"], 5);
        assert!(out.documents[2]["spec"].get("replicas").is_none());
        assert!(!run("set-replicas", &["3"]).changed);
        let err = run_err("set-replicas", &["-1"]);
        assert_eq!(err.to_string(), "set-replicas: parameter 'replicas' must not be negative, got '-1'");
    }

    #[test]
    fn set_namespace_skips_cluster_scoped() {
        let mut docs = stream();
        docs.push(json!({"kind": "ClusterRole", "metadata": {"name": "reader"}}));
        docs.push(json!({"metadata": {"name": "kindless"}}));
        let out =
            Registry::builtin().invoke(&docs, &FunctionCall::new("set-namespace", ["shop-eu"])).unwrap();
        assert!(out.changed);
        assert_eq!(out.documents[0], docs[0]);
        for i in 1..4 {
            assert_eq!(out.documents[i]["metadata"]["namespace"], "shop-eu");
        }
        assert_eq!(out.documents[4], docs[4]);
        assert_eq!(out.documents[5], docs[5]);
        assert!(!run("set-namespace", &["shop"]).changed);
        for bad in ["Shop", "-shop", "shop_eu", &"a".repeat(64)] {
            let err = run_err("set-namespace", &[bad]);
            assert!(err.to_string().contains("RFC 1123 label"), "{err}");
        }
    }

    #[test]
    fn set_env_var_update_and_insert() {
        let out = run("set-env-var", &["web", "LOG_LEVEL", "debug"]);
        assert!(out.changed);
        let c = containers(&out.documents[1]);
        assert_eq!(c[0]["env"], json!([{"name": "LOG_LEVEL", "value": "debug"}]));
        assert!(c[1].get("env").is_none());

        let out = run("set-env-var", &["*", "REGION", "eu-west-1"]);
        let spec = &out.documents[1]["spec"]["template"]["spec"];
        assert_eq!(
            spec["containers"][0]["env"],
            json!([{"name": "LOG_LEVEL", "value": "info"}, {"name": "REGION", "value": "eu-west-1"}])
        );
        assert_eq!(spec["containers"][1]["env"], json!([{"name": "REGION", "value": "eu-west-1"}]));
        assert_eq!(spec["initContainers"][0]["env"], json!([{"name": "REGION", "value": "eu-west-1"}]));

        assert!(!run("set-env-var", &["web", "LOG_LEVEL", "info"]).changed);
        assert!(!run("set-env-var", &["nosuch", "A", "b"]).changed);

        let docs = vec![json!({"kind": "Pod", "spec": {"containers": [
            {"name": "a", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}
        ]}})];
        let out =
            Registry::builtin().invoke(&docs, &FunctionCall::new("set-env-var", ["a", "X", "1"])).unwrap();
        assert_eq!(out.documents[0]["spec"]["containers"][0]["env"], json!([{"name": "X", "value": "1"}]));
    }

    #[test]
    fn set_path_on_every_object_or_one_resource() {
        let out = run("set-path", &["spec.template.spec.containers.0.image", "nginx:1.27"]);
        assert!(out.changed);
        assert_eq!(containers(&out.documents[1])[0]["image"], "nginx:1.27");
        // Every object document gets the path (missing mappings created).
        assert_eq!(out.documents[3]["spec"]["template"]["spec"]["containers"]["0"]["image"], "nginx:1.27");

        let out = run("set-path", &["spec.replicas", "7", "Deployment/web"]);
        assert_eq!(out.documents[1]["spec"]["replicas"], 7);
        assert_eq!(out.documents[2], stream()[2]);
        assert!(!run("set-path", &["spec.replicas", "7", "Deployment/nosuch"]).changed);
        assert!(!run("set-path", &["spec.replicas", "3", "Deployment/web"]).changed);

        let out = run("set-path", &["metadata.labels.app\\.kubernetes\\.io/name", "web", "Service/web"]);
        assert_eq!(out.documents[2]["metadata"]["labels"]["app.kubernetes.io/name"], "web");

        let out = run("set-path", &["spec.ports.1", "{\"port\": 9}", "Service/web"]);
        assert_eq!(out.documents[2]["spec"]["ports"][1], "{\"port\": 9}");
        let err = run_err("set-path", &["spec.ports.5.port", "1", "Service/web"]);
        assert!(err.to_string().contains("Service/web: index 5 is past the end of 'spec.ports'"), "{err}");
        let err = run_err("set-path", &["metadata.name.x", "1", "Service/web"]);
        assert!(err.to_string().contains("'metadata.name' is a string"), "{err}");
        let err = run_err("set-path", &["spec..x", "1"]);
        assert!(matches!(err, InvokeError::BadArgument { ref parameter, .. } if parameter == "path"));
    }
}
