//! A synthetic fleet written straight through the store (fast), for bounded-read tests and the
//! ChangeOrder read benchmark: a base Space whose Units each have a change (revision 2), and
//! `spaces` direct variants with `units` Units each, linked upstream at revision 1.

use changeflow::model::{Labels, Link, Revision, RevisionSource, Slug, Space, Unit, UpdateType};
use changeflow::ops::{self, Actor};
use changeflow::store::{MarkKind, Store};
use chrono::Utc;
use uuid::Uuid;

const DATA: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: \"1\"\n";

fn unit(space: Uuid, slug: &str, head: i64, upstream: Option<&Unit>) -> Unit {
    let now = Utc::now();
    serde_json::from_value(serde_json::json!({
        "UnitID": Uuid::new_v4(), "SpaceID": space, "Slug": slug, "DisplayName": slug,
        "ToolchainType": "Kubernetes/YAML", "HeadRevisionNum": head, "HeadRevisionID": Uuid::new_v4(),
        "DataHash": changeflow::model::data_hash(DATA), "DataSize": DATA.len(),
        "UpstreamUnitID": upstream.map(|u| u.UnitID), "UpstreamSpaceID": upstream.map(|u| u.SpaceID),
        "UpstreamRevisionNum": if upstream.is_some() { 1 } else { 0 },
        "Version": 1, "CreatedAt": now, "UpdatedAt": now
    }))
    .expect("unit JSON")
}

fn revision(u: &Unit, num: i64) -> Revision {
    Revision {
        RevisionID: Uuid::new_v4(),
        UnitID: u.UnitID,
        SpaceID: u.SpaceID,
        RevisionNum: num,
        Description: String::new(),
        Source: RevisionSource::CreateUnit,
        UserID: Uuid::nil(),
        DataHash: u.DataHash.clone(),
        DataSize: u.DataSize,
        Tags: vec![],
        ChangeOrders: vec![],
        ValidationErrors: vec![],
        UpstreamRevisionNum: 0,
        CreatedAt: Utc::now(),
    }
}

/// Builds the fleet, creates ChangeOrder `fleet-co` in `base` (scope: every variant) and marks
/// the first `taken` variants as having taken it. Returns the admin actor.
pub async fn build(store: &Store, spaces: usize, units: usize, taken: usize) -> Actor {
    let token = ops::bootstrap_admin(store).await.unwrap().expect("fresh store");
    let actor = ops::authenticate(store, &token).await.unwrap();
    let mut tx = store.write().await.unwrap();
    let base = Space::new(Slug::parse("base").unwrap(), Labels::new(), Labels::new()).unwrap();
    tx.insert(&base).await.unwrap();
    let mut base_units = vec![];
    for i in 0..units {
        let u = unit(base.SpaceID, &format!("u{i}"), 2, None);
        tx.insert(&u).await.unwrap();
        tx.insert_revision(&revision(&u, 1), DATA).await.unwrap();
        tx.insert_revision(&revision(&u, 2), DATA).await.unwrap();
        base_units.push(u);
    }
    for s in 0..spaces {
        let mut space =
            Space::new(Slug::parse(&format!("v{s}")).unwrap(), Labels::new(), Labels::new()).unwrap();
        space.UpstreamSpaceID = Some(base.SpaceID);
        tx.insert(&space).await.unwrap();
        for up in &base_units {
            let u = unit(space.SpaceID, up.Slug.as_str(), 1, Some(up));
            tx.insert(&u).await.unwrap();
            tx.insert_revision(&revision(&u, 1), DATA).await.unwrap();
            let now = Utc::now();
            let link = Link {
                LinkID: Uuid::new_v4(),
                SpaceID: space.SpaceID,
                Slug: u.Slug.clone(),
                DisplayName: String::new(),
                Labels: Labels::new(),
                Annotations: Labels::new(),
                FromUnitID: u.UnitID,
                ToUnitID: up.UnitID,
                ToSpaceID: base.SpaceID,
                UpdateType: UpdateType::UpgradeUnit,
                UpstreamLastMergedRevisionNum: 1,
                DownstreamLastMergedRevisionNum: 1,
                Version: 1,
                CreatedAt: now,
                UpdatedAt: now,
            };
            tx.insert(&link).await.unwrap();
        }
    }
    tx.commit().await.unwrap();
    let req = ops::CreateChangeOrder { Slug: "fleet-co".into(), ..Default::default() };
    let co = ops::create_change_order(store, &actor, "base", req).await.unwrap();
    let mut tx = store.write().await.unwrap();
    let all: Vec<Unit> = tx.list::<Unit>(None).await.unwrap();
    let taken_spaces: std::collections::HashSet<Uuid> = tx
        .list::<Space>(None)
        .await
        .unwrap()
        .iter()
        .filter(|s| {
            s.Slug.as_str().strip_prefix('v').and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| n < taken)
        })
        .map(|s| s.SpaceID)
        .collect();
    for u in all.iter().filter(|u| taken_spaces.contains(&u.SpaceID)) {
        tx.mark(MarkKind::Tag, co.Order.EndTagID, u.SpaceID, u.UnitID, 1).await.unwrap();
    }
    tx.commit().await.unwrap();
    actor
}
