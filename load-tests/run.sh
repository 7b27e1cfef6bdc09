#!/usr/bin/env bash
# Builds release binaries and runs the promotion load scenario on both set-ups:
# embedded (SQLite store + SQLite queue, in-process workers) and fleet (PostgreSQL + Redis,
# two `changeflow worker` processes). Extra arguments go to the scenario, e.g. --spaces 200.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin changeflow --example load
exec target/release/examples/load "$@"
