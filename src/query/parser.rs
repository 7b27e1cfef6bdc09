//! Parser and type checker: turns a token stream into a list of [`Clause`]s, checking every
//! attribute against the entity's allow-list and every operator against the operand types.

use super::ast::{Clause, CmpOp, Literal, MatchKind, Operand, Pattern, Predicate, Rhs, TruthTest};
use super::attrs::{AttrType, Class, Entity};
use super::lexer::{Lexer, Sym, TokKind, Token};
use super::path::{self, AttrPath};
use super::{MAX_EXPR_CHARS, QueryError};

/// Parses and type-checks `src`; an empty or blank expression gives no clauses.
pub(crate) fn parse(src: &str, entity: &'static Entity) -> Result<Vec<Clause>, QueryError> {
    let n = src.chars().count();
    if n > MAX_EXPR_CHARS {
        let rest: String = src.chars().skip(MAX_EXPR_CHARS).collect();
        let msg = format!("expression is too long ({n} characters; at most {MAX_EXPR_CHARS})");
        return Err(QueryError::new(MAX_EXPR_CHARS + 1, &rest, msg));
    }
    let mut p = Parser { lx: Lexer::new(src), peeked: None, entity };
    let mut clauses = Vec::new();
    if p.peek()?.kind == TokKind::Eof {
        return Ok(clauses);
    }
    loop {
        clauses.push(p.clause()?);
        let t = p.next()?;
        match t.kind {
            TokKind::Eof => return Ok(clauses),
            _ if t.is_kw("AND") => {}
            _ if t.is_kw("OR") => return Err(t.error("OR is not supported; use IN (...)")),
            _ => {
                return Err(t.error(format!("expected AND or end of expression, found '{}'", t.text)));
            }
        }
    }
}

struct Parser {
    lx: Lexer,
    peeked: Option<Token>,
    entity: &'static Entity,
}

fn end_error(t: &Token, expected: &str) -> QueryError {
    t.error(format!("unexpected end of expression; expected {expected}"))
}

/// `t` is not what was expected: an end-of-input or a "found" error.
fn unexpected(t: &Token, expected: &str) -> QueryError {
    if t.kind == TokKind::Eof {
        end_error(t, expected)
    } else {
        t.error(format!("expected {expected}, found '{}'", t.text))
    }
}

