//! Background work: the job queue, the workers that carry out promotion tasks wave by wave,
//! rate limits, the reconciler and the scheduler.
//!
//! The store is the system of record; the queue only says who works on what now. A job carries
//! a task ID (and its generation, in the key) and nothing else, so a job that runs twice or is
//! lost changes nothing the store cannot repair.

mod gates;
pub mod limits;
pub mod queue;
mod runtime;
pub mod schedule;

pub use runtime::{JobSettings, Jobs, backoff};
