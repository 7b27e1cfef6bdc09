//! Attestation requirements (`AttestationPrerequisites`) judged per Revision: which recorded
//! Attestations count, how many distinct users passed, and whether a Fail blocks.
//!
//! The caller gathers the facts (this module reads nothing): for each Revision, who wrote the
//! change in that Space and every candidate Attestation, already including those recorded on an
//! earlier revision of the same Unit with the same content. Here they are filtered in a fixed
//! order (wrong Type ignored; then revoked, expired, older than MaxAge, ineligible, author) and
//! counted. A requirement over several Revisions holds only when it holds for each of them; an
//! empty set of Revisions does not hold, since there is nothing anyone could have approved.

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use uuid::Uuid;

pub use crate::model::AttestationResult;

/// Most failing revisions spelled out in one message; the rest are counted.
const MAX_LISTED: usize = 5;

/// An `AttestationPrerequisite` after compiling: defaults applied, MaxAge parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The prerequisite's Name.
    pub name: String,
    /// The Attestation Type that counts (`Approval` by default).
    pub kind: String,
    /// Distinct users with a Pass needed on each Revision (at least 1).
    pub count: u32,
    /// When non-empty, only these users' Attestations count; when empty, users holding Approve.
    pub from_user_ids: BTreeSet<Uuid>,
    /// Whether a user who wrote the change may attest it.
    pub allow_authors: bool,
    /// Attestations created longer ago than this do not count.
    pub max_age: Option<TimeDelta>,
    /// The MaxAge as written (for messages).
    pub max_age_text: String,
    /// Whether an eligible Fail is ignored rather than blocking.
    pub ignore_fail: bool,
}

/// One recorded Attestation that may cover a Revision.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttestationFact {
    pub AttestationID: Uuid,
    /// Who recorded it.
    pub UserID: Uuid,
    /// How to name the user in messages; the UserID is used when empty.
    #[serde(default)]
    pub UserName: String,
    pub Type: String,
    pub Result: AttestationResult,
    pub CreatedAt: DateTime<Utc>,
    #[serde(default)]
    pub ExpiresAt: Option<DateTime<Utc>>,
    /// A revocation of it has been recorded.
    #[serde(default)]
    pub Revoked: bool,
    /// The user holds the Approve permission on the Space (what counts when FromUserIDs is empty).
    #[serde(default)]
    pub AttesterCanApprove: bool,
}

/// One Revision of the change in a Space, with what is needed to judge its attestations.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevisionFacts {
    pub UnitSlug: String,
    pub RevisionNum: i64,
    /// Users who wrote the change's revisions of this Unit in the Space after the start Tag,
    /// through this revision. Automated revisions (the nil UUID) exclude nobody.
    #[serde(default)]
    pub Authors: BTreeSet<Uuid>,
    /// Attestations covering this revision or an earlier one of the Unit with the same content.
    #[serde(default)]
    pub Attestations: Vec<AttestationFact>,
}

/// Why an Attestation of the right Type did not count, in the order the checks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Discard {
    Revoked,
    Expired,
    TooOld,
    NotListed,
    NoApprove,
    Author,
}

/// The judgement of one requirement on one Revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionJudgement {
    /// Whether the requirement holds for this Revision.
    pub holds: bool,
    /// Distinct users whose Pass counted.
    pub passes: BTreeSet<Uuid>,
    /// Distinct users with a counted Fail (blocking unless IgnoreFail).
    pub fails: BTreeSet<Uuid>,
    /// What a user reads: `web#3 has 1 of 2 approvals (discarded: ...)`.
    pub message: String,
}

/// The judgement of one requirement over a set of Revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequirementVerdict {
    pub satisfied: bool,
    /// Names the failing revisions and why, or summarises what holds.
    pub message: String,
}

impl Requirement {
    /// `approval` / `approvals` for Type Approval, else `'<Type>' attestation(s)`.
    fn noun(&self, n: usize) -> String {
        let s = if n == 1 { "" } else { "s" };
        if self.kind == "Approval" {
            format!("approval{s}")
        } else {
            format!("'{}' attestation{s}", self.kind)
        }
    }