impl Parser {
    fn next(&mut self) -> Result<Token, QueryError> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lx.next_token(),
        }
    }

    fn peek(&mut self) -> Result<&Token, QueryError> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lx.next_token()?);
        }
        Ok(self.peeked.as_ref().expect("just filled"))
    }

    fn expect(&mut self, kind: TokKind, what: &str) -> Result<Token, QueryError> {
        let t = self.next()?;
        if t.kind == kind { Ok(t) } else { Err(unexpected(&t, what)) }
    }

    fn path(&self, t: &Token) -> Result<AttrPath, QueryError> {
        path::resolve(&t.text, t.col, self.entity)
    }

    fn clause(&mut self) -> Result<Clause, QueryError> {
        let t = self.next()?;
        let lhs = match t.kind {
            TokKind::LParen => {
                return Err(t.error("parentheses are not supported; join clauses with AND only"));
            }
            TokKind::Ident if t.is_kw("NOT") => {
                return Err(
                    t.error("NOT of a clause is not supported; use !=, NOT LIKE, NOT IN or IS NOT NULL")
                );
            }
            TokKind::Ident if t.is_kw("OR") => {
                return Err(t.error("OR is not supported; use IN (...)"));
            }
            TokKind::Ident if t.is_kw("AND") => return Err(unexpected(&t, "an attribute")),
            TokKind::Ident if t.is_kw("LEN") && self.peek()?.kind == TokKind::LParen => self.len_operand()?,
            TokKind::Ident => Operand::Attr(self.path(&t)?),
            _ => return Err(unexpected(&t, "an attribute")),
        };
        let (pred, mut truth) = self.predicate(&lhs)?;
        if truth.is_none() && self.peek()?.is_kw("IS") {
            let is = self.next()?;
            truth = Some(self.truth_test(&is)?);
        }
        Ok(Clause { lhs, pred, truth })
    }

    /// After `IS`: `[NOT] TRUE|FALSE`.
    fn truth_test(&mut self, is: &Token) -> Result<TruthTest, QueryError> {
        let mut t = self.next()?;
        let negated = t.is_kw("NOT");
        if negated {
            t = self.next()?;
        }
        match truth_word(negated, &t) {
            Some(truth) => Ok(truth),
            None if t.kind == TokKind::Eof => Err(end_error(&t, "TRUE or FALSE after IS")),
            None => Err(is.error(format!("expected IS [NOT] TRUE or FALSE, found '{}'", t.text))),
        }
    }

    /// `LEN(attr)` after the `LEN` keyword.
    fn len_operand(&mut self) -> Result<Operand, QueryError> {
        self.next()?;
        let a = self.expect(TokKind::Ident, "an attribute inside LEN(...)")?;
        let path = self.path(&a)?;
        let sized = matches!(
            path.ty,
            AttrType::String | AttrType::Map | AttrType::Array(_) | AttrType::ObjectArray(_)
        );
        if !sized || path.any {
            let what = if path.any { "a '*' path".to_string() } else { path.ty.describe() };
            let msg = format!("LEN needs an array, map or string attribute, but '{}' is {what}", a.text);
            return Err(a.error(msg));
        }
        self.expect(TokKind::RParen, "')' after LEN(attribute")?;
        Ok(Operand::Len(path))
    }

    fn predicate(&mut self, lhs: &Operand) -> Result<(Predicate, Option<TruthTest>), QueryError> {
        let (name, ty, nullable) = match lhs {
            Operand::Attr(p) => (p.text.clone(), p.ty, p.nullable),
            Operand::Len(p) => (format!("LEN({})", p.text), AttrType::Int, false),
        };
        let op = self.next()?;
        let cmp = |s: Sym| match s {
            Sym::Eq => Some(CmpOp::Eq),
            Sym::Ne => Some(CmpOp::Ne),
            Sym::Lt => Some(CmpOp::Lt),
            Sym::Gt => Some(CmpOp::Gt),
            Sym::Le => Some(CmpOp::Le),
            Sym::Ge => Some(CmpOp::Ge),
            _ => None,
        };
        let pred = match op.kind {
            TokKind::Sym(s) if cmp(s).is_some() => {
                let c = cmp(s).expect("checked");
                check_compare(&op, c, &name, ty)?;
                Predicate::Compare(c, self.value(&name, ty)?)
            }
            TokKind::Sym(Sym::Contains) => {
                let AttrType::Array(elem) = ty else {
                    return Err(
                        op.error(format!("'?' needs an array attribute, but '{name}' is {}", ty.describe()))
                    );
                };
                let t = self.next()?;
                Predicate::Contains(literal_for(&t, &format!("each element of '{name}'"), *elem)?)
            }
            TokKind::Sym(s) => {
                let (kind, negated) = match s {
                    Sym::Like => (MatchKind::Like, false),
                    Sym::NotLike => (MatchKind::Like, true),
                    Sym::Re => (MatchKind::Regex, false),
                    Sym::ReCi => (MatchKind::RegexCi, false),
                    Sym::NotRe => (MatchKind::Regex, true),
                    _ => (MatchKind::RegexCi, true),
                };
                self.matcher(&op, kind, negated, &name, ty)?
            }
            TokKind::Ident if op.is_kw("LIKE") => self.matcher(&op, MatchKind::Like, false, &name, ty)?,
            TokKind::Ident if op.is_kw("ILIKE") => self.matcher(&op, MatchKind::ILike, false, &name, ty)?,
            TokKind::Ident if op.is_kw("IN") => self.in_list(&op, false, &name, ty)?,
            TokKind::Ident if op.is_kw("NOT") => {
                let t = self.next()?;
                if t.is_kw("LIKE") {
                    self.matcher(&op, MatchKind::Like, true, &name, ty)?
                } else if t.is_kw("ILIKE") {
                    self.matcher(&op, MatchKind::ILike, true, &name, ty)?
                } else if t.is_kw("IN") {
                    self.in_list(&op, true, &name, ty)?
                } else {
                    return Err(unexpected(&t, "LIKE, ILIKE or IN after NOT"));
                }
            }
            TokKind::Ident if op.is_kw("IS") => {
                let negated = self.peek()?.is_kw("NOT");
                if negated {
                    self.next()?;
                }
                let t = self.peek()?;
                if t.is_kw("TRUE") || t.is_kw("FALSE") {
                    if ty.class() != Class::Bool {
                        return Err(op.error(format!(
                            "IS TRUE/IS FALSE needs a comparison before it (e.g. {name} = 'x' IS TRUE) or a Bool attribute, but '{name}' is {}",
                            ty.describe()
                        )));
                    }
                    let truth = truth_word(negated, &self.next()?);
                    return Ok((Predicate::Bare, truth));
                }
                let t = self.next()?;
                if !t.is_kw("NULL") {
                    return Err(unexpected(&t, "NULL, NOT NULL, TRUE or FALSE after IS"));
                }
                if !nullable {
                    return Err(op.error(format!(
                        "'{name}' is {} that is never null; IS NULL applies to nullable attributes, map keys (Labels.key) and relation attributes",
                        ty.describe()
                    )));
                }
                Predicate::IsNull { negated }
            }
            TokKind::Eof => return Err(end_error(&op, &format!("an operator after '{name}'"))),
            TokKind::Ident => return Err(op.error(format!("unknown operator '{}'", op.text))),
            _ => {
                return Err(op.error(format!("expected an operator after '{name}', found '{}'", op.text)));
            }
        };
        Ok((pred, None))
    }

    /// Right-hand side of a comparison: literal or attribute path of a compatible type.
    fn value(&mut self, name: &str, ty: AttrType) -> Result<Rhs, QueryError> {
        let t = self.next()?;
        if t.kind == TokKind::Ident && !t.is_kw("TRUE") && !t.is_kw("FALSE") && !t.is_kw("NULL") {
            let p = self.path(&t)?;
            if p.ty.class() != ty.class() {
                return Err(t.error(format!(
                    "type mismatch: '{name}' is {} but '{}' is {}",
                    ty.describe(),
                    p.text,
                    p.ty.describe()
                )));
            }
            return Ok(Rhs::Attr(p));
        }
        Ok(Rhs::Lit(literal_for(&t, &format!("'{name}'"), ty)?))
    }

    fn matcher(
        &mut self,
        op: &Token,
        kind: MatchKind,
        negated: bool,
        name: &str,
        ty: AttrType,
    ) -> Result<Predicate, QueryError> {
        if ty.class() != Class::Str {
            return Err(op.error(format!(
                "pattern operators need a string attribute, but '{name}' is {}",
                ty.describe()
            )));
        }
        let t = self.next()?;
        let TokKind::Str(source) = &t.kind else {
            return Err(unexpected(&t, "a quoted pattern"));
        };
        let pattern = Pattern::compile(kind, source)
            .map_err(|e| t.error(format!("invalid regular expression: {e}")))?;
        Ok(Predicate::Match { kind, negated, pattern })
    }

    fn in_list(
        &mut self,
        op: &Token,
        negated: bool,
        name: &str,
        ty: AttrType,
    ) -> Result<Predicate, QueryError> {
        if !matches!(ty.class(), Class::Str | Class::Int | Class::Uuid) {
            return Err(op.error(format!(
                "IN needs a string, Int or Uuid attribute, but '{name}' is {}",
                ty.describe()
            )));
        }
        self.expect(TokKind::LParen, "'(' after IN")?;
        let mut items = Vec::new();
        loop {
            let t = self.next()?;
            if t.kind == TokKind::RParen && items.is_empty() {
                return Err(t.error("IN list is empty"));
            }
            items.push(literal_for(&t, &format!("'{name}'"), ty)?);
            let t = self.next()?;
            match t.kind {
                TokKind::Comma => {}
                TokKind::RParen => return Ok(Predicate::In { negated, items }),
                _ => return Err(unexpected(&t, "',' or ')' in IN list")),
            }
        }
    }
}

