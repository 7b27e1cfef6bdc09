//! Releases, the pure part: which revisions a `--revision` spec asks for, the bundle built from
//! (Unit, revision, data) triples, and its content digest. No I/O here; `provider` delivers a
//! bundle to a Target and `ops::releases` reads the store, delivers, and records the Release.

pub mod provider;

use crate::model::{InvalidField, ReleasedRevision};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The accepted `--revision` forms, for error messages and help.
pub const REVISION_FORMS: &str = "'' or HeadRevisionNum (every Unit's head), Tag:<tag>, \
     ChangeOrder:<changeorder> (where the change arrived), Before:ChangeOrder:<changeorder> (the state before it)";

/// Which revision of each Unit a publish bundles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevisionSpec {
    /// Every Unit at its head.
    Heads,
    /// Per Unit, the highest revision the Tag marks.
    Tag(String),
    /// Per Unit, the revision the ChangeOrder's end Tag marks in the publishing Space.
    ChangeOrder(String),
    /// Per Unit, the revision the ChangeOrder's start Tag marks: the state before the change.
    BeforeChangeOrder(String),
}

impl RevisionSpec {
    /// Parses a `--revision` value. Numbers and anything else unrecognized are refused with an
    /// error naming the value and listing the accepted forms.
    pub fn parse(s: &str) -> Result<RevisionSpec, InvalidField> {
        let s = s.trim();
        let bad = |why: &str| {
            Err(InvalidField::new("Revision", s, format!("{why}; expected one of {REVISION_FORMS}")))
        };
        if s.is_empty() || s == "HeadRevisionNum" {
            return Ok(RevisionSpec::Heads);
        }
        let (ctor, rest): (fn(String) -> RevisionSpec, &str) =
            if let Some(r) = s.strip_prefix("Before:ChangeOrder:") {
                (RevisionSpec::BeforeChangeOrder, r)
            } else if let Some(r) = s.strip_prefix("ChangeOrder:") {
                (RevisionSpec::ChangeOrder, r)
            } else if let Some(r) = s.strip_prefix("Tag:") {
                (RevisionSpec::Tag, r)
            } else if s.parse::<i64>().is_ok() {
                return bad("a revision number names one Unit's revision, not a release of the Space");
            } else {
                return bad("unrecognized revision");
            };
        let rest = rest.trim();
        if rest.is_empty() || rest.contains(char::is_whitespace) {
            return bad("the reference after the prefix must be a slug, space/slug or UUID");
        }
        Ok(ctor(rest.to_string()))
    }
}

/// One Unit's content in a bundle.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundledUnit {
    pub UnitID: Uuid,
    pub UnitSlug: String,
    pub RevisionNum: i64,
    pub DataHash: String,
    /// The Unit's YAML document stream at that revision.
    pub Data: String,
}

/// What a publish delivers: the Space's Units at the chosen revisions, with enough context for
/// a receiver to know where it comes from. The Webhook provider POSTs this as JSON; the
/// Directory provider writes the Units as files and [`Bundle::manifest`] as `release.json`.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bundle {
    pub SpaceID: Uuid,
    pub SpaceSlug: String,
    pub TargetID: Uuid,
    pub TargetSlug: String,
    pub ReleaseNum: i64,
    pub RevisionSpec: String,
    pub ChangeOrderID: Option<Uuid>,
    /// See [`digest`].
    pub Digest: String,
    /// Sorted by Unit Slug.
    pub Units: Vec<BundledUnit>,
}

/// Where a bundle comes from and goes to, apart from its Units.
#[derive(Debug, Clone)]
pub struct BundleHeader {
    pub space_id: Uuid,
    pub space_slug: String,
    pub target_id: Uuid,
    pub target_slug: String,
    pub release_num: i64,
    pub revision_spec: String,
    pub change_order_id: Option<Uuid>,
}

impl Bundle {
    /// Builds a bundle from (Unit ID, Unit Slug, revision number, data) entries, in any order.
    pub fn build(header: BundleHeader, units: Vec<(Uuid, String, i64, String)>) -> Bundle {
        let mut units: Vec<BundledUnit> = units
            .into_iter()
            .map(|(id, slug, num, data)| BundledUnit {
                UnitID: id,
                UnitSlug: slug,
                RevisionNum: num,
                DataHash: crate::model::data_hash(&data),
                Data: data,
            })
            .collect();
        units.sort_by(|a, b| a.UnitSlug.cmp(&b.UnitSlug));
        Bundle {
            Digest: digest(&units),
            SpaceID: header.space_id,
            SpaceSlug: header.space_slug,
            TargetID: header.target_id,
            TargetSlug: header.target_slug,
            ReleaseNum: header.release_num,
            RevisionSpec: header.revision_spec,
            ChangeOrderID: header.change_order_id,
            Units: units,
        }
    }

    /// What the Release records of each bundled Unit.
    pub fn revisions(&self) -> Vec<ReleasedRevision> {
        self.Units
            .iter()
            .map(|u| ReleasedRevision {
                UnitID: u.UnitID,
                UnitSlug: u.UnitSlug.clone(),
                RevisionNum: u.RevisionNum,
                DataHash: u.DataHash.clone(),
            })
            .collect()
    }

