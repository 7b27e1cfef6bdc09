//! Tokenizer for where expressions; produces tokens on demand so that the first error in
//! reading order is the one reported.

use super::{MAX_INT_DIGITS, MAX_STRING_CHARS, QueryError};

/// Symbolic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sym {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
    /// `~~` (LIKE)
    Like,
    /// `!~~` (NOT LIKE)
    NotLike,
    /// `~`
    Re,
    /// `~*`
    ReCi,
    /// `!~`
    NotRe,
    /// `!~*`
    NotReCi,
    /// `?`
    Contains,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TokKind {
    /// Attribute path or keyword (keywords are recognised by the parser, case-insensitively).
    Ident,
    Str(String),
    Int(i64),
    Sym(Sym),
    LParen,
    RParen,
    Comma,
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub kind: TokKind,
    /// Source text of the token (empty for `Eof`).
    pub text: String,
    /// 1-based character column.
    pub col: usize,
}

impl Token {
    /// Whether this is the identifier `kw`, ignoring ASCII case.
    pub fn is_kw(&self, kw: &str) -> bool {
        self.kind == TokKind::Ident && self.text.eq_ignore_ascii_case(kw)
    }

    pub fn error(&self, message: impl Into<String>) -> QueryError {
        QueryError::new(self.col, &self.text, message)
    }
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/' | '*')
}

fn is_op_char(c: char) -> bool {
    matches!(c, '=' | '!' | '<' | '>' | '~' | '?' | '*' | '|' | '&')
}

pub(crate) struct Lexer {
    chars: Vec<char>,
    pos: usize,
}

impl Lexer {
    pub fn new(src: &str) -> Lexer {
        Lexer { chars: src.chars().collect(), pos: 0 }
    }

    fn text(&self, start: usize) -> String {
        self.chars[start..self.pos].iter().collect()
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) {
        while self.pos < self.chars.len() && f(self.chars[self.pos]) {
            self.pos += 1;
        }
    }