fn check_compare(op: &Token, c: CmpOp, name: &str, ty: AttrType) -> Result<(), QueryError> {
    let class = ty.class();
    if class == Class::Other {
        let hint = match ty {
            AttrType::Map => format!("; compare one key, e.g. {name}.key = 'value'"),
            AttrType::Array(_) => format!("; use {name} ? 'value' or LEN({name})"),
            AttrType::ObjectArray(_) => format!("; use {name}.*.Field or LEN({name})"),
            _ => String::new(),
        };
        return Err(op.error(format!("'{name}' is {} and cannot be compared{hint}", ty.describe())));
    }
    let ordering = !matches!(c, CmpOp::Eq | CmpOp::Ne);
    if ordering && matches!(class, Class::Bool | Class::Uuid) {
        return Err(op.error(format!(
            "'{}' cannot be used on '{name}', which is {} (only = and != are allowed)",
            op.text,
            ty.describe()
        )));
    }
    Ok(())
}

/// The truth test `IS [NOT] <t>` when `t` is TRUE or FALSE.
fn truth_word(negated: bool, t: &Token) -> Option<TruthTest> {
    match (negated, t.is_kw("TRUE"), t.is_kw("FALSE")) {
        (false, true, _) => Some(TruthTest::True),
        (false, _, true) => Some(TruthTest::False),
        (true, true, _) => Some(TruthTest::NotTrue),
        (true, _, true) => Some(TruthTest::NotFalse),
        _ => None,
    }
}

