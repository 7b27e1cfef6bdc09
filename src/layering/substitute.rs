//! Substitution: copying a value from a concrete source document into a destination document.
//! `metadata.substitutions` is parsed once into typed entries (`src.schema/name/path`, optional
//! `src.pattern` + `match_group`; one or several `dest`s with optional `pattern` and
//! `recurse.depth`). At render time `source_value` reads the value (a non-mapping source
//! yields its whole data, as in Deckhand) and `write` puts it at each destination: plainly,
//! into every regex match of a destination string, or (with `recurse`) into every string below
//! the destination that contains the pattern text literally, down to `depth` container levels.
//! A pattern needs an existing destination (Deckhand silently creates `{}` there in recursive
//! mode; here it is an `UnknownSubstitutionError` either way).
//!
//! Values always copy (no sharing between source and destination, i.e. Deckhand's
//! `deepcopy: true`). Writing a non-string into a pattern uses Python's `str()` text
//! (`True`, `None`, `{'a': 1}`) as Deckhand does, but the text is inserted literally: backslash
//! sequences are not interpreted (a deliberate difference, research note bug 12.6).

use super::path::{self, Path};
use regex::{NoExpand, Regex};
use serde_json::Value;
use std::collections::HashMap;

/// One `dest` of a substitution.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dest<'a> {
    pub path: &'a str,
    pub pattern: Option<&'a str>,
    /// `recurse.depth`: -1 unlimited, 0 nothing, n container levels.
    pub recurse: Option<i64>,
}

/// One entry of `metadata.substitutions`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Substitution<'a> {
    pub src_schema: &'a str,
    pub src_name: &'a str,
    pub src_path: &'a str,
    pub src_pattern: Option<&'a str>,
    pub match_group: i64,
    pub dests: Vec<Dest<'a>>,
}

/// A malformed entry: (field path inside the document, reason).
pub(crate) type Malformed = (String, String);

fn field<'a>(m: &'a Value, key: &str, at: &str) -> Result<&'a str, Malformed> {
    m.get(key).and_then(Value::as_str).ok_or_else(|| (format!("{at}.{key}"), "must be a string".into()))
}

fn opt_str<'a>(m: &'a Value, key: &str, at: &str) -> Result<Option<&'a str>, Malformed> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err((format!("{at}.{key}"), "must be a string".into())),
    }
}

/// Parses `metadata.substitutions`.
pub(crate) fn parse(subs: &[Value]) -> Result<Vec<Substitution<'_>>, Malformed> {
    let mut out = Vec::with_capacity(subs.len());
    for (i, s) in subs.iter().enumerate() {
        let at = format!("metadata.substitutions[{i}]");
        let src =
            s.get("src").filter(|v| v.is_object()).ok_or_else(|| (format!("{at}.src"), "missing".into()))?;
        let src_at = format!("{at}.src");
        let match_group = match src.get("match_group") {
            None | Some(Value::Null) => 0,
            Some(v) => {
                v.as_i64().ok_or_else(|| (format!("{src_at}.match_group"), "must be an integer".into()))?
            }
        };
        let dests = match s.get("dest") {
            Some(d @ Value::Object(_)) => vec![parse_dest(d, format!("{at}.dest"))?],
            Some(Value::Array(ds)) if !ds.is_empty() => ds
                .iter()
                .enumerate()
                .map(|(j, d)| parse_dest(d, format!("{at}.dest[{j}]")))
                .collect::<Result<_, _>>()?,
            _ => return Err((format!("{at}.dest"), "missing (one mapping or a non-empty list)".into())),
        };
        out.push(Substitution {
            src_schema: field(src, "schema", &src_at)?,
            src_name: field(src, "name", &src_at)?,
            src_path: field(src, "path", &src_at)?,
            src_pattern: opt_str(src, "pattern", &src_at)?,
            match_group,
            dests,
        });
    }
    Ok(out)
}

fn parse_dest(d: &Value, at: String) -> Result<Dest<'_>, Malformed> {
    if !d.is_object() {
        return Err((at, "must be a mapping".into()));
    }
    let recurse = match d.get("recurse") {
        None | Some(Value::Null) => None,
        // Deckhand treats an empty `recurse` mapping as "no recursion".
        Some(Value::Object(m)) if m.is_empty() => None,
        Some(Value::Object(m)) => Some(
            m.get("depth")
                .map_or(Some(-1), Value::as_i64)
                .ok_or_else(|| (format!("{at}.recurse.depth"), "must be an integer".to_string()))?,
        ),
        Some(_) => return Err((format!("{at}.recurse"), "must be a mapping".into())),
    };
    Ok(Dest { path: field(d, "path", &at)?, pattern: opt_str(d, "pattern", &at)?, recurse })
}

/// Compiled regular expressions, by pattern text.
#[derive(Default)]
pub(crate) struct Patterns(HashMap<String, Result<Regex, String>>);

