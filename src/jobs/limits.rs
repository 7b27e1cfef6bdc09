//! Rate limits (governor, GCRA): a global rate of Spaces started per second, one per release
//! Target, and one per Promotion. Each is per worker process; a fleet's rate is the sum. The
//! fleet-wide cap is a Promotion's MaxInFlight, which the wave driver enforces in the store.

use governor::clock::DefaultClock;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

type Direct = RateLimiter<NotKeyed, InMemoryState, DefaultClock>;

/// A quota for `rate` per second, with a burst of about a hundredth of a second's worth (a
/// burst of 1 under-delivers at high rates; see research/deps.md). `None` for no limit.
fn quota(rate: f64) -> Option<Quota> {
    if !(rate.is_finite() && rate > 0.0) {
        return None;
    }
    let period = Duration::from_secs_f64(1.0 / rate);
    let burst = NonZeroU32::new(((rate / 100.0).ceil() as u32).max(1)).expect("at least 1");
    Quota::with_period(period).map(|q| q.allow_burst(burst))
}

/// The limiters one worker process shares across its handlers.
pub struct Limits {
    global: Option<Direct>,
    per_target_rate: f64,
    targets: Mutex<HashMap<Uuid, Arc<Direct>>>,
    promotions: Mutex<HashMap<Uuid, (f64, Arc<Direct>)>>,
}

impl Limits {
    pub fn new(global_rate: f64, per_target_rate: f64) -> Limits {
        Limits {
            global: quota(global_rate).map(RateLimiter::direct),
            per_target_rate,
            targets: Mutex::new(HashMap::new()),
            promotions: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for a permit from every limiter that applies; returns how long it waited.
    pub async fn acquire(&self, target: Option<Uuid>, promotion: Uuid, promotion_rate: f64) -> Duration {
        let start = Instant::now();
        if let Some(g) = &self.global {
            g.until_ready().await;
        }
        if let Some(t) = target {
            let lim = {
                let mut m = self.targets.lock().expect("limits lock");
                match m.get(&t) {
                    Some(l) => Some(l.clone()),
                    None => quota(self.per_target_rate).map(|q| {
                        let l = Arc::new(RateLimiter::direct(q));
                        m.insert(t, l.clone());
                        l
                    }),
                }
            };
            if let Some(l) = lim {
                l.until_ready().await;
            }
        }
        let lim = {
            let mut m = self.promotions.lock().expect("limits lock");
            match m.get(&promotion) {
                Some((r, l)) if *r == promotion_rate => Some(l.clone()),
                _ => quota(promotion_rate).map(|q| {
                    let l = Arc::new(RateLimiter::direct(q));
                    m.insert(promotion, (promotion_rate, l.clone()));
                    l
                }),
            }
        };
        if let Some(l) = lim {
            l.until_ready().await;
        }
        start.elapsed()
    }

    /// Forgets a Promotion's limiter once it ended.
    pub fn forget(&self, promotion: Uuid) {
        self.promotions.lock().expect("limits lock").remove(&promotion);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rate_means_no_limiter() {
        assert!(quota(0.0).is_none());
        assert!(quota(f64::NAN).is_none());
        assert!(quota(-3.0).is_none());
        assert!(quota(5.0).is_some());
    }

    #[tokio::test]
    async fn a_promotion_rate_spaces_out_permits() {
        let limits = Limits::new(0.0, 0.0);
        let p = Uuid::new_v4();
        let start = Instant::now();
        for _ in 0..4 {
            limits.acquire(None, p, 20.0).await;
        }
        // 4 permits at 20/s with a burst of 1: at least 3 periods of 50 ms.
        assert!(start.elapsed() >= Duration::from_millis(140), "{:?}", start.elapsed());
        let other = Uuid::new_v4();
        let quick = Instant::now();
        limits.acquire(None, other, 0.0).await;
        assert!(quick.elapsed() < Duration::from_millis(50), "an unlimited promotion does not wait");
    }
}
