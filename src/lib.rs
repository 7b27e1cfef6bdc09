//! changeflow moves named configuration changes safely through a fleet of Spaces.
//!
//! # Layout
//!
//! - `model`: the domain types (Space, Unit, Revision, Tag, Link, …) with validating
//!   constructors; no I/O.
//! - `query`: where expressions: lexer, parser, evaluator over an entity's JSON; no I/O.
//! - `merge`: structural diff and patch of YAML document streams, protected paths, conflicts;
//!   no I/O.
//! - `layering`: Deckhand-compatible rendering of layered documents (LayeringPolicy, parent
//!   selection, merge/replace/delete actions, replacement, substitution); no I/O.
//! - `invoke`: the function registry and built-in functions over a Unit's documents; no I/O.
//! - `changeorder`: ChangeOrders, the pure part: coverage, hop-by-hop scope, the promotion
//!   planner and its digest, State reduction; no I/O.
//! - `gates`: ChangeWorkflows, the pure part: compiling a definition (selectors, CEL, names),
//!   attestation requirements, and evaluating entry, release and Final gates into verdicts.
//! - `release`: release bundles, `--revision` specs and digests (pure), and the Target
//!   providers that deliver a bundle (`Directory`, `Webhook`).
//! - `jobs`: background work: the queue port (`jobs::queue`, apalis on Redis or SQLite) that
//!   carries task IDs to workers.
//! - `store`: the system of record, one port with SQLite and PostgreSQL adapters.
//! - `ops`: the use cases: read from the store, call the pure core, write in one transaction,
//!   with permission checks. Every entry point (API, demo, later jobs) goes through here.
//! - `api`: the axum HTTP API: routes, bearer-token auth, error mapping.
//! - `cli`: the clap command line, an HTTP client of the API, with table/json/yaml output.
//! - `settings`: settings as layered documents (defaults in `config/`), rendered, then
//!   overridden by the environment and flags.
//! - `server`: starting and stopping the API process (`serve`, the demo, tests).

pub mod api;
pub mod changeorder;
pub mod cli;
pub mod gates;
pub mod invoke;
pub mod jobs;
pub mod layering;
pub mod merge;
pub mod model;
pub mod ops;
pub mod query;
pub mod release;
pub mod server;
pub mod settings;
pub mod store;
pub mod telemetry;