/// A literal token of the type `ty` requires; `target` names what the literal is compared with, e.g. `'Slug'`.
fn literal_for(t: &Token, target: &str, ty: AttrType) -> Result<Literal, QueryError> {
    let (lit, what) = match &t.kind {
        TokKind::Str(s) => (Literal::Str(s.clone()), "a string"),
        TokKind::Int(i) => (Literal::Int(*i), "an integer"),
        TokKind::Ident if t.is_kw("TRUE") => (Literal::Bool(true), "a boolean"),
        TokKind::Ident if t.is_kw("FALSE") => (Literal::Bool(false), "a boolean"),
        TokKind::Ident if t.is_kw("NULL") => {
            return Err(t.error("NULL is not a value; use IS NULL or IS NOT NULL"));
        }
        _ => return Err(unexpected(t, "a literal value")),
    };
    let ok = matches!(
        (ty.class(), &lit),
        (Class::Str | Class::Uuid, Literal::Str(_))
            | (Class::Int, Literal::Int(_))
            | (Class::Bool, Literal::Bool(_))
    );
    if !ok {
        return Err(t.error(format!("type mismatch: {target} is {} but the value is {what}", ty.describe())));
    }
    Ok(lit)
}

#[cfg(test)]
mod tests {
    //! Error-position tests, canonical round trips, and property tests.
    use super::*;
    use crate::query::attrs::{ENTITIES, REVISION, SPACE, UNIT, USER};
    use crate::query::testgen::{Picks, gen_expr};
    use proptest::prelude::*;

    fn err(src: &str, e: &'static Entity) -> QueryError {
        match parse(src, e) {
            Ok(c) => panic!("{src:?} parsed: {c:?}"),
            Err(e) => e,
        }
    }

    /// Asserts the error column, token and that the message contains every word in `words`.
    fn check(src: &str, e: &'static Entity, column: usize, token: &str, words: &[&str]) {
        let got = err(src, e);
        assert_eq!((got.column, got.token.as_str()), (column, token), "{src:?}: {got}");
        for w in words {
            assert!(got.message.contains(w), "{src:?}: {got} lacks {w:?}");
        }
    }

