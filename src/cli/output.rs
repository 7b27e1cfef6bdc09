//! Printing results: a table for people, `-o json` / `-o yaml` for scripts.

use clap::ValueEnum;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    #[default]
    Table,
    Json,
    Yaml,
}

/// Columns of a table: header and a JSON pointer into each row.
pub type Columns = &'static [(&'static str, &'static str)];

pub const SPACE: Columns =
    &[("SLUG", "/Slug"), ("LABELS", "/Labels"), ("VERSION", "/Version"), ("ID", "/SpaceID")];
pub const UNIT: Columns = &[
    ("SLUG", "/Slug"),
    ("SPACE", "/SpaceID"),
    ("HEAD", "/HeadRevisionNum"),
    ("UPSTREAM", "/UpstreamRevisionNum"),
    ("CONFLICTS", "/Conflicts"),
    ("TOOLCHAIN", "/ToolchainType"),
];
pub const REVISION: Columns = &[
    ("NUM", "/RevisionNum"),
    ("SOURCE", "/Source"),
    ("UPSTREAM", "/UpstreamRevisionNum"),
    ("DESCRIPTION", "/Description"),
    ("CREATED", "/CreatedAt"),
];
pub const LINK: Columns = &[
    ("SLUG", "/Slug"),
    ("TYPE", "/UpdateType"),
    ("UPSTREAM-CURSOR", "/UpstreamLastMergedRevisionNum"),
    ("DOWNSTREAM-CURSOR", "/DownstreamLastMergedRevisionNum"),
    ("TO-SPACE", "/ToSpaceID"),
];
pub const CONFLICT: Columns = &[
    ("RESOURCE", "/Resource"),
    ("PATH", "/Path"),
    ("REASON", "/Reason"),
    ("UPSTREAM-REV", "/UpstreamRevisionNum"),
    ("WITHHELD", "/UpstreamValue"),
    ("KEPT", "/DownstreamValue"),
];
pub const SIMPLE: Columns = &[("SLUG", "/Slug"), ("DISPLAY-NAME", "/DisplayName"), ("VERSION", "/Version")];
pub const TARGET: Columns = &[("SLUG", "/Slug"), ("PROVIDER", "/ProviderType"), ("OPTIONS", "/Options")];
pub const FILTER: Columns = &[("SLUG", "/Slug"), ("FROM", "/From"), ("WHERE", "/Where")];
pub const INVOCATION: Columns = &[
    ("SLUG", "/Slug"),
    ("TOOLCHAIN", "/ToolchainType"),
    ("PARAMETERS", "/Parameters"),
    ("FUNCTIONS", "/FunctionInvocations"),
];
pub const USER: Columns = &[("SLUG", "/Slug"), ("ADMIN", "/Admin"), ("GRANTS", "/Grants"), ("ID", "/UserID")];
pub const FUNCTION: Columns = &[
    ("NAME", "/FunctionName"),
    ("MUTATING", "/Mutating"),
    ("VALIDATING", "/Validating"),
    ("DESCRIPTION", "/Description"),
];
pub const FUNCTION_RESULT: Columns = &[
    ("UNIT", "/UnitSlug"),
    ("CHANGED", "/Changed"),
    ("REVISION", "/RevisionNum"),
    ("PASSED", "/Validation/Passed"),
];
pub const UPGRADE: Columns = &[
    ("UNIT", "/Unit/Slug"),
    ("HEAD", "/Unit/HeadRevisionNum"),
    ("UPSTREAM", "/UpstreamLastMergedRevisionNum"),
    ("NEW-REVISIONS", "/Revisions"),
    ("CONFLICTS", "/Conflicts"),
];
pub const PROMOTED: Columns = &[
    ("UNIT", "/Slug"),
    ("OUTCOME", "/Outcome"),
    ("REVISIONS", "/RevisionsWritten"),
    ("CONFLICTS", "/Conflicts"),
    ("HEAD", "/HeadRevisionNum"),
];

/// One cell: scalars as text, arrays as their length, maps as `k=v,…`.
fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(|x| x.is_string()) && a.len() <= 3 => {
            a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(",")
        }
        Some(Value::Array(a)) => a.len().to_string(),
        Some(Value::Object(m)) => {
            let s = m.iter().map(|(k, v)| format!("{k}={}", cell(Some(v)))).collect::<Vec<_>>().join(",");
            if s.is_empty() { "-".into() } else { s }
        }
        Some(other) => other.to_string(),
    }
}

/// Renders rows as an aligned text table.
pub fn table(rows: &[Value], columns: Columns) -> String {
    let mut grid: Vec<Vec<String>> = vec![columns.iter().map(|(h, _)| h.to_string()).collect()];
    for r in rows {
        grid.push(columns.iter().map(|(_, p)| cell(r.pointer(p))).collect());
    }
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| grid.iter().map(|row| row[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in grid {
        let line: Vec<String> =
            row.iter().enumerate().map(|(i, c)| format!("{c:<w$}", w = widths[i])).collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Prints `v` (an object or an array of them) in `format`.
pub fn print(v: &Value, format: Format, columns: Columns) {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(v).expect("JSON prints")),
        Format::Yaml => print!("{}", serde_saphyr::to_string(v).unwrap_or_else(|_| v.to_string())),
        Format::Table => {
            let rows = match v {
                Value::Array(a) => a.clone(),
                Value::Null => vec![],
                other => vec![other.clone()],
            };
            print!("{}", table(&rows, columns));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_and_summarize() {
        let rows = vec![
            json!({"Slug": "web", "Labels": {"Stage": "prod"}, "Version": 3, "SpaceID": "x"}),
            json!({"Slug": "database", "Labels": {}, "Version": 1, "SpaceID": "y"}),
        ];
        let t = table(&rows, SPACE);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("SLUG      LABELS"));
        assert!(lines[1].contains("Stage=prod"));
        assert!(lines[2].contains("database  -"));
    }
}
