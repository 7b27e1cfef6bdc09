//! The entities, serialized with ConfigHub's PascalCase field names.

use super::{InvalidField, Labels, Slug, validate_labels};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::Value;
use std::fmt;
use std::str::FromStr;
use uuid::Uuid;

/// What every stored entity shares, so one store can keep them all.
pub trait Entity: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {
    /// Stable kind name, also the name in where-expression allow-lists and error messages.
    const KIND: &'static str;
    fn id(&self) -> Uuid;
    /// The container Space; `None` for Spaces and Users, which live at the top.
    fn space_id(&self) -> Option<Uuid>;
    fn slug(&self) -> &str;
    fn version(&self) -> i64;
    fn set_version(&mut self, v: i64);
    fn set_updated_at(&mut self, t: DateTime<Utc>);
    /// For Links: the edge the store indexes. Everything else has none.
    fn link_edge(&self) -> Option<LinkEdge> {
        None
    }
}

/// A Link as an edge of the Space graph: downstream (From) takes from upstream (To).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkEdge {
    pub link: Uuid,
    pub space: Uuid,
    pub from_unit: Uuid,
    pub to_unit: Uuid,
    pub to_space: Uuid,
    pub update_type: UpdateType,
}

/// Implements [`Entity`] for a struct with the usual ID, SpaceID (or none), Slug, Version and
/// UpdatedAt fields.
macro_rules! entity {
    ($t:ident, $kind:literal, $id:ident, space: $space:expr $(, $extra:item)*) => {
        impl Entity for $t {
            const KIND: &'static str = $kind;
            fn id(&self) -> Uuid {
                self.$id
            }
            fn space_id(&self) -> Option<Uuid> {
                #[allow(clippy::redundant_closure_call)]
                ($space)(self)
            }
            fn slug(&self) -> &str {
                self.Slug.as_str()
            }
            fn version(&self) -> i64 {
                self.Version
            }
            fn set_version(&mut self, v: i64) {
                self.Version = v;
            }
            fn set_updated_at(&mut self, t: DateTime<Utc>) {
                self.UpdatedAt = t;
            }
            $($extra)*
        }
    };
}
pub(crate) use entity;

/// The toolchain a Unit's data is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ToolchainType {
    #[default]
    #[serde(rename = "Kubernetes/YAML")]
    KubernetesYaml,
    #[serde(rename = "AppConfig/YAML")]
    AppConfigYaml,
    #[serde(rename = "Deckhand/YAML")]
    DeckhandYaml,
}

impl FromStr for ToolchainType {
    type Err = InvalidField;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Kubernetes/YAML" => Ok(Self::KubernetesYaml),
            "AppConfig/YAML" => Ok(Self::AppConfigYaml),
            "Deckhand/YAML" => Ok(Self::DeckhandYaml),
            _ => Err(InvalidField::new(
                "ToolchainType",
                s,
                "expected one of Kubernetes/YAML, AppConfig/YAML, Deckhand/YAML",
            )),
        }
    }
}

/// A Space: the container of Units and everything attached to them.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Space {
    pub SpaceID: Uuid,
    pub Slug: Slug,
    pub DisplayName: String,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
    #[serde(default)]
    pub ReleaseTargetID: Option<Uuid>,
    /// The Space this one is a variant of (`variant create`), if any.
    #[serde(default)]
    pub UpstreamSpaceID: Option<Uuid>,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}
entity!(Space, "Space", SpaceID, space: |_s: &Space| None);

impl Space {
    pub fn new(slug: Slug, labels: Labels, annotations: Labels) -> Result<Space, InvalidField> {
        validate_labels("Labels", &labels)?;
        validate_labels("Annotations", &annotations)?;
        let now = Utc::now();
        Ok(Space {
            SpaceID: Uuid::new_v4(),
            DisplayName: slug.to_string(),
            Slug: slug,
            Labels: labels,
            Annotations: annotations,
            ReleaseTargetID: None,
            UpstreamSpaceID: None,
            Version: 1,
            CreatedAt: now,
            UpdatedAt: now,
        })
    }
}

/// A path a merge must not overwrite: a local override.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProtectedPath {
    pub Resource: String,
    pub Path: String,
}

/// A merge result that was withheld from a Unit, never silently dropped.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conflict {
    pub Resource: String,
    pub Path: String,
    /// `ProtectedPath` or `MissingResource`.
    pub Reason: String,
    /// The value the upstream wanted to write (absent for a removal).
    #[serde(default)]
    pub UpstreamValue: Option<Value>,
    /// The value the downstream keeps.
    #[serde(default)]
    pub DownstreamValue: Option<Value>,
    /// The upstream revision whose change was withheld.
    pub UpstreamRevisionNum: i64,
}