    #[test]
    fn unknown_attribute() {
        check(
            "Slug = 'a' AND FOO = 1",
            &UNIT,
            16,
            "FOO",
            &["unknown attribute 'FOO'", "allowed: UnitID, SpaceID, Slug"],
        );
        let e = err("Slug = 'a' AND FOO = 1", &UNIT);
        assert!(
            e.to_string().starts_with(
                "invalid where expression at column 16 near 'FOO': unknown attribute 'FOO' (allowed: "
            ),
            "{e}"
        );
        check("Space.Foo = 'a'", &UNIT, 7, "Foo", &["unknown attribute 'Foo' of Space", "ReleaseTargetID"]);
        check("Conflicts.*.Nope = 'a'", &UNIT, 13, "Nope", &["of Conflicts", "Reason"]);
        check("ApprovedBy ? 'x'", &UNIT, 1, "ApprovedBy", &["unknown attribute"]);
        check("slug = 'a'", &UNIT, 1, "slug", &["unknown attribute 'slug'"]);
        // `Unit.` qualifies only the Unit entity's own attributes.
        check("Unit.Slug = 'a'", &REVISION, 1, "Unit", &["unknown attribute 'Unit'"]);
        check("Space.Slug = 'a'", &SPACE, 1, "Space", &["unknown attribute 'Space'"]);
        check("UpstreamUnit.Unit.Slug = 'a'", &UNIT, 14, "Unit", &["unknown attribute 'Unit' of Unit"]);
        // Keywords in value position that are not values.
        check("Slug = AND", &UNIT, 8, "AND", &["unknown attribute 'AND'"]);
    }

    #[test]
    fn unterminated_string_and_bad_literals() {
        check("Slug = 'abc", &UNIT, 8, "'abc", &["unterminated string"]);
        check("Slug IN ('a', 'b)", &UNIT, 15, "'b)", &["unterminated"]);
        check("TargetID = NULL", &UNIT, 12, "NULL", &["IS NULL"]);
        check("HeadRevisionNum = 12345678901234567890", &UNIT, 19, "12345678901234567890", &["18 digits"]);
        let long = format!("Slug = '{}'", "x".repeat(256));
        check(&long, &UNIT, 8, &format!("'{}...", "x".repeat(39)), &["too long", "255"]);
    }

    #[test]
    fn unexpected_end() {
        check("Slug =", &UNIT, 7, "", &["unexpected end", "value"]);
        check("Slug", &UNIT, 5, "", &["unexpected end", "operator"]);
        check("Slug = 'a' AND", &UNIT, 15, "", &["unexpected end", "attribute"]);
        check("Slug = 'a' and  ", &UNIT, 17, "", &["unexpected end"]);
        check("Slug IN ('a'", &UNIT, 13, "", &["unexpected end", "')'"]);
        check("LEN(Slug", &UNIT, 9, "", &["unexpected end"]);
        check("Slug = 'a' IS NOT", &UNIT, 18, "", &["unexpected end", "TRUE or FALSE"]);
        let e = err("Slug =", &UNIT);
        assert_eq!(
            e.to_string(),
            "invalid where expression at column 7 at end of expression: unexpected end of expression; expected a literal value"
        );
    }

    #[test]
    fn unknown_operator() {
        check("Slug EQUALS 'a'", &UNIT, 6, "EQUALS", &["unknown operator 'EQUALS'"]);
        check("Slug == 'a'", &UNIT, 6, "==", &["unknown operator '=='"]);
        check("Slug <> 'a'", &UNIT, 6, "<>", &["unknown operator"]);
        check("Slug NOT EQUALS 'a'", &UNIT, 10, "EQUALS", &["LIKE, ILIKE or IN after NOT"]);
        check("TargetID IS FOO", &UNIT, 13, "FOO", &["NULL, NOT NULL, TRUE or FALSE"]);
        check("Slug 'a'", &UNIT, 6, "'a'", &["expected an operator"]);
        check("Slug = 'a' IS MAYBE", &UNIT, 12, "IS", &["IS [NOT] TRUE or FALSE", "MAYBE"]);
    }

    #[test]
    fn or_not_and_parentheses() {
        check("Slug = 'a' OR Slug = 'b'", &UNIT, 12, "OR", &["OR is not supported; use IN (...)"]);
        check("Slug = 'a' or Slug = 'b'", &UNIT, 12, "or", &["OR is not supported"]);
        check("OR Slug = 'b'", &UNIT, 1, "OR", &["OR is not supported"]);
        check("Slug = 'a' || Slug = 'b'", &UNIT, 12, "||", &["OR is not supported"]);
        check("(Slug = 'a')", &UNIT, 1, "(", &["parentheses are not supported"]);
        check("Slug = 'a' AND (Slug = 'b')", &UNIT, 16, "(", &["parentheses"]);
        check("NOT Slug = 'a'", &UNIT, 1, "NOT", &["NOT of a clause is not supported"]);
        check("Slug = 'a' Slug = 'b'", &UNIT, 12, "Slug", &["expected AND"]);
        check("Slug = 'a' AND AND Slug = 'b'", &UNIT, 16, "AND", &["expected an attribute"]);
        check("'a' = Slug", &UNIT, 1, "'a'", &["expected an attribute"]);
    }

