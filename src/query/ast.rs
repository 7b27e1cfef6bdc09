//! Syntax tree of a where expression, its canonical text, and pattern compilation.

use std::fmt;

use regex::{Regex, RegexBuilder};

use super::path::AttrPath;

/// One `left OP right [IS [NOT] TRUE|FALSE]` clause.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Clause {
    pub lhs: Operand,
    pub pred: Predicate,
    pub truth: Option<TruthTest>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Operand {
    Attr(AttrPath),
    /// `LEN(attr)`: length of an array, map or string; missing counts as 0.
    Len(AttrPath),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Literal {
    Str(String),
    Int(i64),
    Bool(bool),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Rhs {
    Lit(Literal),
    Attr(AttrPath),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MatchKind {
    Like,
    ILike,
    Regex,
    RegexCi,
}

/// A compiled pattern; equality is on the source text.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    pub source: String,
    pub regex: Regex,
}

impl Pattern {
    /// Compiles a LIKE/ILIKE pattern or a regex; the error is a one-line description.
    pub(crate) fn compile(kind: MatchKind, source: &str) -> Result<Pattern, String> {
        let regex = match kind {
            MatchKind::Like => build_regex(&like_to_regex(source), false),
            MatchKind::ILike => build_regex(&like_to_regex(source), true),
            MatchKind::Regex => build_regex(source, false),
            MatchKind::RegexCi => build_regex(source, true),
        }?;
        Ok(Pattern { source: source.to_string(), regex })
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Predicate {
    Compare(CmpOp, Rhs),
    Match {
        kind: MatchKind,
        negated: bool,
        pattern: Pattern,
    },
    In {
        negated: bool,
        items: Vec<Literal>,
    },
    Contains(Literal),
    IsNull {
        negated: bool,
    },
    /// A Bool attribute used directly with a truth test (`Admin IS TRUE`).
    Bare,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TruthTest {
    /// `IS TRUE`
    True,
    /// `IS FALSE`
    False,
    /// `IS NOT TRUE`
    NotTrue,
    /// `IS NOT FALSE`
    NotFalse,
}

/// Translates a LIKE pattern (`%` any run, `_` one char, `\` escapes) to an anchored regex.
fn like_to_regex(pattern: &str) -> String {
    let mut re = String::from("^");
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => re.push_str(".*"),
            '_' => re.push('.'),
            '\\' => re.push_str(&regex::escape(&chars.next().unwrap_or('\\').to_string())),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push('$');
    re
}

fn build_regex(source: &str, case_insensitive: bool) -> Result<Regex, String> {
    RegexBuilder::new(source)
        .case_insensitive(case_insensitive)
        .dot_matches_new_line(true)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| {
            let text = e.to_string();
            let line =
                text.lines().find(|l| l.starts_with("error:")).unwrap_or(text.lines().next().unwrap_or(""));
            line.trim_start_matches("error:").trim().to_string()
        })
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Str(s) => f.write_str(&quote(s)),
            Literal::Int(i) => write!(f, "{i}"),
            Literal::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// Canonical text of a clause; parsing it gives back an equal clause.
impl fmt::Display for Clause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.lhs {
            Operand::Attr(p) => f.write_str(&p.text)?,
            Operand::Len(p) => write!(f, "LEN({})", p.text)?,
        }
        match &self.pred {
            Predicate::Compare(op, rhs) => {
                let op = ["=", "!=", "<", ">", "<=", ">="][*op as usize];
                match rhs {
                    Rhs::Lit(l) => write!(f, " {op} {l}")?,
                    Rhs::Attr(p) => write!(f, " {op} {}", p.text)?,
                }
            }
            Predicate::Match { kind, negated, pattern } => {
                let op = match (kind, negated) {
                    (MatchKind::Like, false) => "LIKE",
                    (MatchKind::Like, true) => "NOT LIKE",
                    (MatchKind::ILike, false) => "ILIKE",
                    (MatchKind::ILike, true) => "NOT ILIKE",
                    (MatchKind::Regex, false) => "~",
                    (MatchKind::Regex, true) => "!~",
                    (MatchKind::RegexCi, false) => "~*",
                    (MatchKind::RegexCi, true) => "!~*",
                };
                write!(f, " {op} {}", quote(&pattern.source))?;
            }
            Predicate::In { negated, items } => {
                let items: Vec<String> = items.iter().map(|l| l.to_string()).collect();
                let not = if *negated { "NOT " } else { "" };
                write!(f, " {not}IN ({})", items.join(", "))?;
            }
            Predicate::Contains(l) => write!(f, " ? {l}")?,
            Predicate::IsNull { negated: false } => f.write_str(" IS NULL")?,
            Predicate::IsNull { negated: true } => f.write_str(" IS NOT NULL")?,
            Predicate::Bare => {}
        }
        match self.truth {
            None => Ok(()),
            Some(TruthTest::True) => f.write_str(" IS TRUE"),
            Some(TruthTest::False) => f.write_str(" IS FALSE"),
            Some(TruthTest::NotTrue) => f.write_str(" IS NOT TRUE"),
            Some(TruthTest::NotFalse) => f.write_str(" IS NOT FALSE"),
        }
    }
}
