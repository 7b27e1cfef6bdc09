//! The embedded adapter: one SQLite file in WAL mode.

use super::{Result, pool_options};
use sqlx::AnyPool;
use sqlx::Executor;

/// Opens (creating if needed) the SQLite file named by `sqlite://PATH`.
pub(super) async fn connect(url: &str) -> Result<AnyPool> {
    let mut url = url.to_string();
    if !url.contains("mode=") {
        url.push_str(if url.contains('?') { "&mode=rwc" } else { "?mode=rwc" });
    }
    let pool = pool_options()
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                // Durable enough for a laptop and never corrupting: WAL with NORMAL sync.
                conn.execute("PRAGMA journal_mode = WAL").await?;
                conn.execute("PRAGMA synchronous = NORMAL").await?;
                conn.execute("PRAGMA busy_timeout = 10000").await?;
                conn.execute("PRAGMA foreign_keys = ON").await?;
                // A 4 MiB page cache per connection and no memory map: the OS page cache serves
                // re-reads without counting a large store into the process's resident set.
                conn.execute("PRAGMA cache_size = -4096").await?;
                conn.execute("PRAGMA mmap_size = 0").await?;
                Ok(())
            })
        })
        .connect(&url)
        .await?;
    Ok(pool)
}
