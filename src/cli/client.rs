//! The CLI's HTTP client: JSON in, JSON out, and the server's `{error, field, value}` turned
//! into one clear line on stderr.

use anyhow::{Context, Result, bail};
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// A client of one changeflow server.
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    /// With `-o json`/`-o yaml`: a refusal's JSON body (every failing gate included) is printed
    /// on stdout for scripts, besides the one-line error on stderr.
    print_errors: bool,
}

impl Client {
    pub fn new(base: &str, token: Option<String>) -> Client {
        Client {
            http: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(120))
                .build()
                .expect("HTTP client builds"),
            base: base.trim_end_matches('/').to_string(),
            token,
            print_errors: false,
        }
    }

    /// Prints refusals' JSON bodies on stdout (for `-o json`).
    pub fn print_errors(mut self, yes: bool) -> Client {
        self.print_errors = yes;
        self
    }

    async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Result<reqwest::Response> {
        let url = format!("{}{path}", self.base);
        let mut req = self.http.request(method, &url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.with_context(|| {
            format!("cannot reach the changeflow server at {} (start it with `changeflow serve`, or set --server / CHANGEFLOW_SERVER)", self.base)
        })?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if self.print_errors && v.is_object() {
            println!("{}", serde_json::to_string_pretty(&v).expect("JSON prints"));
        }
        let msg = v.get("error").and_then(Value::as_str).unwrap_or(&text);
        let mut line = format!("{msg} (HTTP {})", status.as_u16());
        if let Some(gates) = v.get("gates").and_then(Value::as_array) {
            let rows: Vec<Value> =
                gates.iter().filter(|g| g["Satisfied"] == Value::Bool(false)).cloned().collect();
            let table = super::output::table(
                &rows,
                &[("SPACE", "/SpaceSlug"), ("GATE", "/Prerequisite"), ("REASON", "/Message")],
            );
            line.push_str("\nfailing gates:\n");
            line.push_str(table.trim_end());
        }
        if status == StatusCode::UNAUTHORIZED {
            line.push_str(
                "; pass --token or set CHANGEFLOW_TOKEN (the admin token is in DATA_DIR/admin.token)",
            );
        }
        bail!(line)
    }

    /// Sends a request and parses the JSON answer (`null` for 204).
    pub async fn json(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value> {
        let resp = self.send(method, path, body).await?;
        if resp.status() == StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        resp.json().await.context("the server answered with something that is not JSON")
    }

    pub async fn get(&self, path: &str) -> Result<Value> {
        self.json(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<Value> {
        self.json(Method::POST, path, Some(body)).await
    }

    pub async fn patch(&self, path: &str, body: &Value) -> Result<Value> {
        self.json(Method::PATCH, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Result<Value> {
        self.json(Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> Result<Value> {
        self.json(Method::DELETE, path, None).await
    }

    /// GETs a text body (Unit data).
    pub async fn text(&self, path: &str) -> Result<String> {
        Ok(self.send(Method::GET, path, None).await?.text().await?)
    }
}

/// Percent-encodes a path segment or query value.
pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
