//! End-to-end tests of `render` on small document sets; the conformance corpus
//! (tests/it/layering.rs) covers Deckhand's behaviour case by case.

use super::*;
use serde_json::json;

fn policy(layers: &[&str]) -> Value {
    json!({"schema": "deckhand/LayeringPolicy/v1",
        "metadata": {"schema": "metadata/Control/v1", "name": "layering-policy"},
        "data": {"layerOrder": layers}})
}

fn doc(schema: &str, name: &str, layer: &str, meta: Value, data: Value) -> Value {
    let mut m = json!({"schema": "metadata/Document/v1", "name": name, "storagePolicy": "cleartext",
        "layeringDefinition": {"layer": layer}});
    for (k, v) in meta.as_object().unwrap() {
        if k == "layeringDefinition" {
            for (lk, lv) in v.as_object().unwrap() {
                m["layeringDefinition"][lk] = lv.clone();
            }
        } else {
            m[k] = v.clone();
        }
    }
    json!({"schema": schema, "metadata": m, "data": data})
}

fn by_name(out: &[Value], name: &str) -> Value {
    out.iter()
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{name} not rendered"))
        .clone()
}

fn chart_seed() -> Vec<Value> {
    vec![
        policy(&["global", "site"]),
        doc(
            "armada/Chart/v1",
            "airship-deckhand",
            "global",
            json!({"labels": {"selector": "foo"}}),
            json!({"debug": false, "image": "deckhand:1", "values": {"replicas": 2}}),
        ),
        doc(
            "armada/Chart/v1",
            "airship-deckhand",
            "site",
            json!({"replacement": true, "layeringDefinition": {"parentSelector": {"selector": "foo"},
                "actions": [{"method": "merge", "path": "."}, {"method": "replace", "path": ".debug"}]}}),
            json!({"debug": true}),
        ),
    ]
}

#[test]
fn the_seed_replacement_returns_only_the_replacement_with_merged_data() {
    let out = render(&chart_seed(), &RenderOptions { validate: true, ..Default::default() }).unwrap();
    assert_eq!(out.len(), 2, "the replacement and the LayeringPolicy");
    let chart = by_name(&out, "airship-deckhand");
    assert_eq!(chart["metadata"]["layeringDefinition"]["layer"], "site");
    assert_eq!(chart["data"], json!({"debug": true, "image": "deckhand:1", "values": {"replicas": 2}}));
}

#[test]
fn results_do_not_depend_on_input_order() {
    let mut docs = chart_seed();
    docs.push(doc("armada/Chart/v1", "other", "site",
        json!({"layeringDefinition": {"parentSelector": {"selector": "foo"},
            "actions": [{"method": "merge", "path": "."}]},
            "substitutions": [{"src": {"schema": "armada/Chart/v1", "name": "airship-deckhand", "path": ".image"},
                "dest": {"path": ".copied"}}]}),
        json!({"own": 1})));
    let forward = render(&docs, &RenderOptions::default()).unwrap();
    docs.reverse();
    let mut backward = render(&docs, &RenderOptions::default()).unwrap();
    backward.reverse();
    let sort = |mut v: Vec<Value>| {
        v.sort_by_key(|d| d["metadata"]["name"].to_string());
        v
    };
    assert_eq!(sort(forward.clone()), sort(backward));
    // The other child layers onto the replacement's result and copies from it.
    let other = by_name(&forward, "other");
    assert_eq!(other["data"]["debug"], true);
    assert_eq!(other["data"]["copied"], "deckhand:1");
}

#[test]
fn substitution_chains_render_in_dependency_order() {
    let sub = |from: &str, path: &str, dest: &str| json!({"substitutions": [{"src": {"schema": "a/Kind/v1", "name": from, "path": path}, "dest": {"path": dest}}]});
    let docs = vec![
        doc("a/Kind/v1", "c", "global", sub("b", ".mid", ".last"), json!({})),
        doc("a/Kind/v1", "b", "global", sub("a", ".", ".mid"), json!({})),
        doc("a/Kind/v1", "a", "global", json!({}), json!("secret")),
        policy(&["global"]),
    ];
    let out = render(&docs, &RenderOptions::default()).unwrap();
    assert_eq!(by_name(&out, "c")["data"], json!({"last": "secret"}));
    // The source is not changed by being copied from.
    assert_eq!(by_name(&out, "a")["data"], json!("secret"));
}