    #[test]
    fn type_mismatches() {
        check("HeadRevisionNum LIKE '1%'", &UNIT, 17, "LIKE", &["string attribute", "an Int"]);
        check("HeadRevisionNum NOT ILIKE '1%'", &UNIT, 17, "NOT", &["string attribute"]);
        check("SpaceID ~ 'abc'", &UNIT, 9, "~", &["string attribute", "Uuid"]);
        check("Slug ? 'x'", &UNIT, 6, "?", &["'?' needs an array", "a String"]);
        check("Conflicts ? 'x'", &UNIT, 11, "?", &["'?' needs an array"]);
        check("Tags ? 5", &REVISION, 8, "5", &["type mismatch", "each element of 'Tags' is a Uuid"]);
        check("Slug IS NULL", &UNIT, 6, "IS", &["never null"]);
        check("HeadRevisionNum IS NOT NULL", &UNIT, 17, "IS", &["never null"]);
        check("Conflicts.*.Reason IS NULL", &UNIT, 20, "IS", &["never null"]);
        check("SpaceID < 'x'", &UNIT, 9, "<", &["'<' cannot be used", "only = and !="]);
        check("TargetID >= 'x'", &UNIT, 10, ">=", &["Uuid"]);
        check("Admin > true", &USER, 7, ">", &["a Bool"]);
        check("HeadRevisionNum = '5'", &UNIT, 19, "'5'", &["type mismatch", "an Int", "a string"]);
        check("Slug = 5", &UNIT, 8, "5", &["type mismatch", "a String", "an integer"]);
        check("Admin = 'yes'", &USER, 9, "'yes'", &["type mismatch"]);
        check("Slug IN ('a', 2)", &UNIT, 15, "2", &["type mismatch"]);
        check("HeadRevisionNum > Slug", &UNIT, 19, "Slug", &["type mismatch", "an Int", "a String"]);
        check("SpaceID = Slug", &UNIT, 11, "Slug", &["type mismatch"]);
        check("Labels = 'x'", &UNIT, 8, "=", &["a Map", "Labels.key"]);
        check("Tags = 'x'", &REVISION, 6, "=", &["Tags ? 'value'"]);
        check("Conflicts = 'x'", &UNIT, 11, "=", &["Conflicts.*.Field"]);
        check("LEN(HeadRevisionNum) > 0", &UNIT, 5, "HeadRevisionNum", &["LEN needs", "an Int"]);
        check("LEN(Conflicts.*.Reason) > 0", &UNIT, 5, "Conflicts.*.Reason", &["'*' path"]);
        check("LEN(Slug) = 'a'", &UNIT, 13, "'a'", &["type mismatch"]);
        check("Slug IS TRUE", &UNIT, 6, "IS", &["needs a comparison"]);
        check("Admin IN (true)", &USER, 7, "IN", &["IN needs"]);
        check("Slug LIKE Slug", &UNIT, 11, "Slug", &["quoted pattern"]);
        check("Slug IN ()", &UNIT, 10, ")", &["empty"]);
        check("Slug IN 'a'", &UNIT, 9, "'a'", &["'(' after IN"]);
    }

    #[test]
    fn invalid_regex() {
        check(
            "Slug = 'a' AND Slug ~ '(unclosed'",
            &UNIT,
            23,
            "'(unclosed'",
            &["invalid regular expression", "unclosed group"],
        );
        check("Slug !~* '['", &UNIT, 10, "'['", &["invalid regular expression"]);
        // Huge compiled programs are refused instead of eating memory.
        check("Slug ~ 'a{1000}{1000}'", &UNIT, 8, "'a{1000}{1000}'", &["invalid regular expression"]);
    }