impl Patterns {
    fn get(&mut self, pattern: &str) -> Result<&Regex, String> {
        if !self.0.contains_key(pattern) {
            let compiled = Regex::new(pattern).map_err(|e| format!("invalid pattern '{pattern}': {e}"));
            self.0.insert(pattern.to_string(), compiled);
        }
        self.0[pattern].as_ref().map_err(Clone::clone)
    }
}

/// Reads the value `sub` takes from a source whose rendered data is `src_data`; `None` when
/// `src.path` is missing or null there. A non-mapping source yields its whole data.
pub(crate) fn source_value(sub: &Substitution<'_>, src_data: &Value) -> Option<Value> {
    let v = match src_data {
        Value::Object(_) => path::get(src_data, &Path::parse(sub.src_path).ok()?),
        other => Some(other),
    };
    v.filter(|v| !v.is_null()).cloned()
}

/// Applies `src.pattern` / `match_group` to the source value: the matched group, or the whole
/// value when the pattern does not match.
pub(crate) fn apply_src_pattern(
    sub: &Substitution<'_>,
    v: Value,
    patterns: &mut Patterns,
) -> Result<Value, String> {
    let Some(pattern) = sub.src_pattern else { return Ok(v) };
    let Value::String(s) = &v else { return Err(format!("src.pattern applies to strings, not {v}")) };
    let re = patterns.get(pattern)?;
    let Some(caps) = re.captures(s) else { return Ok(v) };
    let group = usize::try_from(sub.match_group)
        .ok()
        .filter(|g| *g < caps.len())
        .ok_or_else(|| format!("src.match_group {} is not a group of '{pattern}'", sub.match_group))?;
    Ok(caps.get(group).map_or(Value::Null, |m| Value::String(m.as_str().to_string())))
}

/// Python truthiness, used for a substitution into the whole data section.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

/// Writes `v` at one destination of `data`.
pub(crate) fn write(
    dest: &Dest<'_>,
    data: &mut Value,
    v: &Value,
    patterns: &mut Patterns,
) -> Result<(), String> {
    let p = Path::parse(dest.path)?;
    let Some(pattern) = dest.pattern else {
        if p.is_root() {
            return replace_root(data, v.clone());
        }
        return path::set(data, &p, v.clone());
    };
    let re = patterns.get(pattern)?.clone();
    let text = super::pytext::py_str(v);
    let target =
        path::get_mut(data, &p).ok_or_else(|| format!("nothing at {p} to apply pattern '{pattern}' to"))?;
    match (dest.recurse, &mut *target) {
        (Some(depth), Value::Object(_) | Value::Array(_)) => {
            recurse_replace(target, 0, depth, pattern, &re, &text);
            Ok(())
        }
        (_, Value::String(s)) => {
            let replaced = Value::String(re.replace_all(s, NoExpand(&text)).into_owned());
            if p.is_root() {
                replace_root(data, replaced)
            } else {
                *target = replaced;
                Ok(())
            }
        }
        (_, other) => Err(format!("pattern '{pattern}' needs a string at {p}, found {other}")),
    }
}

/// Deckhand's rule for `dest.path: .`: a mapping merges shallowly into mapping data, anything
/// else replaces the data unless it is empty, zero, false or null.
fn replace_root(data: &mut Value, v: Value) -> Result<(), String> {
    match (data, v) {
        (Value::Object(d), Value::Object(new)) => {
            for (k, val) in new {
                d.insert(k, val);
            }
            Ok(())
        }
        (_, v) if !truthy(&v) => Err(format!("refusing to replace the whole data section with {v}")),
        (d, v) => {
            *d = v;
            Ok(())
        }
    }
}

