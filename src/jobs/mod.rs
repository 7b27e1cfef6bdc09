//! Background work: the job queue and, later, the workers, wave driver, reconciler and
//! scheduler that run promotions through it.
//!
//! The store is the system of record; the queue only says who works on what now. A job carries
//! a task ID and nothing else, so a job that runs twice or is lost changes nothing the store
//! cannot repair.

pub mod queue;
