//! Gate evaluations shared by the tasks of one Stage that ask at the same moment.
//!
//! A wave of N tasks would otherwise evaluate the same entry gates N times at once. Here an
//! attempt joins an evaluation only if that evaluation *started after the attempt did*, so every
//! verdict an attempt acts on was computed from state read after the attempt began: nothing is
//! cached, concurrent identical reads are merely done once.

use crate::gates::Verdict;
use crate::model::ChangeOrder;
use crate::ops::promotions as promo;
use crate::store::Store;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;
use uuid::Uuid;

type Evaluation = Shared<BoxFuture<'static, Result<Vec<Verdict>, String>>>;

#[derive(Default)]
pub struct GateFlights {
    flights: Mutex<HashMap<(Uuid, usize), (Instant, Evaluation)>>,
}

impl GateFlights {
    /// The failing entry gates of Stage `k` for `co`, from an evaluation that started no earlier
    /// than `asked`.
    pub async fn failing(
        &self,
        store: &Store,
        co: &ChangeOrder,
        k: usize,
        asked: Instant,
    ) -> Result<Vec<Verdict>, String> {
        let key = (co.ChangeOrderID, k);
        let eval = {
            let mut m = self.flights.lock().expect("gate flights");
            match m.get(&key) {
                Some((started, e)) if *started >= asked => e.clone(),
                _ => {
                    let (store, co) = (store.clone(), co.clone());
                    let e: Evaluation =
                        async move { promo::failing_gates(&store, &co, k).await.map_err(|e| e.to_string()) }
                            .boxed()
                            .shared();
                    m.retain(|_, (_, e)| e.peek().is_none());
                    m.insert(key, (Instant::now(), e.clone()));
                    e
                }
            }
        };
        eval.await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_attempt_never_joins_an_evaluation_that_started_before_it() {
        let flights = GateFlights::default();
        let key = (Uuid::new_v4(), 1);
        let old: Evaluation = async { Ok(vec![]) }.boxed().shared();
        let before = Instant::now();
        flights.flights.lock().unwrap().insert(key, (before, old));
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        let asked = Instant::now();
        let m = flights.flights.lock().unwrap();
        let (started, _) = m.get(&key).unwrap();
        assert!(*started < asked, "the earlier evaluation is not joined by a later attempt");
    }
}
