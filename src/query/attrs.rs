//! Allow-lists: which attributes of each entity a where expression may name, and their types.
//!
//! Everything here is static data. To make a new attribute queryable, add one `Name: T::Type`
//! line to the entity's `attrs!` list; to add an entity, add a `pub static` built with `attrs!`
//! and list it in [`ENTITIES`]. The name must be the PascalCase key of the entity's JSON.
//! For example, a change-order entity would be:
//!
//! ```text
//! pub static CHANGE_ORDER: Entity = Entity {
//!     name: "ChangeOrder",
//!     self_qualifier: false,
//!     attrs: attrs![
//!         ChangeOrderID: T::Uuid, SpaceID: T::Uuid, Slug: T::String, State: T::String,
//!         InScopeSpaceIDs: T::Array(UUID), ResolvedSpaceIDs: T::Array(UUID),
//!     ],
//! };
//! ```
//!
//! (`attrs!` appends `Version`, `CreatedAt` and `UpdatedAt`.) A relation (`T::Relation(&X)`)
//! is reachable one level deep, and only if the caller attaches it to the JSON.

use std::fmt;

/// The type of a queryable attribute, which decides the operators it accepts.
#[derive(Clone, Copy)]
pub enum AttrType {
    /// A JSON string; compared lexicographically.
    String,
    /// A JSON integer.
    Int,
    /// A JSON boolean; only `=`, `!=` and `IS TRUE`-style tests.
    Bool,
    /// A UUID string, never null; compared case-insensitively, only `=`, `!=`, `IN`.
    Uuid,
    /// A UUID string or JSON null; like [`AttrType::Uuid`] but also `IS [NOT] NULL`.
    NullableUuid,
    /// An RFC 3339 timestamp string; compared as a string.
    Time,
    /// A string-to-string map such as `Labels`; `Labels.key` selects one (nullable) value.
    Map,
    /// An array of scalars of the given element type; `attr ? 'value'` and `LEN(attr)`.
    Array(&'static AttrType),
    /// An array of objects with the given fields; `Attr.*.Field` means "any element's field".
    ObjectArray(&'static [Attr]),
    /// A related entity the caller attaches as a nested object (`"Space": {...}`).
    Relation(&'static Entity),
}

/// Broad comparison class of a type: two operands can be compared when their classes agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Str,
    Int,
    Bool,
    Uuid,
    Other,
}

impl AttrType {
    pub(crate) fn class(&self) -> Class {
        match self {
            AttrType::String | AttrType::Time => Class::Str,
            AttrType::Int => Class::Int,
            AttrType::Bool => Class::Bool,
            AttrType::Uuid | AttrType::NullableUuid => Class::Uuid,
            _ => Class::Other,
        }
    }

    /// Human-readable name used in error messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            AttrType::String => "a String".into(),
            AttrType::Int => "an Int".into(),
            AttrType::Bool => "a Bool".into(),
            AttrType::Uuid => "a Uuid".into(),
            AttrType::NullableUuid => "a nullable Uuid".into(),
            AttrType::Time => "a Time".into(),
            AttrType::Map => "a Map".into(),
            AttrType::Array(elem) => {
                format!("an array of {}", elem.describe().split_once(' ').map_or("", |x| x.1))
            }
            AttrType::ObjectArray(_) => "an array of objects".into(),
            AttrType::Relation(e) => format!("a relation to {}", e.name),
        }
    }
}

impl fmt::Debug for AttrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrType::String => f.write_str("String"),
            AttrType::Int => f.write_str("Int"),
            AttrType::Bool => f.write_str("Bool"),
            AttrType::Uuid => f.write_str("Uuid"),
            AttrType::NullableUuid => f.write_str("NullableUuid"),
            AttrType::Time => f.write_str("Time"),
            AttrType::Map => f.write_str("Map"),
            AttrType::Array(elem) => write!(f, "Array({elem:?})"),
            AttrType::ObjectArray(fields) => f.debug_tuple("ObjectArray").field(fields).finish(),
            // Relations can be cyclic (Unit -> UpstreamUnit -> Unit): print only the name.
            AttrType::Relation(e) => write!(f, "Relation({})", e.name),
        }
    }
}