#[test]
fn cycles_and_missing_sources_are_errors_unless_tolerated() {
    let sub = |from: &str| json!({"substitutions": [{"src": {"schema": "a/Kind/v1", "name": from, "path": ".x"}, "dest": {"path": ".y"}}]});
    let docs = vec![
        policy(&["global"]),
        doc("a/Kind/v1", "a", "global", sub("b"), json!({})),
        doc("a/Kind/v1", "b", "global", sub("a"), json!({})),
    ];
    let e = render(&docs, &RenderOptions::default()).unwrap_err();
    assert_eq!(e.class(), "SubstitutionDependencyCycle");
    let lone = vec![policy(&["global"]), doc("a/Kind/v1", "a", "global", sub("nobody"), json!({"k": 1}))];
    let e = render(&lone, &RenderOptions::default()).unwrap_err();
    assert_eq!(e.class(), "SubstitutionSourceNotFound");
    assert_eq!(e.document().unwrap().name, "a");
    let tolerant = RenderOptions { fail_on_missing_sub_src: false, ..Default::default() };
    assert_eq!(render(&lone, &tolerant).unwrap()[1]["data"], json!({"k": 1}));
}

#[test]
fn abstract_documents_feed_children_but_are_not_returned() {
    let docs = vec![
        policy(&["global", "region", "site"]),
        doc(
            "a/Kind/v1",
            "g",
            "global",
            json!({"labels": {"k": "g"}, "layeringDefinition": {"abstract": true}}),
            json!({"a": {"x": 1, "y": 2}}),
        ),
        doc(
            "a/Kind/v1",
            "s",
            "site",
            json!({"layeringDefinition": {"parentSelector": {"k": "g"}, "actions": [{"method": "merge", "path": "."}]}}),
            json!({"b": 4}),
        ),
    ];
    let out = render(&docs, &RenderOptions { validate: true, ..Default::default() }).unwrap();
    let names: Vec<&str> = out.iter().map(|d| d["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["layering-policy", "s"]);
    assert_eq!(out[1]["data"], json!({"a": {"x": 1, "y": 2}, "b": 4}));
    assert_eq!(out[1]["metadata"], docs[2]["metadata"], "metadata passes through untouched");
}

#[test]
fn errors_name_the_document_and_path() {
    let docs = vec![
        policy(&["global", "site"]),
        doc("a/Kind/v1", "g", "global", json!({"labels": {"k": "g"}}), json!({})),
        doc(
            "a/Kind/v1",
            "s",
            "site",
            json!({"layeringDefinition": {"parentSelector": {"k": "g"}, "actions": [{"method": "merge", "path": ".c"}]}}),
            json!({"b": 4}),
        ),
    ];
    let e = render(&docs, &RenderOptions::default()).unwrap_err();
    assert_eq!(e.class(), "MissingDocumentKey");
    assert_eq!(e.document(), Some(&DocRef::new("a/Kind/v1", "s", "site")));
    assert_eq!(e.path(), Some(".c"));
    assert_eq!(render(&docs[1..], &RenderOptions::default()).unwrap_err().class(), "LayeringPolicyNotFound");
    let mut bad_layer = docs.clone();
    bad_layer[2]["metadata"]["layeringDefinition"]["layer"] = json!("moon");
    assert_eq!(render(&bad_layer, &RenderOptions::default()).unwrap_err().class(), "InvalidDocumentLayer");
}

#[test]
fn a_replacement_without_parent_is_refused() {
    let mut docs = chart_seed();
    docs.remove(1);
    let e = render(&docs, &RenderOptions::default()).unwrap_err();
    assert_eq!(
        (e.class(), e.reason_code()),
        ("InvalidDocumentReplacement", Some("replacement-without-parent"))
    );
}
