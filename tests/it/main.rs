//! Integration tests: one binary, real SQLite files and a real PostgreSQL.

mod api;
mod cli;
mod helpers;
mod store;