impl PartialEq for AttrType {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (AttrType::Array(a), AttrType::Array(b)) => a == b,
            (AttrType::ObjectArray(a), AttrType::ObjectArray(b)) => a == b,
            (AttrType::Relation(a), AttrType::Relation(b)) => a.name == b.name,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

/// One queryable attribute: its JSON key and type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attr {
    /// PascalCase JSON key, e.g. `HeadRevisionNum`.
    pub name: &'static str,
    /// Its type.
    pub ty: AttrType,
}

/// An entity kind and its allow-list of queryable attributes.
#[derive(Debug)]
pub struct Entity {
    /// Entity name, e.g. `Unit`.
    pub name: &'static str,
    /// Whether `Name.` may prefix the entity's own attributes (`Unit.UpstreamRevisionNum`).
    pub self_qualifier: bool,
    /// The allow-list.
    pub attrs: &'static [Attr],
}

impl Entity {
    /// The attribute called `name` (case-sensitive), if it is on the allow-list.
    pub fn attr(&self, name: &str) -> Option<&'static Attr> {
        self.attrs.iter().find(|a| a.name == name)
    }
}

/// Builds an allow-list, appending the attributes every entity has.
macro_rules! attrs {
    ($($name:ident : $ty:expr),* $(,)?) => {
        &[
            $(Attr { name: stringify!($name), ty: $ty },)*
            Attr { name: "Version", ty: AttrType::Int },
            Attr { name: "CreatedAt", ty: AttrType::Time },
            Attr { name: "UpdatedAt", ty: AttrType::Time },
        ]
    };
}

use AttrType as T;

const UUID: &AttrType = &T::Uuid;

/// Fields of one element of `Conflicts`.
pub static CONFLICT_FIELDS: &[Attr] = &[
    Attr { name: "Resource", ty: T::String },
    Attr { name: "Path", ty: T::String },
    Attr { name: "Reason", ty: T::String },
    Attr { name: "UpstreamRevisionNum", ty: T::Int },
];

/// Fields of one element of `ValidationErrors`.
pub static VALIDATION_ERROR_FIELDS: &[Attr] = &[
    Attr { name: "Source", ty: T::String },
    Attr { name: "Resource", ty: T::String },
    Attr { name: "Path", ty: T::String },
    Attr { name: "Message", ty: T::String },
];

/// Fields of one element of `ProtectedPaths`.
pub static PROTECTED_PATH_FIELDS: &[Attr] =
    &[Attr { name: "Resource", ty: T::String }, Attr { name: "Path", ty: T::String }];

/// Space allow-list.
pub static SPACE: Entity = Entity {
    name: "Space",
    self_qualifier: false,
    attrs: attrs![
        SpaceID: T::Uuid, Slug: T::String, DisplayName: T::String, Labels: T::Map,
        Annotations: T::Map, ReleaseTargetID: T::NullableUuid, UpstreamSpaceID: T::NullableUuid,
    ],
};

/// Unit allow-list; relations `Space` and `UpstreamUnit` must be attached by the caller.
pub static UNIT: Entity = Entity {
    name: "Unit",
    self_qualifier: true,
    attrs: attrs![
        UnitID: T::Uuid, SpaceID: T::Uuid, Slug: T::String, DisplayName: T::String,
        Labels: T::Map, Annotations: T::Map, ToolchainType: T::String,
        HeadRevisionNum: T::Int, HeadRevisionID: T::Uuid, DataHash: T::String,
        DataSize: T::Int, LastChangeDescription: T::String,
        UpstreamUnitID: T::NullableUuid, UpstreamSpaceID: T::NullableUuid,
        UpstreamRevisionNum: T::Int, LastReleasedRevisionNum: T::Int,
        TargetID: T::NullableUuid,
        Conflicts: T::ObjectArray(CONFLICT_FIELDS),
        ValidationErrors: T::ObjectArray(VALIDATION_ERROR_FIELDS),
        ProtectedPaths: T::ObjectArray(PROTECTED_PATH_FIELDS),
        Space: T::Relation(&SPACE), UpstreamUnit: T::Relation(&UNIT),
    ],
};

