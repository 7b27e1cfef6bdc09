//! The store conformance suite: every test runs on SQLite and on PostgreSQL.

use crate::helpers;
use changeflow::model::{Labels, Revision, RevisionSource, Slug, Space, Unit};
use changeflow::store::{MarkKind, Store, StoreError};
use chrono::Utc;
use uuid::Uuid;

fn space(slug: &str) -> Space {
    Space::new(Slug::parse(slug).unwrap(), Labels::new(), Labels::new()).unwrap()
}

fn unit(space: &Space, slug: &str) -> Unit {
    let now = Utc::now();
    serde_json::from_value(serde_json::json!({
        "UnitID": Uuid::new_v4(), "SpaceID": space.SpaceID, "Slug": slug, "DisplayName": slug,
        "ToolchainType": "Kubernetes/YAML", "HeadRevisionNum": 0, "HeadRevisionID": Uuid::nil(),
        "DataHash": "", "DataSize": 0, "Version": 1, "CreatedAt": now, "UpdatedAt": now
    }))
    .unwrap()
}

fn revision(u: &Unit, num: i64) -> Revision {
    Revision {
        RevisionID: Uuid::new_v4(),
        UnitID: u.UnitID,
        SpaceID: u.SpaceID,
        RevisionNum: num,
        Description: format!("rev {num}"),
        Source: RevisionSource::Update,
        UserID: Uuid::nil(),
        DataHash: String::new(),
        DataSize: 0,
        Tags: vec![],
        ChangeOrders: vec![],
        ValidationErrors: vec![],
        UpstreamRevisionNum: 0,
        CreatedAt: Utc::now(),
    }
}

async fn insert_get_find_list(store: Store) {
    let s = space("alpha");
    let mut tx = store.write().await.unwrap();
    tx.insert(&s).await.unwrap();
    let u1 = unit(&s, "web");
    let u2 = unit(&s, "db");
    tx.insert(&u1).await.unwrap();
    tx.insert(&u2).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.read().await.unwrap();
    assert_eq!(tx.get::<Space>(s.SpaceID).await.unwrap().unwrap().Slug.as_str(), "alpha");
    assert_eq!(tx.find::<Space>(None, "alpha").await.unwrap().unwrap().SpaceID, s.SpaceID);
    assert_eq!(tx.find::<Unit>(Some(s.SpaceID), "web").await.unwrap().unwrap().UnitID, u1.UnitID);
    assert!(tx.find::<Unit>(None, "web").await.unwrap().is_none(), "units live in their space");
    let slugs: Vec<String> =
        tx.list::<Unit>(Some(s.SpaceID)).await.unwrap().iter().map(|u| u.Slug.to_string()).collect();
    assert_eq!(slugs, ["db", "web"]);
    assert!(tx.get::<Unit>(s.SpaceID).await.unwrap().is_none(), "kinds do not mix");
}

async fn duplicate_slug_refused_and_transaction_left_nothing(store: Store) {
    let s = space("beta");
    let mut tx = store.write().await.unwrap();
    tx.insert(&s).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.write().await.unwrap();
    let other = space("gamma");
    tx.insert(&other).await.unwrap();
    let err = tx.insert(&space("beta")).await.unwrap_err();
    assert!(matches!(err, StoreError::Duplicate { kind: "Space", .. }), "{err}");
    drop(tx);
    let mut tx = store.read().await.unwrap();
    assert!(tx.find::<Space>(None, "gamma").await.unwrap().is_none(), "rolled back with the failed write");
    assert_eq!(tx.list::<Space>(None).await.unwrap().len(), 1);
}

