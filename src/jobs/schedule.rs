//! Cron schedules, read in a time zone. Pure: which tick is due, and when the next one is.
//!
//! Expressions take five fields (`minute hour day-of-month month day-of-week`, as crontab) or
//! six with seconds first. Day and month names (`MON-THU`, `JAN`) are accepted.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use std::str::FromStr;

/// A parsed schedule.
#[derive(Debug, Clone)]
pub struct Cron {
    schedule: cron::Schedule,
    tz: Tz,
}

impl Cron {
    /// Parses `expr` in time zone `tz`; the error names what is wrong.
    pub fn parse(expr: &str, tz: &str) -> Result<Cron, (&'static str, String)> {
        let tz: Tz = tz.parse().map_err(|_| {
            ("TimeZone", format!("unknown time zone '{tz}': use an IANA name such as Europe/Berlin or UTC"))
        })?;
        let fields = expr.split_whitespace().count();
        let six = match fields {
            5 => format!("0 {expr}"),
            6 => expr.to_string(),
            n => {
                return Err((
                    "Cron",
                    format!(
                        "'{expr}' has {n} fields: write five (minute hour day-of-month month day-of-week) or six with seconds first"
                    ),
                ));
            }
        };
        let schedule = cron::Schedule::from_str(&six).map_err(|e| ("Cron", format!("'{expr}': {e}")))?;
        if schedule.upcoming(tz).next().is_none() {
            return Err(("Cron", format!("'{expr}' never fires")));
        }
        Ok(Cron { schedule, tz })
    }

    /// The latest tick in (`after`, `now`]: what is due now. Missed ticks before it are not
    /// replayed (a server down for a day fires once, not once per missed tick).
    pub fn due(&self, after: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let start = after.with_timezone(&self.tz);
        let mut last = None;
        for t in self.schedule.after(&start).take(100_000) {
            let t = t.with_timezone(&Utc);
            if t > now {
                break;
            }
            last = Some(t);
        }
        last
    }

    /// The first tick after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.schedule.after(&t.with_timezone(&self.tz)).next().map(|n| n.with_timezone(&Utc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    #[test]
    fn five_fields_in_a_time_zone() {
        let c = Cron::parse("0 9 * * MON-THU", "Europe/Berlin").unwrap();
        // Wednesday 2 December 2026, 09:00 in Berlin is 08:00 UTC (CET, +1).
        let next = c.next_after(utc(2026, 12, 2, 0, 0)).unwrap();
        assert_eq!(next, utc(2026, 12, 2, 8, 0));
        // Friday is skipped: after Thursday's tick comes Monday's.
        let after_thu = c.next_after(utc(2026, 12, 3, 8, 0)).unwrap();
        assert_eq!(after_thu, utc(2026, 12, 7, 8, 0));
    }

    #[test]
    fn due_gives_the_latest_tick_only() {
        let c = Cron::parse("*/15 * * * *", "UTC").unwrap();
        assert_eq!(c.due(utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 0, 14)), None);
        assert_eq!(c.due(utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 0, 15)), Some(utc(2026, 1, 1, 0, 15)));
        assert_eq!(c.due(utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 3, 7)), Some(utc(2026, 1, 1, 3, 0)));
        // A tick already fired is not due again.
        assert_eq!(c.due(utc(2026, 1, 1, 3, 0), utc(2026, 1, 1, 3, 7)), None);
    }

    #[test]
    fn malformed_schedules_name_the_field() {
        assert_eq!(Cron::parse("0 9 * *", "UTC").unwrap_err().0, "Cron");
        assert_eq!(Cron::parse("0 99 * * *", "UTC").unwrap_err().0, "Cron");
        assert_eq!(Cron::parse("0 9 * * FUNDAY", "UTC").unwrap_err().0, "Cron");
        let (field, msg) = Cron::parse("0 9 * * *", "Mars/Olympus").unwrap_err();
        assert_eq!(field, "TimeZone");
        assert!(msg.contains("Mars/Olympus"));
        assert!(Cron::parse("0 0 9 * * *", "UTC").is_ok(), "six fields, seconds first");
    }
}