/// One validation failure recorded on a Unit and its head Revision.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationError {
    /// What produced it: a function name or a rendering engine.
    pub Source: String,
    #[serde(default)]
    pub Resource: String,
    #[serde(default)]
    pub Path: String,
    pub Message: String,
}

/// A Unit: one blob of configuration (a YAML document stream) with its revision history.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unit {
    pub UnitID: Uuid,
    pub SpaceID: Uuid,
    pub Slug: Slug,
    pub DisplayName: String,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
    pub ToolchainType: ToolchainType,
    pub HeadRevisionNum: i64,
    pub HeadRevisionID: Uuid,
    pub DataHash: String,
    pub DataSize: i64,
    #[serde(default)]
    pub LastChangeDescription: String,
    #[serde(default)]
    pub UpstreamUnitID: Option<Uuid>,
    #[serde(default)]
    pub UpstreamSpaceID: Option<Uuid>,
    /// The upstream revision last merged (0 when the Unit has no upstream).
    #[serde(default)]
    pub UpstreamRevisionNum: i64,
    #[serde(default)]
    pub LastReleasedRevisionNum: i64,
    #[serde(default)]
    pub TargetID: Option<Uuid>,
    #[serde(default)]
    pub ProtectedPaths: Vec<ProtectedPath>,
    #[serde(default)]
    pub Conflicts: Vec<Conflict>,
    #[serde(default)]
    pub ValidationErrors: Vec<ValidationError>,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}
entity!(Unit, "Unit", UnitID, space: |u: &Unit| Some(u.SpaceID));

/// What made a Revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RevisionSource {
    CreateUnit,
    Update,
    Invoke,
    CloneUnit,
    UpgradeUnit,
    MergeUnits,
    Restore,
}

impl fmt::Display for RevisionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// An immutable snapshot of a Unit's data. Tags, ChangeOrders and validation results accrue
/// on it later; the data never changes.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Revision {
    pub RevisionID: Uuid,
    pub UnitID: Uuid,
    pub SpaceID: Uuid,
    pub RevisionNum: i64,
    #[serde(default)]
    pub Description: String,
    pub Source: RevisionSource,
    /// The user who wrote it; the nil UUID for automated changes.
    pub UserID: Uuid,
    pub DataHash: String,
    pub DataSize: i64,
    #[serde(default)]
    pub Tags: Vec<Uuid>,
    #[serde(default)]
    pub ChangeOrders: Vec<Uuid>,
    #[serde(default)]
    pub ValidationErrors: Vec<ValidationError>,
    /// For merge revisions: the upstream revision this one carries.
    #[serde(default)]
    pub UpstreamRevisionNum: i64,
    pub CreatedAt: DateTime<Utc>,
}

/// A named set of Revisions across Units.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tag {
    pub TagID: Uuid,
    pub SpaceID: Uuid,
    pub Slug: Slug,
    pub DisplayName: String,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
    #[serde(default)]
    pub ChangeOrderID: Option<Uuid>,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}
entity!(Tag, "Tag", TagID, space: |t: &Tag| Some(t.SpaceID));

/// How a Link moves data from its upstream (To) Unit into its downstream (From) Unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpdateType {
    /// Clone lineage: merge and keep the Unit's UpstreamRevisionNum in sync.
    UpgradeUnit,
    /// Merge without lineage.
    MergeUnits,
}

impl UpdateType {
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateType::UpgradeUnit => "UpgradeUnit",
            UpdateType::MergeUnits => "MergeUnits",
        }
    }
}

impl FromStr for UpdateType {
    type Err = InvalidField;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "UpgradeUnit" => Ok(Self::UpgradeUnit),
            "MergeUnits" => Ok(Self::MergeUnits),
            _ => Err(InvalidField::new("UpdateType", s, "expected UpgradeUnit or MergeUnits")),
        }
    }
}

/// Connects a downstream (From) Unit to an upstream (To) Unit; lives in the From Unit's Space.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub LinkID: Uuid,
    pub SpaceID: Uuid,
    pub Slug: Slug,
    pub DisplayName: String,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
    pub FromUnitID: Uuid,
    pub ToUnitID: Uuid,
    pub ToSpaceID: Uuid,
    pub UpdateType: UpdateType,
    /// Merge cursor: the last upstream revision merged.
    pub UpstreamLastMergedRevisionNum: i64,
    /// The downstream revision that merge produced.
    pub DownstreamLastMergedRevisionNum: i64,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}
entity!(Link, "Link", LinkID, space: |l: &Link| Some(l.SpaceID),
    fn link_edge(&self) -> Option<LinkEdge> {
        Some(LinkEdge {
            link: self.LinkID,
            space: self.SpaceID,
            from_unit: self.FromUnitID,
            to_unit: self.ToUnitID,
            to_space: self.ToSpaceID,
            update_type: self.UpdateType,
        })
    }
);