/// Revision allow-list.
pub static REVISION: Entity = Entity {
    name: "Revision",
    self_qualifier: false,
    attrs: attrs![
        RevisionID: T::Uuid, UnitID: T::Uuid, SpaceID: T::Uuid, RevisionNum: T::Int,
        Description: T::String, Source: T::String, UserID: T::Uuid, DataHash: T::String,
        DataSize: T::Int, Tags: T::Array(UUID), ChangeOrders: T::Array(UUID),
        ValidationErrors: T::ObjectArray(VALIDATION_ERROR_FIELDS),
    ],
};

/// Link allow-list.
pub static LINK: Entity = Entity {
    name: "Link",
    self_qualifier: false,
    attrs: attrs![
        LinkID: T::Uuid, SpaceID: T::Uuid, Slug: T::String, DisplayName: T::String,
        Labels: T::Map, Annotations: T::Map, FromUnitID: T::Uuid, ToUnitID: T::Uuid,
        ToSpaceID: T::Uuid, UpdateType: T::String,
        UpstreamLastMergedRevisionNum: T::Int, DownstreamLastMergedRevisionNum: T::Int,
    ],
};

/// Tag allow-list.
pub static TAG: Entity = Entity {
    name: "Tag",
    self_qualifier: false,
    attrs: attrs![
        TagID: T::Uuid, SpaceID: T::Uuid, Slug: T::String, DisplayName: T::String,
        Labels: T::Map, Annotations: T::Map, ChangeOrderID: T::NullableUuid,
    ],
};

/// ChangeOrder allow-list (the derived sets and State included: they are what users ask).
pub static CHANGE_ORDER: Entity = Entity {
    name: "ChangeOrder",
    self_qualifier: false,
    attrs: attrs![
        ChangeOrderID: T::Uuid, SpaceID: T::Uuid, Slug: T::String, DisplayName: T::String,
        Description: T::String, Labels: T::Map, Annotations: T::Map, UpdateType: T::String,
        StartTagID: T::Uuid, EndTagID: T::Uuid, AdoptedEndTagID: T::NullableUuid,
        RestoreTagID: T::NullableUuid, InScopeSpaceIDs: T::Array(UUID), WhereSpace: T::String,
        ResolvedSpaceIDs: T::Array(UUID), ReleasedSpaceIDs: T::Array(UUID),
        RestoredSpaceIDs: T::Array(UUID), ReleasedRestoredSpaceIDs: T::Array(UUID),
        State: T::String, AbortedReason: T::String, Stage: T::String,
        ChangeWorkflowID: T::NullableUuid, InvocationID: T::NullableUuid,
    ],
};

/// ChangeWorkflow allow-list.
pub static CHANGE_WORKFLOW: Entity = Entity {
    name: "ChangeWorkflow",
    self_qualifier: false,
    attrs: attrs![
        ChangeWorkflowID: T::Uuid, SpaceID: T::Uuid, Slug: T::String, DisplayName: T::String,
        Description: T::String, Labels: T::Map, Annotations: T::Map,
    ],
};

/// Webhook allow-list.
pub static WEBHOOK: Entity = Entity {
    name: "Webhook",
    self_qualifier: false,
    attrs: attrs![WebhookID: T::Uuid, SpaceID: T::Uuid, Slug: T::String, DisplayName: T::String, OwnerID: T::Uuid],
};

/// Filter allow-list.
pub static FILTER: Entity = Entity {
    name: "Filter",
    self_qualifier: false,
    attrs: attrs![
        FilterID: T::Uuid, SpaceID: T::Uuid, Slug: T::String, DisplayName: T::String,
        Labels: T::Map, Annotations: T::Map, From: T::String, Where: T::String,
    ],
};

/// Invocation allow-list.
pub static INVOCATION: Entity = Entity {
    name: "Invocation",
    self_qualifier: false,
    attrs: attrs![
        InvocationID: T::Uuid, SpaceID: T::Uuid, Slug: T::String, DisplayName: T::String,
        Labels: T::Map, Annotations: T::Map, ToolchainType: T::String,
    ],
};

/// Target allow-list.
pub static TARGET: Entity = Entity {
    name: "Target",
    self_qualifier: false,
    attrs: attrs![
        TargetID: T::Uuid, SpaceID: T::Uuid, Slug: T::String, DisplayName: T::String,
        Labels: T::Map, Annotations: T::Map, ProviderType: T::String,
    ],
};

