//! Integration tests: one binary, real SQLite files and a real PostgreSQL.

mod api;
mod changeorders;
mod cli;
mod helpers;
mod releases;
mod store;