fn recurse_replace(v: &mut Value, depth: i64, max: i64, literal: &str, re: &Regex, text: &str) {
    if depth == max {
        return;
    }
    let children: Box<dyn Iterator<Item = &mut Value>> = match v {
        Value::Object(m) => Box::new(m.values_mut()),
        Value::Array(a) => Box::new(a.iter_mut()),
        _ => return,
    };
    for child in children {
        match child {
            Value::String(s) if s.contains(literal) => *s = re.replace_all(s, NoExpand(text)).into_owned(),
            other => recurse_replace(other, depth + 1, max, literal, re, text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dest(path: &str, pattern: Option<&'static str>, recurse: Option<i64>) -> Dest<'static> {
        Dest { path: Box::leak(path.to_string().into_boxed_str()), pattern, recurse }
    }

    #[test]
    fn parses_single_and_listed_dests() {
        let subs = json!([
            {"src": {"schema": "a/B/v1", "name": "n", "path": ".", "pattern": "x", "match_group": 1},
             "dest": {"path": ".a", "recurse": {"depth": 2}, "pattern": "P"}},
            {"src": {"schema": "a/B/v1", "name": "n", "path": ".k"}, "dest": [{"path": ".a"}, {"path": ".b"}]}
        ]);
        let parsed = parse(subs.as_array().unwrap()).unwrap();
        assert_eq!(parsed[0].match_group, 1);
        assert_eq!(parsed[0].dests[0].recurse, Some(2));
        assert_eq!(parsed[1].dests.len(), 2);
        let bad = json!([{"src": {"schema": "a/B/v1", "path": "."}, "dest": {"path": "."}}]);
        assert_eq!(parse(bad.as_array().unwrap()).unwrap_err().0, "metadata.substitutions[0].src.name");
        let no_dest = json!([{"src": {"schema": "a/B/v1", "name": "n", "path": "."}}]);
        assert_eq!(parse(no_dest.as_array().unwrap()).unwrap_err().0, "metadata.substitutions[0].dest");
    }

    #[test]
    fn plain_writes_create_paths_and_root_merges_shallowly() {
        let mut pats = Patterns::default();
        let mut d = json!({"keep": 1});
        write(&dest(".chart[1].tls", None, None), &mut d, &json!("c"), &mut pats).unwrap();
        assert_eq!(d, json!({"keep": 1, "chart": [{}, {"tls": "c"}]}));
        write(&dest(".", None, None), &mut d, &json!({"keep": 2}), &mut pats).unwrap();
        assert_eq!(d["keep"], 2);
        assert!(d.get("chart").is_some(), "root substitution of a mapping is a shallow update");
        assert!(write(&dest(".", None, None), &mut d, &json!(""), &mut pats).is_err());
        write(&dest(".", None, None), &mut d, &json!("whole"), &mut pats).unwrap();
        assert_eq!(d, json!("whole"));
    }

    #[test]
    fn patterns_replace_every_match_with_python_text() {
        let mut pats = Patterns::default();
        let mut d = json!({"url": "http://h:PORT/PORT"});
        write(&dest(".url", Some("PORT"), None), &mut d, &json!(80), &mut pats).unwrap();
        assert_eq!(d["url"], "http://h:80/80");
        let mut d = json!({"u": "x=FLAG"});
        write(&dest(".u", Some("FLAG"), None), &mut d, &json!(false), &mut pats).unwrap();
        assert_eq!(d["u"], "x=False");
        let mut d = json!({"u": "a"});
        write(&dest(".u", Some("a"), None), &mut d, &json!("\\1$0"), &mut pats).unwrap();
        assert_eq!(d["u"], "\\1$0", "the value is inserted literally");
        assert!(write(&dest(".missing", Some("x"), None), &mut d, &json!(1), &mut pats).is_err());
        assert!(write(&dest(".", Some("x"), None), &mut json!({"a": 1}), &json!(1), &mut pats).is_err());
    }

    #[test]
    fn recursion_honours_depth_and_the_literal_text() {
        let mut pats = Patterns::default();
        let base = json!({"v": {"a": "x PW", "n": {"b": "PW"}, "l": ["PW", {"c": "PW"}]}});
        let mut d1 = base.clone();
        write(&dest(".v", Some("PW"), Some(1)), &mut d1, &json!("s"), &mut pats).unwrap();
        assert_eq!(d1["v"], json!({"a": "x s", "n": {"b": "PW"}, "l": ["PW", {"c": "PW"}]}));
        let mut all = base.clone();
        write(&dest(".v", Some("PW"), Some(-1)), &mut all, &json!("s"), &mut pats).unwrap();
        assert_eq!(all["v"], json!({"a": "x s", "n": {"b": "s"}, "l": ["s", {"c": "s"}]}));
        let mut regex_only = base.clone();
        write(&dest(".v", Some("P[W]"), Some(-1)), &mut regex_only, &json!("s"), &mut pats).unwrap();
        assert_eq!(regex_only, base, "recursive mode needs the pattern text literally");
    }

    #[test]
    fn source_values_and_src_patterns() {
        let raw = json!([{"src": {"schema": "a/B/v1", "name": "n", "path": ".img", "pattern": "^(.*):(.*)",
            "match_group": 2}, "dest": {"path": ".tag"}}]);
        let parsed = parse(raw.as_array().unwrap()).unwrap();
        let sub = &parsed[0];
        let mut pats = Patterns::default();
        let v = source_value(sub, &json!({"img": "repo/app:1.2"})).unwrap();
        assert_eq!(apply_src_pattern(sub, v, &mut pats).unwrap(), json!("1.2"));
        assert_eq!(source_value(sub, &json!({"other": 1})), None);
        assert_eq!(source_value(sub, &json!(["a"])).unwrap(), json!(["a"]), "non-mapping source: whole data");
        assert!(apply_src_pattern(sub, json!(5), &mut pats).is_err());
        assert_eq!(apply_src_pattern(sub, json!("nomatch"), &mut pats).unwrap(), json!("nomatch"));
    }
}