    fn discard(&self, a: &AttestationFact, authors: &BTreeSet<Uuid>, now: DateTime<Utc>) -> Option<Discard> {
        if a.Revoked {
            Some(Discard::Revoked)
        } else if a.ExpiresAt.is_some_and(|t| t <= now) {
            Some(Discard::Expired)
        } else if self.max_age.is_some_and(|age| now - a.CreatedAt > age) {
            Some(Discard::TooOld)
        } else if !self.from_user_ids.is_empty() && !self.from_user_ids.contains(&a.UserID) {
            Some(Discard::NotListed)
        } else if self.from_user_ids.is_empty() && !a.AttesterCanApprove {
            Some(Discard::NoApprove)
        } else if !self.allow_authors && !a.UserID.is_nil() && authors.contains(&a.UserID) {
            Some(Discard::Author)
        } else {
            None
        }
    }

    fn discard_reason(&self, a: &AttestationFact, why: Discard) -> String {
        let who = user(a);
        let what = format!("{who}'s {}", self.noun(1));
        match why {
            Discard::Revoked => format!("{what} was revoked"),
            Discard::Expired => {
                format!("{what} expired at {}", a.ExpiresAt.map(|t| t.to_rfc3339()).unwrap_or_default())
            }
            Discard::TooOld => format!("{what} is older than {}", self.max_age_text),
            Discard::NotListed => format!("{who} is not one of the FromUserIDs"),
            Discard::NoApprove => format!("{who} lacks the Approve permission on the Space"),
            Discard::Author => format!("{who} wrote the change"),
        }
    }

    /// Judges one Revision at `now`.
    pub fn judge(&self, rev: &RevisionFacts, now: DateTime<Utc>) -> RevisionJudgement {
        let mut passes = BTreeSet::new();
        let mut fails = BTreeSet::new();
        let mut discarded: Vec<String> = Vec::new();
        let mut fail_names: Vec<String> = Vec::new();
        for a in rev.Attestations.iter().filter(|a| a.Type == self.kind) {
            if let Some(why) = self.discard(a, &rev.Authors, now) {
                let reason = self.discard_reason(a, why);
                if !discarded.contains(&reason) {
                    discarded.push(reason);
                }
                continue;
            }
            match a.Result {
                AttestationResult::Pass => {
                    passes.insert(a.UserID);
                }
                AttestationResult::Fail => {
                    if fails.insert(a.UserID) {
                        fail_names.push(user(a));
                    }
                }
            }
        }
        let enough = passes.len() >= self.count as usize;
        let blocked = !self.ignore_fail && !fails.is_empty();
        let holds = enough && !blocked;
        let mut message = format!(
            "{}#{} has {} of {} {}",
            rev.UnitSlug,
            rev.RevisionNum,
            passes.len(),
            self.count,
            self.noun(self.count as usize)
        );
        if blocked {
            message
                .push_str(&format!(" and a Fail from {} (it blocks unless revoked)", fail_names.join(", ")));
        }
        // Discards explain a shortfall; when the requirement holds they are noise.
        if !holds && !discarded.is_empty() {
            message.push_str(&format!(" (discarded: {})", discarded.join("; ")));
        }
        RevisionJudgement { holds, passes, fails, message }
    }

    /// Judges the requirement over `revisions`: it holds when it holds for every one.
    pub fn evaluate(&self, revisions: &[RevisionFacts], now: DateTime<Utc>) -> RequirementVerdict {
        if revisions.is_empty() {
            return RequirementVerdict {
                satisfied: false,
                message: "no revision of the change is marked in this Space, so there is nothing to attest"
                    .to_string(),
            };
        }
        let judged: Vec<RevisionJudgement> = revisions.iter().map(|r| self.judge(r, now)).collect();
        let failing: Vec<&RevisionJudgement> = judged.iter().filter(|j| !j.holds).collect();
        if failing.is_empty() {
            let message = if let [only] = judged.as_slice() {
                only.message.clone()
            } else {
                format!(
                    "each of {} revisions has at least {} {}",
                    judged.len(),
                    self.count,
                    self.noun(self.count as usize)
                )
            };
            return RequirementVerdict { satisfied: true, message };
        }
        let listed: Vec<&str> = failing.iter().take(MAX_LISTED).map(|j| j.message.as_str()).collect();
        let mut message = listed.join(", ");
        let more = failing.len().saturating_sub(MAX_LISTED);
        if more > 0 {
            message.push_str(&format!(", and {more} more revisions fall short"));
        }
        RequirementVerdict { satisfied: false, message }
    }
}