    pub fn next_token(&mut self) -> Result<Token, QueryError> {
        self.take_while(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
        let start = self.pos;
        let col = start + 1;
        let Some(&c) = self.chars.get(start) else {
            return Ok(Token { kind: TokKind::Eof, text: String::new(), col });
        };
        let kind = match c {
            '(' | ')' | ',' => {
                self.pos += 1;
                match c {
                    '(' => TokKind::LParen,
                    ')' => TokKind::RParen,
                    _ => TokKind::Comma,
                }
            }
            '\'' => TokKind::Str(self.string(start)?),
            c if c.is_ascii_digit() || c == '-' => TokKind::Int(self.int(start)?),
            c if is_ident_start(c) => {
                self.take_while(is_ident_char);
                TokKind::Ident
            }
            c if is_op_char(c) => {
                self.take_while(is_op_char);
                TokKind::Sym(self.sym(start)?)
            }
            c => {
                return Err(QueryError::new(col, &c.to_string(), format!("unexpected character '{c}'")));
            }
        };
        Ok(Token { kind, text: self.text(start), col })
    }

    fn string(&mut self, start: usize) -> Result<String, QueryError> {
        let mut content = String::new();
        self.pos += 1;
        loop {
            match self.chars.get(self.pos) {
                None => {
                    let rest: String = self.chars[start..].iter().collect();
                    return Err(QueryError::new(
                        start + 1,
                        &rest,
                        "unterminated string literal (missing closing ')",
                    ));
                }
                Some('\'') if self.chars.get(self.pos + 1) == Some(&'\'') => {
                    content.push('\'');
                    self.pos += 2;
                }
                Some('\'') => {
                    self.pos += 1;
                    break;
                }
                Some(&c) => {
                    content.push(c);
                    self.pos += 1;
                }
            }
        }
        let n = content.chars().count();
        if n > MAX_STRING_CHARS {
            return Err(QueryError::new(
                start + 1,
                &self.text(start),
                format!("string literal is too long ({n} characters; at most {MAX_STRING_CHARS})"),
            ));
        }
        Ok(content)
    }

    fn int(&mut self, start: usize) -> Result<i64, QueryError> {
        if self.chars[start] == '-' {
            self.pos += 1;
        }
        let digits_start = self.pos;
        self.take_while(|c| c.is_ascii_digit());
        let digits = self.pos - digits_start;
        if digits == 0 {
            return Err(QueryError::new(start + 1, "-", "'-' must start an integer literal"));
        }
        if self.chars.get(self.pos).is_some_and(|&c| is_ident_char(c)) {
            self.take_while(is_ident_char);
            let text = self.text(start);
            return Err(QueryError::new(start + 1, &text, format!("invalid number '{text}'")));
        }
        let text = self.text(start);
        if digits > MAX_INT_DIGITS {
            return Err(QueryError::new(
                start + 1,
                &text,
                format!("integer literal has more than {MAX_INT_DIGITS} digits"),
            ));
        }
        // At most 18 digits always fits in an i64.
        Ok(text.parse().expect("18-digit integer fits in i64"))
    }

    fn sym(&self, start: usize) -> Result<Sym, QueryError> {
        let text = self.text(start);
        let sym = match text.as_str() {
            "=" => Sym::Eq,
            "!=" => Sym::Ne,
            "<" => Sym::Lt,
            ">" => Sym::Gt,
            "<=" => Sym::Le,
            ">=" => Sym::Ge,
            "~~" => Sym::Like,
            "!~~" => Sym::NotLike,
            "~" => Sym::Re,
            "~*" => Sym::ReCi,
            "!~" => Sym::NotRe,
            "!~*" => Sym::NotReCi,
            "?" => Sym::Contains,
            other => {
                let hint = match other {
                    "||" => "OR is not supported; use IN (...)".to_string(),
                    "&&" => "unknown operator '&&'; use AND".to_string(),
                    "==" => "unknown operator '=='; use =".to_string(),
                    "<>" => "unknown operator '<>'; use !=".to_string(),
                    _ => format!("unknown operator '{other}'"),
                };
                return Err(QueryError::new(start + 1, other, hint));
            }
        };
        Ok(sym)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex(src: &str) -> Result<Vec<Token>, QueryError> {
        let mut lx = Lexer::new(src);
        let mut out = Vec::new();
        loop {
            let t = lx.next_token()?;
            if t.kind == TokKind::Eof {
                return Ok(out);
            }
            out.push(t);
        }
    }

    fn kinds(src: &str) -> Vec<TokKind> {
        lex(src).unwrap().into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn tokens_and_columns() {
        let toks = lex("Labels.app.kubernetes.io/name  =\t'x'").unwrap();
        assert_eq!(toks.len(), 3);
        assert_eq!(toks[0].text, "Labels.app.kubernetes.io/name");
        assert_eq!((toks[1].col, toks[2].col), (32, 34));
        assert_eq!(toks[2].kind, TokKind::Str("x".into()));
    }

    #[test]
    fn all_symbols() {
        use Sym::*;
        let want = [Eq, Ne, Lt, Gt, Le, Ge, Like, NotLike, Re, ReCi, NotRe, NotReCi, Contains];
        let got = kinds("= != < > <= >= ~~ !~~ ~ ~* !~ !~* ?");
        assert_eq!(got, want.iter().map(|s| TokKind::Sym(*s)).collect::<Vec<_>>());
    }

    #[test]
    fn no_spaces_needed() {
        assert_eq!(
            kinds("HeadRevisionNum>-3"),
            vec![TokKind::Ident, TokKind::Sym(Sym::Gt), TokKind::Int(-3)]
        );
        assert_eq!(
            kinds("IN('a',1)"),
            vec![
                TokKind::Ident,
                TokKind::LParen,
                TokKind::Str("a".into()),
                TokKind::Comma,
                TokKind::Int(1),
                TokKind::RParen
            ]
        );
    }

    #[test]
    fn string_escapes_and_unicode() {
        assert_eq!(kinds("'it''s'"), vec![TokKind::Str("it's".into())]);
        assert_eq!(kinds("''''"), vec![TokKind::Str("'".into())]);
        assert_eq!(kinds("'héllo wörld'"), vec![TokKind::Str("héllo wörld".into())]);
        // Columns count characters, not bytes.
        assert_eq!(lex("'é' x").unwrap()[1].col, 5);
    }

    #[test]
    fn string_limits() {
        let ok = format!("'{}'", "a".repeat(255));
        assert!(lex(&ok).is_ok());
        let e = lex(&format!("x = '{}'", "a".repeat(256))).unwrap_err();
        assert_eq!(e.column, 5);
        assert!(e.message.contains("too long"), "{e}");
        let e = lex("Slug = 'abc").unwrap_err();
        assert_eq!((e.column, e.token.as_str()), (8, "'abc"));
        assert!(e.message.contains("unterminated"));
    }

    #[test]
    fn int_limits() {
        assert_eq!(kinds("999999999999999999"), vec![TokKind::Int(999_999_999_999_999_999)]);
        assert_eq!(kinds("-999999999999999999"), vec![TokKind::Int(-999_999_999_999_999_999)]);
        let e = lex("x = 1234567890123456789").unwrap_err();
        assert_eq!(e.column, 5);
        assert!(e.message.contains("18 digits"));
        let e = lex("x = 12ab").unwrap_err();
        assert_eq!((e.column, e.token.as_str()), (5, "12ab"));
        let e = lex("x = - 1").unwrap_err();
        assert_eq!(e.column, 5);
    }

    #[test]
    fn unknown_symbols() {
        let e = lex("Slug == 'a'").unwrap_err();
        assert_eq!((e.column, e.token.as_str()), (6, "=="));
        assert!(e.message.contains("unknown operator"));
        let e = lex("a = 1 || b = 2").unwrap_err();
        assert!(e.message.contains("OR is not supported"));
        let e = lex("a = 1 ; b").unwrap_err();
        assert_eq!((e.column, e.token.as_str()), (7, ";"));
        assert!(e.message.contains("unexpected character"));
    }
}