async fn stale_version_is_refused(store: Store) {
    let s = space("delta");
    let mut tx = store.write().await.unwrap();
    tx.insert(&s).await.unwrap();
    tx.commit().await.unwrap();
    let mut a = s.clone();
    let mut b = s.clone();
    a.Labels.insert("who".into(), "a".into());
    b.Labels.insert("who".into(), "b".into());
    let mut tx = store.write().await.unwrap();
    tx.update(&mut a).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(a.Version, 2);
    let mut tx = store.write().await.unwrap();
    let err = tx.update(&mut b).await.unwrap_err();
    assert!(matches!(err, StoreError::VersionConflict { sent: 1, .. }), "{err}");
    drop(tx);
    let mut tx = store.read().await.unwrap();
    let now = tx.get::<Space>(s.SpaceID).await.unwrap().unwrap();
    assert_eq!(now.Labels["who"], "a");
    assert_eq!(now.Version, 2);
}

async fn uncommitted_writes_vanish(store: Store) {
    let s = space("epsilon");
    {
        let mut tx = store.write().await.unwrap();
        tx.insert(&s).await.unwrap();
        // dropped without commit
    }
    let mut tx = store.read().await.unwrap();
    assert!(tx.get::<Space>(s.SpaceID).await.unwrap().is_none());
}

