//! Python's `str()` of a JSON value, which is the text Deckhand writes when a non-string value
//! is substituted into a pattern: `True`/`False`, `None`, floats in `repr` form (`1e+20`),
//! lists and mappings in Python `repr` (`{'a': [1, 'x']}`). Kept apart so the one place that
//! imitates Python is easy to find.

use serde_json::Value;

/// `str(value)` as Python prints it.
pub(crate) fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) if n.is_f64() => py_float(n.as_f64().unwrap_or_default()),
        Value::Number(n) => n.to_string(),
        Value::String(s) => py_quote(s),
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter().map(|(k, v)| format!("{}: {}", py_quote(k), py_repr(v))).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Python's float `repr`: the shortest digits that round-trip, positional when the exponent
/// is in [-4, 16), else `d.ddde+XX`.
fn py_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "nan".into()
        } else if f > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let sci = format!("{f:e}"); // shortest round-trip digits, e.g. "-1.25e-5"
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if mantissa.starts_with('-') { "-" } else { "" };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let body = if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        if point <= 0 {
            format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
        }
    } else {
        let m = if digits.len() > 1 { format!("{}.{}", &digits[..1], &digits[1..]) } else { digits };
        format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs())
    };
    format!("{sign}{body}")
}

/// Python's string `repr`: single quotes unless the text holds a single quote and no double one.
fn py_quote(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_print_the_python_way() {
        assert_eq!(py_str(&json!("None")), "None");
        assert_eq!(py_str(&json!(null)), "None");
        assert_eq!(py_str(&json!(false)), "False");
        assert_eq!(py_str(&json!(123)), "123");
        assert_eq!(py_str(&json!(3.2)), "3.2");
        assert_eq!(py_str(&json!(3.0)), "3.0");
        assert_eq!(py_str(&json!(1e20)), "1e+20");
        assert_eq!(py_str(&json!(1e-5)), "1e-05");
        assert_eq!(py_str(&json!(0.0001)), "0.0001");
        assert_eq!(py_str(&json!(-123.456)), "-123.456");
        assert_eq!(py_str(&json!(1e16)), "1e+16");
        assert_eq!(py_str(&json!(1234567890123456.0)), "1234567890123456.0");
    }

    #[test]
    fn containers_print_as_repr() {
        assert_eq!(py_str(&json!({"a": [1, "x", true, null]})), "{'a': [1, 'x', True, None]}");
        assert_eq!(py_str(&json!(["it's", "a\nb"])), "[\"it's\", 'a\\nb']");
    }
}