fn user(a: &AttestationFact) -> String {
    if a.UserName.is_empty() { a.UserID.to_string() } else { a.UserName.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 10, 12, 0, 0).unwrap()
    }

    fn uid(n: u128) -> Uuid {
        Uuid::from_u128(0x1000 + n)
    }

    const ALICE: u128 = 1;
    const BOB: u128 = 2;
    const CAROL: u128 = 3;
    const DAVE: u128 = 4;

    fn name(n: u128) -> &'static str {
        ["?", "alice", "bob", "carol", "dave"][n as usize]
    }

    fn req(count: u32) -> Requirement {
        Requirement {
            name: "approved".into(),
            kind: "Approval".into(),
            count,
            from_user_ids: BTreeSet::new(),
            allow_authors: false,
            max_age: None,
            max_age_text: String::new(),
            ignore_fail: false,
        }
    }

    fn att(who: u128, result: AttestationResult) -> AttestationFact {
        AttestationFact {
            AttestationID: Uuid::from_u128(0x9000 + who),
            UserID: uid(who),
            UserName: name(who).into(),
            Type: "Approval".into(),
            Result: result,
            CreatedAt: now() - TimeDelta::hours(1),
            ExpiresAt: None,
            Revoked: false,
            AttesterCanApprove: true,
        }
    }

    fn pass(who: u128) -> AttestationFact {
        att(who, AttestationResult::Pass)
    }

    fn rev(unit: &str, num: i64, authors: &[u128], atts: Vec<AttestationFact>) -> RevisionFacts {
        RevisionFacts {
            UnitSlug: unit.into(),
            RevisionNum: num,
            Authors: authors.iter().map(|&a| uid(a)).collect(),
            Attestations: atts,
        }
    }

    fn holds(r: &Requirement, revs: &[RevisionFacts]) -> (bool, String) {
        let v = r.evaluate(revs, now());
        (v.satisfied, v.message)
    }

    #[test]
    fn two_approvals_by_non_authors_pass() {
        let (ok, msg) = holds(&req(2), &[rev("web", 3, &[ALICE], vec![pass(BOB), pass(CAROL)])]);
        assert!(ok, "{msg}");
        assert_eq!(msg, "web#3 has 2 of 2 approvals");
    }

    #[test]
    fn an_author_does_not_count_unless_allow_authors() {
        let revs = [rev("web", 3, &[ALICE], vec![pass(ALICE), pass(BOB)])];
        let (ok, msg) = holds(&req(2), &revs);
        assert!(!ok);
        assert_eq!(msg, "web#3 has 1 of 2 approvals (discarded: alice wrote the change)");
        let mut r = req(2);
        r.allow_authors = true;
        assert!(holds(&r, &revs).0);
        // The nil user (automated revisions) excludes nobody, even if listed as an author.
        let mut robot = pass(DAVE);
        robot.UserID = Uuid::nil();
        let revs = [RevisionFacts { Authors: [Uuid::nil()].into(), ..rev("web", 3, &[], vec![robot]) }];
        assert!(holds(&req(1), &revs).0);
    }

    #[test]
    fn too_old_expired_and_revoked_do_not_count() {
        let mut r = req(1);
        r.max_age = Some(TimeDelta::hours(72));
        r.max_age_text = "72h".into();
        let mut old = pass(BOB);
        old.CreatedAt = now() - TimeDelta::hours(73);
        let mut expired = pass(CAROL);
        expired.ExpiresAt = Some(now());
        let mut revoked = pass(DAVE);
        revoked.Revoked = true;
        let (ok, msg) = holds(&r, &[rev("web", 3, &[], vec![old.clone(), expired, revoked])]);
        assert!(!ok);
        assert!(msg.starts_with("web#3 has 0 of 1 approval (discarded: "), "{msg}");
        assert!(msg.contains("bob's approval is older than 72h"), "{msg}");
        assert!(msg.contains("carol's approval expired at 2025-03-10T12:00:00+00:00"), "{msg}");
        assert!(msg.contains("dave's approval was revoked"), "{msg}");
        // Exactly MaxAge old still counts; an expiry in the future does not discard.
        old.CreatedAt = now() - TimeDelta::hours(72);
        old.ExpiresAt = Some(now() + TimeDelta::seconds(1));
        assert!(holds(&r, &[rev("web", 3, &[], vec![old])]).0);
    }

    #[test]
    fn ineligible_users_do_not_count() {
        let mut no_approve = pass(BOB);
        no_approve.AttesterCanApprove = false;
        let (ok, msg) = holds(&req(1), &[rev("web", 3, &[], vec![no_approve.clone()])]);
        assert!(!ok);
        assert!(msg.contains("bob lacks the Approve permission on the Space"), "{msg}");
        // With FromUserIDs, the list decides, not the permission.
        let mut r = req(1);
        r.from_user_ids = [uid(BOB)].into();
        assert!(holds(&r, &[rev("web", 3, &[], vec![no_approve])]).0);
        let (ok, msg) = holds(&r, &[rev("web", 3, &[], vec![pass(CAROL)])]);
        assert!(!ok);
        assert!(msg.contains("carol is not one of the FromUserIDs"), "{msg}");
    }

    #[test]
    fn an_unrevoked_fail_blocks_unless_ignore_fail() {
        let revs = [rev("web", 3, &[], vec![pass(ALICE), pass(BOB), att(CAROL, AttestationResult::Fail)])];
        let (ok, msg) = holds(&req(2), &revs);
        assert!(!ok);
        assert_eq!(msg, "web#3 has 2 of 2 approvals and a Fail from carol (it blocks unless revoked)");
        let mut r = req(2);
        r.ignore_fail = true;
        assert!(holds(&r, &revs).0);
        // A revoked Fail, or a Fail from an ineligible user, does not block.
        let mut revoked = att(CAROL, AttestationResult::Fail);
        revoked.Revoked = true;
        let mut outsider = att(DAVE, AttestationResult::Fail);
        outsider.AttesterCanApprove = false;
        assert!(holds(&req(2), &[rev("web", 3, &[], vec![pass(ALICE), pass(BOB), revoked, outsider])]).0);
    }

    #[test]
    fn wrong_type_is_ignored_and_named_types_are_described() {
        let mut review = pass(BOB);
        review.Type = "SecurityReview".into();
        let (ok, msg) = holds(&req(1), &[rev("web", 3, &[], vec![review.clone()])]);
        assert!(!ok);
        assert_eq!(msg, "web#3 has 0 of 1 approval");
        let mut r = req(1);
        r.kind = "SecurityReview".into();
        assert_eq!(
            holds(&r, &[rev("web", 3, &[], vec![review, pass(CAROL)])]).1,
            "web#3 has 1 of 1 'SecurityReview' attestation"
        );
    }

    #[test]
    fn one_user_counts_once() {
        let mut again = pass(BOB);
        again.AttestationID = Uuid::from_u128(0xbeef);
        let j = req(2).judge(&rev("web", 3, &[], vec![pass(BOB), again]), now());
        assert!(!j.holds);
        assert_eq!(j.passes.len(), 1);
        assert_eq!(j.message, "web#3 has 1 of 2 approvals");
    }

    #[test]
    fn a_set_of_revisions_holds_only_if_each_holds() {
        let good = rev("web", 3, &[], vec![pass(BOB)]);
        let bad = rev("db", 7, &[ALICE], vec![pass(ALICE)]);
        let (ok, msg) = holds(&req(1), &[good.clone(), good.clone()]);
        assert!(ok);
        assert_eq!(msg, "each of 2 revisions has at least 1 approval");
        let (ok, msg) = holds(&req(1), &[good, bad]);
        assert!(!ok);
        assert_eq!(msg, "db#7 has 0 of 1 approval (discarded: alice wrote the change)");
        let (ok, msg) = holds(&req(1), &[]);
        assert!(!ok && msg.contains("nothing to attest"), "{msg}");
    }

    #[test]
    fn long_lists_of_failing_revisions_are_cut_short() {
        let revs: Vec<RevisionFacts> = (1..=8).map(|n| rev(&format!("u{n}"), n, &[], vec![])).collect();
        let (ok, msg) = holds(&req(1), &revs);
        assert!(!ok);
        assert!(msg.starts_with("u1#1 has 0 of 1 approval, u2#2 has"), "{msg}");
        assert!(msg.ends_with("u5#5 has 0 of 1 approval, and 3 more revisions fall short"), "{msg}");
    }
}