/// Fields of a Release's `LiveStatus`, reached as `LiveStatus.Health` (null before any report).
pub static LIVE_STATUS: Entity = Entity {
    name: "LiveStatus",
    self_qualifier: false,
    attrs: &[
        Attr { name: "Sync", ty: T::String },
        Attr { name: "Operation", ty: T::String },
        Attr { name: "Health", ty: T::String },
        Attr { name: "Message", ty: T::String },
        Attr { name: "ObservedAt", ty: T::Time },
    ],
};

/// Release allow-list.
pub static RELEASE: Entity = Entity {
    name: "Release",
    self_qualifier: false,
    attrs: attrs![
        ReleaseID: T::Uuid, SpaceID: T::Uuid, Slug: T::String, DisplayName: T::String,
        Labels: T::Map, Annotations: T::Map, TargetID: T::Uuid, ReleaseNum: T::Int,
        TagID: T::Uuid, ChangeOrderID: T::NullableUuid, Digest: T::String,
        RevisionSpec: T::String, PublishedBy: T::Uuid, LiveStatus: T::Relation(&LIVE_STATUS),
    ],
};

/// User allow-list.
pub static USER: Entity = Entity {
    name: "User",
    self_qualifier: false,
    attrs: attrs![UserID: T::Uuid, Slug: T::String, DisplayName: T::String, Admin: T::Bool],
};

/// Every entity, for [`entity`].
pub static ENTITIES: &[&Entity] = &[
    &SPACE,
    &UNIT,
    &REVISION,
    &LINK,
    &TAG,
    &FILTER,
    &INVOCATION,
    &TARGET,
    &RELEASE,
    &USER,
    &CHANGE_ORDER,
    &CHANGE_WORKFLOW,
];

/// Looks an entity up by its name (`"Space"`, `"Unit"`, ...), case-sensitively.
pub fn entity(name: &str) -> Option<&'static Entity> {
    ENTITIES.iter().copied().find(|e| e.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn lookup() {
        for e in ENTITIES {
            assert!(std::ptr::eq(entity(e.name).unwrap(), *e));
        }
        assert_eq!(entity("Space").unwrap().name, "Space");
        assert!(entity("unit").is_none());
        assert_eq!(UNIT.attr("HeadRevisionNum").unwrap().ty, AttrType::Int);
        assert!(UNIT.attr("headRevisionNum").is_none());
    }

    #[test]
    fn allow_lists_are_well_formed() {
        let names: HashSet<_> = ENTITIES.iter().map(|e| e.name).collect();
        assert_eq!(names.len(), ENTITIES.len());
        assert!(ENTITIES.len() >= 9);
        for e in ENTITIES {
            let attrs: HashSet<_> = e.attrs.iter().map(|a| a.name).collect();
            assert_eq!(attrs.len(), e.attrs.len(), "duplicate attribute in {}", e.name);
            for common in ["Version", "CreatedAt", "UpdatedAt"] {
                assert!(attrs.contains(common), "{} lacks {common}", e.name);
            }
            // Revisions are numbered, not named.
            assert_eq!(attrs.contains("Slug"), e.name != "Revision", "{}", e.name);
            let id = format!("{}ID", e.name);
            assert_eq!(e.attr(&id).map(|a| a.ty), Some(AttrType::Uuid), "{}", e.name);
        }
        assert_eq!(UNIT.attr("Space").unwrap().ty, AttrType::Relation(&SPACE));
        assert_ne!(UNIT.attr("UpstreamUnit").unwrap().ty, AttrType::Relation(&SPACE));
        assert_eq!(REVISION.attr("Tags").unwrap().ty, AttrType::Array(&AttrType::Uuid));
        assert_eq!(USER.attr("Admin").unwrap().ty, AttrType::Bool);
    }

    #[test]
    fn classes_and_debug() {
        assert_eq!(AttrType::Time.class(), Class::Str);
        assert_eq!(AttrType::NullableUuid.class(), Class::Uuid);
        assert_eq!(AttrType::Map.class(), Class::Other);
        // Relations are cyclic (Unit -> UpstreamUnit -> Unit); Debug must still terminate.
        let dbg = format!("{UNIT:?}");
        assert!(dbg.contains("Relation(Unit)") && dbg.contains("Relation(Space)"));
        assert_eq!(AttrType::Array(UUID).describe(), "an array of Uuid");
    }
}