    #[test]
    fn bad_paths() {
        check("Tags.*.x = 'a'", &REVISION, 6, "*", &["'*' needs an array of objects", "an array of Uuid"]);
        check("Slug.*.x = 'a'", &UNIT, 6, "*", &["'*' needs an array of objects"]);
        check("Slug.Foo = 'a'", &UNIT, 6, "Foo", &["'Slug' is a String", "no attribute 'Foo'"]);
        check("Conflicts.*.Reason.x = 'a'", &UNIT, 20, "x", &["no attribute 'x'"]);
        check("Conflicts.Reason = 'a'", &UNIT, 11, "Reason", &["Conflicts.*.Resource"]);
        check("Conflicts.* = 'a'", &UNIT, 11, "*", &["must be followed by a field"]);
        check("UpstreamUnit.Space.Slug = 'a'", &UNIT, 14, "Space", &["not reachable"]);
        check("UpstreamUnit.UpstreamUnit.Slug = 'a'", &UNIT, 14, "UpstreamUnit", &["one level"]);
        check("Space = 'a'", &UNIT, 1, "Space", &["relation", "Space.Slug"]);
        check("Labels.a*b = 'x'", &UNIT, 8, "a*b", &["invalid key"]);
        check("Labels. = 'x'", &UNIT, 8, "", &["invalid key"]);
        check("Slug..x = 'a'", &UNIT, 6, "", &["no attribute ''"]);
        check("Unit. = 'a'", &UNIT, 6, "", &["empty segment"]);
    }

    #[test]
    fn columns_count_chars_across_lines() {
        check("Slug = 'é'\nAND\tFOO = 1", &UNIT, 16, "FOO", &["unknown attribute"]);
        check("Slug = 'a' AND\n  (x", &UNIT, 18, "(", &["parentheses"]);
    }

    #[test]
    fn length_limit() {
        let pad = " ".repeat(4096 - 10);
        assert!(parse(&format!("{pad}Slug = 'a'"), &UNIT).is_ok());
        check(&format!("{pad}Slug = 'ab'"), &UNIT, 4097, "'", &["too long", "4096"]);
    }

    #[test]
    fn blank_is_empty() {
        assert!(parse("", &UNIT).unwrap().is_empty());
        assert!(parse(" \t\n ", &UNIT).unwrap().is_empty());
    }

    #[test]
    fn canonical_text() {
        let cases = [
            ("slug~~'a%'", "Slug LIKE 'a%'"),
            ("Slug !~~ 'a%'  and  Slug ilike 'B_'", "Slug NOT LIKE 'a%'|Slug ILIKE 'B_'"),
            ("Slug not ilike 'x' AND Slug ~* '^a'", "Slug NOT ILIKE 'x'|Slug ~* '^a'"),
            ("Labels.env not in ('dev','it''s')", "Labels.env NOT IN ('dev', 'it''s')"),
            ("len(Labels)>=-1", "LEN(Labels) >= -1"),
            ("TargetID = 'A' is not false", "TargetID = 'A' IS NOT FALSE"),
            (
                "Unit.UpstreamRevisionNum<UpstreamUnit.HeadRevisionNum",
                "Unit.UpstreamRevisionNum < UpstreamUnit.HeadRevisionNum",
            ),
            ("TargetID is null is true", "TargetID IS NULL IS TRUE"),
        ];
        for (src, want) in cases {
            let src = src.replacen("slug", "Slug", 1);
            let got: Vec<String> = parse(&src, &UNIT).unwrap().iter().map(|c| c.to_string()).collect();
            assert_eq!(got.join("|"), want, "{src}");
        }
        let got = parse("Admin is not TRUE AND Admin != FALSE", &USER).unwrap();
        assert_eq!(got[0].to_string(), "Admin IS NOT TRUE");
        assert_eq!(got[1].to_string(), "Admin != false");
        let got = parse("Tags ? 'x' AND LEN(Tags) = 0", &REVISION).unwrap();
        assert_eq!(got[0].to_string(), "Tags ? 'x'");
    }

