//! The fleet adapter: PostgreSQL, optionally inside a named schema (`?schema=NAME`), which is
//! how tests running in parallel keep apart and how one database can host several installs.

use super::{Result, StoreError, pool_options};
use sqlx::AnyPool;
use sqlx::Executor;

/// Splits `schema=NAME` off the URL's query string (sqlx does not know it).
fn split_schema(url: &str) -> Result<(String, Option<String>)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), None));
    };
    let mut schema = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.strip_prefix("schema=") {
            Some(s) => {
                schema = Some(s.to_string());
                false
            }
            None => true,
        })
        .collect();
    if let Some(s) = &schema {
        let valid = !s.is_empty()
            && s.len() <= 63
            && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(StoreError::BadUrl(format!(
                "{url} (schema '{s}' must be lower-case letters, digits and '_')"
            )));
        }
    }
    let base = if rest.is_empty() { base.to_string() } else { format!("{base}?{}", rest.join("&")) };
    Ok((base, schema))
}

pub(super) async fn connect(url: &str) -> Result<AnyPool> {
    let (url, schema) = split_schema(url)?;
    if let Some(schema) = &schema {
        // Create the schema once on a plain connection before the pool pins search_path to it.
        let setup = pool_options().max_connections(1).connect(&url).await?;
        let ddl = format!("CREATE SCHEMA IF NOT EXISTS {schema}");
        setup.execute(sqlx::AssertSqlSafe(ddl)).await?;
        setup.close().await;
    }
    let pool = pool_options()
        .after_connect(move |conn, _meta| {
            let schema = schema.clone();
            Box::pin(async move {
                if let Some(schema) = schema {
                    conn.execute(sqlx::AssertSqlSafe(format!("SET search_path TO {schema}"))).await?;
                }
                Ok(())
            })
        })
        .connect(&url)
        .await?;
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::split_schema;

    #[test]
    fn schema_param() {
        let (u, s) = split_schema("postgres://h/db?schema=t_1&sslmode=disable").unwrap();
        assert_eq!(u, "postgres://h/db?sslmode=disable");
        assert_eq!(s.as_deref(), Some("t_1"));
        assert!(split_schema("postgres://h/db?schema=Bad;drop").is_err());
        assert_eq!(split_schema("postgres://h/db").unwrap().1, None);
    }
}
