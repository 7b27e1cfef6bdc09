//! Integration tests: one binary, real SQLite files and a real PostgreSQL.

mod api;
mod changeorders;
mod cli;
mod fleet;
mod helpers;
mod releases;
mod store;