    #[test]
    fn every_entity_has_slug_or_common_fields() {
        for e in ENTITIES {
            assert!(
                parse("Version > 0 AND CreatedAt >= '2025' AND UpdatedAt < '2026'", e).is_ok(),
                "{}",
                e.name
            );
        }
    }

    const TOKENS: &[&str] = &[
        "Slug",
        "=",
        "'a'",
        "AND",
        "and",
        "OR",
        "(",
        ")",
        ",",
        "IN",
        "NOT",
        "LIKE",
        "ILIKE",
        "IS",
        "NULL",
        "TRUE",
        "false",
        "Labels.env",
        "Conflicts.*.Reason",
        "Conflicts.*",
        "LEN",
        "1",
        "-",
        "-5",
        "'",
        "''",
        "?",
        "~*",
        "!~",
        "~~",
        "<",
        ">=",
        "Space.Slug",
        "UpstreamUnit.Space",
        "*",
        ".",
        "Unit.Slug",
        "TargetID",
        "HeadRevisionNum",
        "'[x'",
        "é",
        "\n",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Generated valid clause lists parse; each clause renders to its canonical text, and
        /// the canonical text re-parses to the same structure.
        #[test]
        fn generated_clauses_round_trip(
            nums in prop::collection::vec(any::<u32>(), 1..64),
            strs in prop::collection::vec(r"[a-zA-Z0-9 '%_\\.é-]{0,12}", 1..6),
            ints in prop::collection::vec(-99_999_999_999_999_999i64..99_999_999_999_999_999, 1..6),
            n in 1usize..5,
        ) {
            let mut p = Picks::new(&nums, &strs, &ints);
            let e = ENTITIES[p.pick(ENTITIES.len())];
            let (canon, text) = gen_expr(e, n, &mut p);
            let clauses = parse(&text, e).map_err(|err| TestCaseError::fail(format!("{text:?}: {err}")))?;
            let rendered: Vec<String> = clauses.iter().map(|c| c.to_string()).collect();
            prop_assert_eq!(&rendered, &canon);
            let again = parse(&canon.join(" AND "), e).map_err(|err| TestCaseError::fail(err.to_string()))?;
            prop_assert_eq!(again, clauses);
        }

        /// Arbitrary text never panics the parser, and errors point inside the text.
        #[test]
        fn arbitrary_text_never_panics(src in any::<String>()) {
            for e in ENTITIES {
                if let Err(err) = parse(&src, e) {
                    prop_assert!(err.column >= 1 && err.column <= src.chars().count() + 1);
                }
            }
        }

        /// Cutting a valid expression anywhere, or splicing a character in, never panics.
        #[test]
        fn damaged_expressions_never_panic(
            nums in prop::collection::vec(any::<u32>(), 1..64),
            cut in any::<prop::sample::Index>(),
            junk in any::<char>(),
        ) {
            let (strs, ints) = (vec!["a'b".to_string()], vec![7]);
            let mut p = Picks::new(&nums, &strs, &ints);
            let e = ENTITIES[p.pick(ENTITIES.len())];
            let text: Vec<char> = gen_expr(e, 3, &mut p).1.chars().collect();
            let at = cut.index(text.len() + 1);
            let cut_text: String = text[..at].iter().collect();
            let spliced: String = text[..at].iter().chain([junk].iter()).chain(&text[at..]).collect();
            for src in [cut_text, spliced] {
                if let Err(err) = parse(&src, e) {
                    prop_assert!(err.column >= 1 && err.column <= src.chars().count() + 1);
                }
            }
        }

        /// Token soup (close to valid) never panics, and whatever parses round-trips.
        #[test]
        fn token_soup_never_panics(toks in prop::collection::vec(prop::sample::select(TOKENS), 0..14), sep in prop::sample::select(vec!["", " "])) {
            let src = toks.join(sep);
            if let Ok(clauses) = parse(&src, &UNIT) {
                let canon: Vec<String> = clauses.iter().map(|c| c.to_string()).collect();
                prop_assert_eq!(parse(&canon.join(" AND "), &UNIT).unwrap(), clauses);
            }
        }
    }
}
