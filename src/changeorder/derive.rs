//! What a new ChangeOrder covers in its base Space: per Unit, the interval (start, end].

use crate::model::{CoveredUnit, SkippedUnit};
use thiserror::Error;
use uuid::Uuid;

/// A Unit of the base Space as creation sees it.
#[derive(Debug, Clone)]
pub struct BaseUnit {
    pub id: Uuid,
    pub slug: String,
    pub head: i64,
    /// Cursors (`UpstreamLastMergedRevisionNum`) of the in-scope downstream Links taking from it,
    /// with the downstream Space's slug, for the error message.
    pub downstream_cursors: Vec<(String, i64)>,
    /// With `--end-tag`: the revision the adopted Tag marks on this Unit, if any.
    pub adopted_end: Option<i64>,
}

/// The derived intervals.
#[derive(Debug, Clone, PartialEq)]
pub struct Coverage {
    pub covered: Vec<CoveredUnit>,
    pub skipped: Vec<SkippedUnit>,
}

#[derive(Debug, Clone, Error, PartialEq)]
pub enum DeriveError {
    #[error(
        "unit '{unit}': its downstreams disagree on the revision already taken ({}); bring them level \
         (upgrade the ones behind) or narrow the scope, so one range is promoted to every target",
        .cursors.iter().map(|(s, c)| format!("{s} at {c}")).collect::<Vec<_>>().join(", ")
    )]
    DisagreeingCursors { unit: String, cursors: Vec<(String, i64)> },
}

/// Derives each base Unit's interval. `adopting` says an end Tag was supplied: then a Unit the
/// Tag does not mark carries nothing of the change and is skipped.
pub fn derive_coverage(units: &[BaseUnit], adopting: bool) -> Result<Coverage, DeriveError> {
    let mut covered = vec![];
    let mut skipped = vec![];
    for u in units {
        if u.head == 0 {
            skipped.push(SkippedUnit {
                UnitID: u.id,
                Slug: u.slug.clone(),
                Reason: "the unit has no revisions".into(),
            });
            continue;
        }
        let mut distinct: Vec<i64> = u.downstream_cursors.iter().map(|(_, c)| *c).collect();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() > 1 {
            return Err(DeriveError::DisagreeingCursors {
                unit: u.slug.clone(),
                cursors: u.downstream_cursors.clone(),
            });
        }
        let start = distinct.first().copied().unwrap_or(0);
        let end = match (adopting, u.adopted_end) {
            (true, None) => {
                skipped.push(SkippedUnit {
                    UnitID: u.id,
                    Slug: u.slug.clone(),
                    Reason: "the end tag marks no revision of this unit".into(),
                });
                continue;
            }
            (true, Some(e)) => e,
            (false, _) => u.head,
        };
        // Downstreams already past the end have taken all of it: the unit is marked at start.
        let end = end.max(start);
        covered.push(CoveredUnit {
            UnitID: u.id,
            Slug: u.slug.clone(),
            StartRevisionNum: start,
            EndRevisionNum: end,
        });
    }
    Ok(Coverage { covered, skipped })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(slug: &str, head: i64, cursors: &[(&str, i64)], adopted: Option<i64>) -> BaseUnit {
        BaseUnit {
            id: Uuid::new_v4(),
            slug: slug.into(),
            head,
            downstream_cursors: cursors.iter().map(|(s, c)| (s.to_string(), *c)).collect(),
            adopted_end: adopted,
        }
    }

    #[test]
    fn start_from_cursors_end_at_head() {
        let c = derive_coverage(&[unit("web", 5, &[("dev", 3), ("qa", 3)], None)], false).unwrap();
        assert_eq!((c.covered[0].StartRevisionNum, c.covered[0].EndRevisionNum), (3, 5));
    }

    #[test]
    fn nothing_new_is_marked_at_start() {
        let c = derive_coverage(&[unit("db", 2, &[("dev", 2)], None)], false).unwrap();
        assert_eq!((c.covered[0].StartRevisionNum, c.covered[0].EndRevisionNum), (2, 2));
    }

    #[test]
    fn no_downstream_yet_starts_at_zero() {
        let c = derive_coverage(&[unit("new", 4, &[], None)], false).unwrap();
        assert_eq!((c.covered[0].StartRevisionNum, c.covered[0].EndRevisionNum), (0, 4));
    }

    #[test]
    fn disagreeing_downstreams_name_unit_and_values() {
        let e = derive_coverage(&[unit("web", 5, &[("dev", 3), ("qa", 4)], None)], false).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("'web'") && msg.contains("dev at 3") && msg.contains("qa at 4"), "{msg}");
    }

    #[test]
    fn adopted_tag_bounds_the_end_and_skips_unmarked_units() {
        let units = [unit("web", 9, &[("dev", 3)], Some(6)), unit("db", 4, &[("dev", 4)], None)];
        let c = derive_coverage(&units, true).unwrap();
        assert_eq!(c.covered.len(), 1);
        assert_eq!(c.covered[0].EndRevisionNum, 6);
        assert_eq!(c.skipped[0].Slug, "db");
        assert!(c.skipped[0].Reason.contains("end tag"));
    }
}
