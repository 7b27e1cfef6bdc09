//! Integration tests: one binary, real SQLite files and a real PostgreSQL.

mod api;
mod attestations;
mod changeorders;
mod cli;
mod deckhand;
mod fleet;
mod helpers;
mod layering;
mod promotions;
mod queue;
mod releases;
mod store;
mod webhooks;
mod workflows;