/// A saved where expression over one kind of entity.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Filter {
    pub FilterID: Uuid,
    pub SpaceID: Uuid,
    pub Slug: Slug,
    pub DisplayName: String,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
    /// The entity kind it selects: `Space`, `Unit`, ...
    pub From: String,
    pub Where: String,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}
entity!(Filter, "Filter", FilterID, space: |f: &Filter| Some(f.SpaceID));

/// A declared parameter of a parameterized Invocation.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvocationParameter {
    pub Name: String,
    #[serde(default = "default_data_type")]
    pub DataType: String,
    #[serde(default)]
    pub Required: bool,
    #[serde(default)]
    pub Description: String,
}

fn default_data_type() -> String {
    "String".into()
}

/// A stored, reusable, ordered list of function calls with declared parameters.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invocation {
    pub InvocationID: Uuid,
    pub SpaceID: Uuid,
    pub Slug: Slug,
    pub DisplayName: String,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
    pub ToolchainType: ToolchainType,
    #[serde(default)]
    pub Parameters: Vec<InvocationParameter>,
    pub FunctionInvocations: Vec<crate::invoke::FunctionCall>,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}
entity!(Invocation, "Invocation", InvocationID, space: |i: &Invocation| Some(i.SpaceID));

/// Where a Space's Releases go.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub TargetID: Uuid,
    pub SpaceID: Uuid,
    pub Slug: Slug,
    pub DisplayName: String,
    #[serde(default)]
    pub Labels: Labels,
    #[serde(default)]
    pub Annotations: Labels,
    /// `Directory` or `Webhook`.
    pub ProviderType: String,
    #[serde(default)]
    pub Options: Labels,
    /// The highest ReleaseNum published to this Target, by any Space (kept by publishing).
    #[serde(default)]
    pub LastReleaseNum: i64,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}
entity!(Target, "Target", TargetID, space: |t: &Target| Some(t.SpaceID));

/// Permission levels on a Space, each including the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Permission {
    View,
    Edit,
    Approve,
    Manage,
}

impl FromStr for Permission {
    type Err = InvalidField;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "view" => Ok(Self::View),
            "edit" => Ok(Self::Edit),
            "approve" => Ok(Self::Approve),
            "manage" => Ok(Self::Manage),
            _ => Err(InvalidField::new("Permission", s, "expected View, Edit, Approve or Manage")),
        }
    }
}

/// A permission on one Space, or on every Space when `SpaceID` is absent.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    #[serde(default)]
    pub SpaceID: Option<Uuid>,
    pub Permission: Permission,
}

/// A user of the API. Tokens are kept apart, hashed.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    pub UserID: Uuid,
    pub Slug: Slug,
    pub DisplayName: String,
    /// Admins may do everything, including managing users.
    #[serde(default)]
    pub Admin: bool,
    #[serde(default)]
    pub Grants: Vec<Grant>,
    pub Version: i64,
    pub CreatedAt: DateTime<Utc>,
    pub UpdatedAt: DateTime<Utc>,
}
entity!(User, "User", UserID, space: |_u: &User| None);

impl User {
    /// The highest permission this user holds on `space`.
    pub fn permission_on(&self, space: Uuid) -> Option<Permission> {
        if self.Admin {
            return Some(Permission::Manage);
        }
        self.Grants.iter().filter(|g| g.SpaceID.is_none_or(|s| s == space)).map(|g| g.Permission).max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_uses_pascal_case() {
        let s = Space::new(Slug::parse("dev").unwrap(), Labels::new(), Labels::new()).unwrap();
        let v = serde_json::to_value(&s).unwrap();
        assert!(v.get("SpaceID").is_some());
        assert_eq!(v["Slug"], "dev");
        assert!(v.get("Labels").is_some());
        assert_eq!(v["Version"], 1);
    }

    #[test]
    fn permissions_are_ordered() {
        let space = Uuid::new_v4();
        let mut u = User {
            UserID: Uuid::new_v4(),
            Slug: Slug::parse("ann").unwrap(),
            DisplayName: "ann".into(),
            Admin: false,
            Grants: vec![Grant { SpaceID: Some(space), Permission: Permission::Approve }],
            Version: 1,
            CreatedAt: Utc::now(),
            UpdatedAt: Utc::now(),
        };
        assert_eq!(u.permission_on(space), Some(Permission::Approve));
        assert!(u.permission_on(space) >= Some(Permission::Edit));
        assert_eq!(u.permission_on(Uuid::new_v4()), None);
        u.Grants.push(Grant { SpaceID: None, Permission: Permission::View });
        assert_eq!(u.permission_on(Uuid::new_v4()), Some(Permission::View));
    }

    #[test]
    fn toolchain_parse() {
        assert_eq!("Deckhand/YAML".parse::<ToolchainType>().unwrap(), ToolchainType::DeckhandYaml);
        let e = "Helm".parse::<ToolchainType>().unwrap_err();
        assert_eq!(e.field, "ToolchainType");
    }
}
