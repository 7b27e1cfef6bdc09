//! Structural merge of Unit data: diff two document streams into a [`Patch`], apply a patch
//! to a downstream stream while honouring [`ProtectedPath`]s (local overrides), and report
//! every withheld change as a [`Conflict`]. This module owns document identity
//! ([`ResourceKey`]), paths inside a document ([`Path`], with `?name=<value>` segments for
//! k8s-style named lists) and the get/set/remove primitives the rest of the crate reuses.
//! Everything here is a pure function over already-parsed `serde_json::Value` documents: no
//! I/O, no storage, no revision numbers (callers wrap conflicts with those).
//!
//! Guarantee (property-tested): `apply(old, &diff(old, new), &[])` has no conflicts and yields
//! `new`'s documents, equal as `serde_json::Value`s, in this order: those whose key is also in
//! `old` in `old`'s order, then the added ones in `new`'s order (so exactly `new` whenever
//! `new` does not reorder `old`'s documents). Object key order is not significant for that
//! equality: keys kept from `old` keep their place and added keys come last.

mod apply;
mod diff;
mod path;

pub use apply::{
    Applied, Conflict, ProtectedPath, REASON_MISSING_RESOURCE, REASON_PROTECTED_PATH, REASON_UNRESOLVED_PATH,
    apply,
};
pub use diff::{Patch, PatchOp, ResourceKey, changed_paths, diff, resource_key, stream_keys};
pub use path::{MergeError, Path, Segment, get_path, get_path_mut, remove_path, set_path};
