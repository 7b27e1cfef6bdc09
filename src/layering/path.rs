//! Deckhand JSONPaths over a document's `data`: `.` or `$` for the whole section, `.key`
//! segments, `[n]` list indices (several digits, nested), and quoted segments for keys with
//! special characters (`.conf.'filter:authtoken'.password`). Reading returns nothing for a
//! missing segment; writing creates what is missing the way Deckhand does (a mapping for a key,
//! a list padded with `{}` up to the index), and refuses to write through a scalar or null
//! without changing anything. Wildcards and filters are not supported.

use serde_json::{Map, Value};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// A parsed path; no segments means the whole `data` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Path(pub(crate) Vec<Seg>);

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str(".");
        }
        for s in &self.0 {
            match s {
                Seg::Key(k) if k.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-') => {
                    write!(f, ".{k}")?
                }
                Seg::Key(k) => write!(f, ".'{k}'")?,
                Seg::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

impl Path {
    /// Parses `.`, `$`, `.a.b`, `$.a[0].b`, `a.b` (a leading `.` is implied).
    pub(crate) fn parse(text: &str) -> Result<Path, String> {
        let t = text.trim();
        let rest = t.strip_prefix('$').unwrap_or(t);
        let mut chars = rest.chars().peekable();
        let mut segs = vec![];
        let mut first = true;
        while let Some(&c) = chars.peek() {
            match c {
                '[' => {
                    chars.next();
                    let digits: String = chars.by_ref().take_while(|c| *c != ']').collect();
                    let i = digits
                        .trim()
                        .parse::<usize>()
                        .map_err(|_| format!("bad index [{digits}] in '{text}'"))?;
                    segs.push(Seg::Index(i));
                }
                '.' => {
                    chars.next();
                    match chars.peek() {
                        None if segs.is_empty() => break, // "." alone
                        Some('[') => {}                   // ".[0]" is "[0]"
                        _ => segs.push(Seg::Key(key(&mut chars, text)?)),
                    }
                }
                _ if first => segs.push(Seg::Key(key(&mut chars, text)?)),
                _ => return Err(format!("unexpected '{c}' in path '{text}'")),
            }
            first = false;
        }
        Ok(Path(segs))
    }

    pub(crate) fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

fn key(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, text: &str) -> Result<String, String> {
    match chars.peek() {
        Some(&q) if q == '\'' || q == '"' => {
            chars.next();
            let k: String = chars.by_ref().take_while(|c| *c != q).collect();
            Ok(k)
        }
        _ => {
            let mut k = String::new();
            while let Some(&c) = chars.peek() {
                if c == '.' || c == '[' {
                    break;
                }
                k.push(c);
                chars.next();
            }
            if k.is_empty() || k.contains(['*', '?', '(', ')', ']']) {
                return Err(format!("unsupported or empty segment in path '{text}'"));
            }
            Ok(k)
        }
    }
}

/// The value at `path`, if every segment exists.
pub(crate) fn get<'v>(root: &'v Value, path: &Path) -> Option<&'v Value> {
    let mut cur = root;
    for s in &path.0 {
        cur = match (s, cur) {
            (Seg::Key(k), Value::Object(m)) => m.get(k)?,
            (Seg::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Mutable access to the value at `path`, if every segment exists.
pub(crate) fn get_mut<'v>(root: &'v mut Value, path: &Path) -> Option<&'v mut Value> {
    let mut cur = root;
    for s in &path.0 {
        cur = match (s, cur) {
            (Seg::Key(k), Value::Object(m)) => m.get_mut(k)?,
            (Seg::Index(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Checks that `set` can write at `path` without changing anything: every existing value on
/// the way must be a mapping (before a key) or a list (before an index).
fn check_writable(root: &Value, path: &Path) -> Result<(), String> {
    let mut cur = root;
    for (n, s) in path.0.iter().enumerate() {
        let next = match (s, cur) {
            (Seg::Key(k), Value::Object(m)) => m.get(k),
            (Seg::Index(i), Value::Array(a)) => a.get(*i),
            (Seg::Key(_), other) | (Seg::Index(_), other) => {
                let at = Path(path.0[..n].to_vec());
                let want = if matches!(s, Seg::Key(_)) { "a mapping" } else { "a list" };
                return Err(format!("{at} is {}, not {want}", kind(other)));
            }
        };
        match next {
            Some(v) => cur = v,
            None => return Ok(()),
        }
    }
    Ok(())
}

/// Sets the value at `path`, creating missing mappings and lists (padded with `{}`).
pub(crate) fn set(root: &mut Value, path: &Path, value: Value) -> Result<(), String> {
    check_writable(root, path)?;
    let mut cur = root;
    for (n, s) in path.0.iter().enumerate() {
        let fresh = || match path.0.get(n + 1) {
            Some(Seg::Index(_)) => Value::Array(vec![]),
            _ => Value::Object(Map::new()),
        };
        cur = match (s, cur) {
            (Seg::Key(k), Value::Object(m)) => m.entry(k.clone()).or_insert_with(fresh),
            (Seg::Index(i), Value::Array(a)) => {
                while a.len() <= *i {
                    a.push(Value::Object(Map::new()));
                }
                &mut a[*i]
            }
            _ => unreachable!("checked by check_writable"),
        };
    }
    *cur = value;
    Ok(())
}

/// Removes the value at `path` (a key, or a list element shifting later ones down); returns it.
pub(crate) fn remove(root: &mut Value, path: &Path) -> Option<Value> {
    let (last, parent) = path.0.split_last()?;
    match (last, get_mut(root, &Path(parent.to_vec()))?) {
        (Seg::Key(k), Value::Object(m)) => m.shift_remove(k),
        (Seg::Index(i), Value::Array(a)) if *i < a.len() => Some(a.remove(*i)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &str) -> Path {
        Path::parse(s).unwrap()
    }

    #[test]
    fn parses_deckhand_forms() {
        assert!(p(".").is_root());
        assert!(p("$").is_root());
        assert_eq!(p(".a.b"), p("$.a.b"));
        assert_eq!(p("a.b"), p(".a.b"));
        assert_eq!(
            p(".a[10].b[0][2]").0,
            vec![Seg::Key("a".into()), Seg::Index(10), Seg::Key("b".into()), Seg::Index(0), Seg::Index(2)]
        );
        assert_eq!(p(".conf.'filter:authtoken'.password").0[1], Seg::Key("filter:authtoken".into()));
        assert_eq!(p(".x.\"a.b\"").0[1], Seg::Key("a.b".into()));
        assert!(Path::parse(".a[x]").is_err());
        assert!(Path::parse(".a..b").is_err());
        assert!(Path::parse(".a[*]").is_err());
        assert_eq!(p(".a[3].'b c'").to_string(), ".a[3].'b c'");
    }

    #[test]
    fn reads_first_match_or_nothing() {
        let d = json!({"a": [{"x": 1}, {"y": null}], "s": "str"});
        assert_eq!(get(&d, &p(".a[0].x")), Some(&json!(1)));
        assert_eq!(get(&d, &p(".a[1].y")), Some(&Value::Null));
        assert_eq!(get(&d, &p(".a[2]")), None);
        assert_eq!(get(&d, &p(".s.x")), None);
        assert_eq!(get(&d, &p(".")), Some(&d));
    }

    #[test]
    fn writes_create_mappings_and_padded_lists() {
        let mut d = json!({});
        set(&mut d, &p(".chart[2].values.tls"), json!("c")).unwrap();
        assert_eq!(d, json!({"chart": [{}, {}, {"values": {"tls": "c"}}]}));
        set(&mut d, &p(".chart[0]"), json!(5)).unwrap();
        assert_eq!(d["chart"][0], json!(5));
        set(&mut d, &p("."), json!("all")).unwrap();
        assert_eq!(d, json!("all"));
    }

    #[test]
    fn writes_through_scalars_fail_without_change() {
        let mut d = json!({"a": {"b": "text"}, "n": null});
        let before = d.clone();
        assert!(set(&mut d, &p(".a.b.c.d"), json!(1)).unwrap_err().contains(".a.b is a string"));
        assert!(set(&mut d, &p(".n.x"), json!(1)).is_err());
        assert!(set(&mut d, &p(".a[0]"), json!(1)).is_err());
        assert_eq!(d, before);
    }

    #[test]
    fn removes_keys_and_list_elements() {
        let mut d = json!({"a": [{"x": 1}, {"y": 2}], "b": 5, "c": 5});
        assert_eq!(remove(&mut d, &p(".a[0]")), Some(json!({"x": 1})));
        assert_eq!(remove(&mut d, &p(".c")), Some(json!(5)));
        assert_eq!(d, json!({"a": [{"y": 2}], "b": 5}));
        assert_eq!(remove(&mut d, &p(".zz")), None);
    }
}