async fn revisions_are_numbered_once(store: Store) {
    let s = space("zeta");
    let u = unit(&s, "web");
    let mut tx = store.write().await.unwrap();
    tx.insert(&s).await.unwrap();
    tx.insert(&u).await.unwrap();
    tx.insert_revision(&revision(&u, 1), "a: 1\n").await.unwrap();
    tx.insert_revision(&revision(&u, 2), "a: 2\n").await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.write().await.unwrap();
    let err = tx.insert_revision(&revision(&u, 2), "a: 3\n").await.unwrap_err();
    assert!(matches!(err, StoreError::Busy { .. }), "{err}");
    drop(tx);
    let mut tx = store.read().await.unwrap();
    let revs = tx.revisions(u.UnitID).await.unwrap();
    assert_eq!(revs.iter().map(|r| r.RevisionNum).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(tx.revision(u.UnitID, 2).await.unwrap().unwrap().1, "a: 2\n", "data is immutable");
}

async fn marks_are_set_based_and_idempotent(store: Store) {
    let s = space("kappa");
    let (a, b) = (unit(&s, "a"), unit(&s, "b"));
    let (tag, co) = (Uuid::new_v4(), Uuid::new_v4());
    let mut tx = store.write().await.unwrap();
    tx.insert(&s).await.unwrap();
    for u in [&a, &b] {
        tx.insert(u).await.unwrap();
        for n in 1..=3 {
            tx.insert_revision(&revision(u, n), "x: 1\n").await.unwrap();
        }
    }
    tx.mark(MarkKind::Tag, tag, s.SpaceID, a.UnitID, 1).await.unwrap();
    tx.mark(MarkKind::Tag, tag, s.SpaceID, a.UnitID, 3).await.unwrap();
    tx.mark(MarkKind::Tag, tag, s.SpaceID, a.UnitID, 3).await.unwrap();
    tx.mark(MarkKind::Tag, tag, s.SpaceID, b.UnitID, 2).await.unwrap();
    tx.mark(MarkKind::ChangeOrder, co, s.SpaceID, b.UnitID, 2).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.write().await.unwrap();
    assert_eq!(tx.marked(MarkKind::Tag, tag).await.unwrap().len(), 3, "marking twice is one mark");
    let heads = tx.tag_heads(tag).await.unwrap();
    assert_eq!(heads[&a.UnitID].revision_num, 3, "a tag reads as its highest revision per unit");
    assert_eq!(heads[&b.UnitID].revision_num, 2);
    let (rev, _) = tx.revision(b.UnitID, 2).await.unwrap().unwrap();
    assert_eq!((rev.Tags, rev.ChangeOrders), (vec![tag], vec![co]));
    assert_eq!(tx.unmark(MarkKind::Tag, tag, Some(a.UnitID)).await.unwrap(), 2);
    assert_eq!(tx.unmark(MarkKind::Tag, tag, None).await.unwrap(), 1);
    tx.commit().await.unwrap();
    let mut tx = store.read().await.unwrap();
    assert!(tx.marked(MarkKind::Tag, tag).await.unwrap().is_empty());
    assert_eq!(tx.marked(MarkKind::ChangeOrder, co).await.unwrap().len(), 1);
}

async fn deleting_a_unit_deletes_its_revisions(store: Store) {
    let s = space("eta");
    let u = unit(&s, "web");
    let mut tx = store.write().await.unwrap();
    tx.insert(&s).await.unwrap();
    tx.insert(&u).await.unwrap();
    tx.insert_revision(&revision(&u, 1), "x: 1\n").await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.write().await.unwrap();
    assert!(tx.delete::<Unit>(u.UnitID).await.unwrap());
    assert!(!tx.delete::<Unit>(u.UnitID).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = store.read().await.unwrap();
    assert!(tx.revision(u.UnitID, 1).await.unwrap().is_none());
}

async fn tokens_resolve_to_users(store: Store) {
    let user = Uuid::new_v4();
    let mut tx = store.write().await.unwrap();
    tx.insert_token("hash-1", user).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.read().await.unwrap();
    assert_eq!(tx.token_user("hash-1").await.unwrap(), Some(user));
    assert_eq!(tx.token_user("hash-2").await.unwrap(), None);
}

async fn concurrent_writers_do_not_both_win(store: Store) {
    let s = space("theta");
    let mut tx = store.write().await.unwrap();
    tx.insert(&s).await.unwrap();
    tx.commit().await.unwrap();
    let mut tasks = vec![];
    for i in 0..8 {
        let store = store.clone();
        let mut copy = s.clone();
        tasks.push(tokio::spawn(async move {
            copy.Labels.insert("writer".into(), i.to_string());
            let mut tx = store.write().await?;
            tx.update(&mut copy).await?;
            tx.commit().await
        }));
    }
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(()) => won += 1,
            Err(StoreError::VersionConflict { .. }) | Err(StoreError::Database(_)) => {}
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(won, 1, "exactly one writer holding Version 1 may win");
    let mut tx = store.read().await.unwrap();
    assert_eq!(tx.get::<Space>(s.SpaceID).await.unwrap().unwrap().Version, 2);
}

async fn reconnecting_keeps_data_and_migrations_are_idempotent(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let url = helpers::isolated_url(backend, dir.path());
    let store = Store::connect(&url).await.unwrap();
    let s = space("iota");
    let mut tx = store.write().await.unwrap();
    tx.insert(&s).await.unwrap();
    tx.commit().await.unwrap();
    store.close().await;
    let again = Store::connect(&url).await.unwrap();
    let mut tx = again.read().await.unwrap();
    assert!(tx.get::<Space>(s.SpaceID).await.unwrap().is_some());
}

macro_rules! suite {
    ($backend:ident: $($name:ident),* $(,)?) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (store, _dir) = crate::helpers::store(stringify!($backend)).await;
                    super::$name(store).await;
                }
            )*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn reconnecting_keeps_data_and_migrations_are_idempotent() {
                super::reconnecting_keeps_data_and_migrations_are_idempotent(stringify!($backend)).await;
            }
        }
    };
}

suite!(sqlite: insert_get_find_list, duplicate_slug_refused_and_transaction_left_nothing, stale_version_is_refused,
    uncommitted_writes_vanish, revisions_are_numbered_once, deleting_a_unit_deletes_its_revisions,
    tokens_resolve_to_users, concurrent_writers_do_not_both_win, marks_are_set_based_and_idempotent);
suite!(postgres: insert_get_find_list, duplicate_slug_refused_and_transaction_left_nothing, stale_version_is_refused,
    uncommitted_writes_vanish, revisions_are_numbered_once, deleting_a_unit_deletes_its_revisions,
    tokens_resolve_to_users, concurrent_writers_do_not_both_win, marks_are_set_based_and_idempotent);