    /// The bundle without the Units' data: what `release.json` holds beside the files.
    pub fn manifest(&self) -> Value {
        let mut v = serde_json::to_value(self).expect("bundles serialize");
        if let Some(units) = v.get_mut("Units").and_then(Value::as_array_mut) {
            for u in units {
                if let Some(o) = u.as_object_mut() {
                    o.remove("Data");
                }
            }
        }
        v
    }
}

/// SHA-256 (hex) over the Units' Slugs and data, in Slug order, each length-prefixed so no two
/// different bundles frame to the same bytes. Revision numbers, the Space and the Target are
/// left out: the same content has the same digest whichever revisions carried it.
pub fn digest(units: &[BundledUnit]) -> String {
    let mut sorted: Vec<&BundledUnit> = units.iter().collect();
    sorted.sort_by(|a, b| a.UnitSlug.cmp(&b.UnitSlug));
    let mut h = Sha256::new();
    for u in sorted {
        for part in [u.UnitSlug.as_bytes(), u.Data.as_bytes()] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> BundleHeader {
        BundleHeader {
            space_id: Uuid::nil(),
            space_slug: "dev".into(),
            target_id: Uuid::nil(),
            target_slug: "out".into(),
            release_num: 1,
            revision_spec: String::new(),
            change_order_id: None,
        }
    }

    fn entry(slug: &str, num: i64, data: &str) -> (Uuid, String, i64, String) {
        (Uuid::new_v4(), slug.to_string(), num, data.to_string())
    }

    #[test]
    fn specs_parse() {
        assert_eq!(RevisionSpec::parse("").unwrap(), RevisionSpec::Heads);
        assert_eq!(RevisionSpec::parse("HeadRevisionNum").unwrap(), RevisionSpec::Heads);
        assert_eq!(RevisionSpec::parse("Tag:v1").unwrap(), RevisionSpec::Tag("v1".into()));
        assert_eq!(RevisionSpec::parse(" Tag:base/v1 ").unwrap(), RevisionSpec::Tag("base/v1".into()));
        assert_eq!(
            RevisionSpec::parse("ChangeOrder:bump").unwrap(),
            RevisionSpec::ChangeOrder("bump".into())
        );
        assert_eq!(
            RevisionSpec::parse("Before:ChangeOrder:base/bump").unwrap(),
            RevisionSpec::BeforeChangeOrder("base/bump".into())
        );
    }

    #[test]
    fn bad_specs_name_the_value_and_the_forms() {
        for bad in
            ["7", "v1", "Tag:", "ChangeOrder: ", "Before:Tag", "Before:ChangeOrder:", "tag:v1", "Tag:a b"]
        {
            let e = RevisionSpec::parse(bad).unwrap_err();
            assert_eq!(e.field, "Revision", "{bad}");
            assert_eq!(e.value, bad.trim(), "{bad}");
            assert!(e.reason.contains("Tag:<tag>") && e.reason.contains("Before:ChangeOrder:"), "{e}");
        }
        assert!(RevisionSpec::parse("3").unwrap_err().reason.contains("revision number"));
    }

    #[test]
    fn bundles_sort_by_slug_and_hash_data() {
        let b = Bundle::build(header(), vec![entry("web", 2, "a: 1\n"), entry("db", 1, "b: 2\n")]);
        let slugs: Vec<&str> = b.Units.iter().map(|u| u.UnitSlug.as_str()).collect();
        assert_eq!(slugs, ["db", "web"]);
        assert_eq!(b.Units[1].DataHash, crate::model::data_hash("a: 1\n"));
        let m = b.manifest();
        assert!(m["Units"][0].get("Data").is_none());
        assert_eq!(m["Units"][0]["UnitSlug"], "db");
        assert_eq!(m["Digest"], b.Digest);
    }

    #[test]
    fn digest_follows_content_only() {
        let one = Bundle::build(header(), vec![entry("web", 2, "a: 1\n"), entry("db", 1, "b: 2\n")]);
        let mut h = header();
        h.release_num = 9;
        h.space_slug = "prod".into();
        let same = Bundle::build(h, vec![entry("db", 4, "b: 2\n"), entry("web", 7, "a: 1\n")]);
        assert_eq!(one.Digest, same.Digest, "order, numbers and context do not matter");
        let changed = Bundle::build(header(), vec![entry("web", 2, "a: 2\n"), entry("db", 1, "b: 2\n")]);
        assert_ne!(one.Digest, changed.Digest);
        let renamed = Bundle::build(header(), vec![entry("web2", 2, "a: 1\n"), entry("db", 1, "b: 2\n")]);
        assert_ne!(one.Digest, renamed.Digest);
        // framing: moving bytes between slug and data changes the digest
        let a = Bundle::build(header(), vec![entry("ab", 1, "c")]);
        let b = Bundle::build(header(), vec![entry("a", 1, "bc")]);
        assert_ne!(a.Digest, b.Digest);
        assert_eq!(one.Digest.len(), 64);
        let empty = Bundle::build(header(), vec![]);
        assert_eq!(empty.Digest, hex::encode(Sha256::digest(b"")));
    }
}
