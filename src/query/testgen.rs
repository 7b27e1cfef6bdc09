//! Test-only generator of random valid clauses (and their canonical text), shared by the
//! property tests of the parser and of `WhereExpr`.

use super::attrs::{Attr, AttrType, Class, Entity};

/// Map keys the generator uses.
pub(crate) const KEYS: &[&str] = &["env", "tier", "app.kubernetes.io/name"];
/// UUIDs the generator uses (the last is the first in upper case).
pub(crate) const UUIDS: &[&str] = &[
    "6f1c2a34-0000-4000-8000-00000000000a",
    "6f1c2a34-0000-4000-8000-00000000000b",
    "6F1C2A34-0000-4000-8000-00000000000A",
];

/// Deterministic choices fed by proptest-generated vectors.
pub(crate) struct Picks<'a> {
    nums: &'a [u32],
    strs: &'a [String],
    ints: &'a [i64],
    n: usize,
}

impl<'a> Picks<'a> {
    pub(crate) fn new(nums: &'a [u32], strs: &'a [String], ints: &'a [i64]) -> Self {
        Picks { nums, strs, ints, n: 0 }
    }
    pub(crate) fn pick(&mut self, k: usize) -> usize {
        self.n += 1;
        self.nums[self.n % self.nums.len()] as usize % k
    }
    pub(crate) fn str(&mut self) -> String {
        self.n += 1;
        self.strs[self.n % self.strs.len()].clone()
    }
    pub(crate) fn int(&mut self) -> i64 {
        self.n += 1;
        self.ints[self.n % self.ints.len()]
    }
    pub(crate) fn uuid(&mut self) -> String {
        UUIDS[self.pick(UUIDS.len())].to_string()
    }
    fn ws(&mut self, tight: bool) -> &'static str {
        let all = ["", " ", "\t", "\n  ", "   "];
        if tight { all[self.pick(all.len())] } else { all[1 + self.pick(all.len() - 1)] }
    }
    /// A keyword in a random letter case.
    pub(crate) fn kw(&mut self, word: &str) -> String {
        match self.pick(3) {
            0 => word.to_string(),
            1 => word.to_lowercase(),
            _ => word[..1].to_string() + &word[1..].to_lowercase(),
        }
    }
}

/// An operand a generated clause may use.
#[derive(Debug, Clone)]
pub(crate) struct Cand {
    text: String,
    ty: AttrType,
    nullable: bool,
}

fn add(prefix: &str, attrs: &[Attr], in_rel: bool, out: &mut Vec<Cand>) {
    for a in attrs {
        let text = format!("{prefix}{}", a.name);
        match a.ty {
            AttrType::Relation(t) if !in_rel => add(&format!("{text}."), t.attrs, true, out),
            AttrType::Relation(_) => {}
            AttrType::Map => {
                for k in KEYS {
                    out.push(Cand { text: format!("{text}.{k}"), ty: AttrType::String, nullable: true });
                }
                out.push(Cand { text, ty: a.ty, nullable: true });
            }
            AttrType::ObjectArray(fields) => {
                for f in fields {
                    out.push(Cand { text: format!("{text}.*.{}", f.name), ty: f.ty, nullable: false });
                }
                out.push(Cand { text, ty: a.ty, nullable: in_rel });
            }
            ty => out.push(Cand { text, ty, nullable: in_rel || ty == AttrType::NullableUuid }),
        }
    }
}

/// Every operand path of `e`, one level into relations, with `Unit.`-qualified variants.
pub(crate) fn candidates(e: &'static Entity) -> Vec<Cand> {
    let mut out = Vec::new();
    add("", e.attrs, false, &mut out);
    if e.self_qualifier {
        let own: Vec<Cand> = out.iter().filter(|c| !c.text.contains('.')).cloned().collect();
        out.extend(own.into_iter().map(|c| Cand { text: format!("{}.{}", e.name, c.text), ..c }));
    }
    out
}

fn lit(ty: AttrType, p: &mut Picks) -> String {
    match ty.class() {
        Class::Int => p.int().to_string(),
        Class::Bool => ["true", "false"][p.pick(2)].to_string(),
        Class::Uuid => format!("'{}'", p.uuid()),
        _ => format!("'{}'", p.str().replace('\'', "''")),
    }
}

/// One random valid clause over `c`: (canonical text, text with random spelling).
pub(crate) fn gen_clause(c: &Cand, all: &[Cand], p: &mut Picks) -> (String, String) {
    let class = c.ty.class();
    let lhs = c.text.clone();
    let (mut canon, mut var) = (lhs.clone(), lhs.clone());
    let len =
        matches!(c.ty, AttrType::String | AttrType::Map | AttrType::Array(_) | AttrType::ObjectArray(_))
            && !c.text.contains('*');
    // Options: 0 compare literal, 1 compare attribute, 2 pattern, 3 IN, 4 IS NULL, 5 ?, 6 LEN, 7 bare.
    let mut opts = Vec::new();
    if class != Class::Other {
        opts.extend([0, 1]);
    }
    if class == Class::Str {
        opts.push(2);
    }
    if matches!(class, Class::Str | Class::Int | Class::Uuid) {
        opts.push(3);
    }
    if c.nullable {
        opts.push(4);
    }
    if matches!(c.ty, AttrType::Array(_)) {
        opts.push(5);
    }
    if len {
        opts.push(6);
    }
    if class == Class::Bool {
        opts.push(7);
    }
    let opt = opts[p.pick(opts.len())];
    let ops: &[&str] = match class {
        Class::Str | Class::Int => &["=", "!=", "<", ">", "<=", ">="],
        _ => &["=", "!="],
    };
    let (w1, w2) = (p.ws(true), p.ws(true));
    match opt {
        0 | 1 | 6 => {
            let (ty, rhs_class) = if opt == 6 {
                canon = format!("LEN({lhs})");
                var = format!("{}{}({}{lhs}{})", p.kw("LEN"), p.ws(true), p.ws(true), p.ws(true));
                (AttrType::Int, Class::Int)
            } else {
                (c.ty, class)
            };
            let ops: &[&str] = if opt == 6 { &["=", "!=", "<", ">", "<=", ">="] } else { ops };
            let op = ops[p.pick(ops.len())];
            let same: Vec<&Cand> = all.iter().filter(|o| o.ty.class() == rhs_class).collect();
            let rhs =
                if opt == 1 && !same.is_empty() { same[p.pick(same.len())].text.clone() } else { lit(ty, p) };
            canon += &format!(" {op} {rhs}");
            var += &format!("{w1}{op}{w2}{rhs}");
        }
        2 => {
            let (op, vop) = match p.pick(8) {
                0 => ("LIKE", if p.pick(2) == 0 { p.kw("LIKE") } else { "~~".into() }),
                1 => (
                    "NOT LIKE",
                    if p.pick(2) == 0 { format!("{} {}", p.kw("NOT"), p.kw("LIKE")) } else { "!~~".into() },
                ),
                2 => ("ILIKE", p.kw("ILIKE")),
                3 => ("NOT ILIKE", format!("{}\t{}", p.kw("NOT"), p.kw("ILIKE"))),
                4 => ("~", "~".into()),
                5 => ("~*", "~*".into()),
                6 => ("!~", "!~".into()),
                _ => ("!~*", "!~*".into()),
            };
            let pat = if op.contains('~') {
                let valid = ["^app-[0-9]+$", "prod|staging", "(?x) a b", "\\d{2,4}", "[[:alpha:]]+"];
                if p.pick(2) == 0 { valid[p.pick(valid.len())].to_string() } else { regex::escape(&p.str()) }
            } else {
                p.str()
            };
            let pat = format!("'{}'", pat.replace('\'', "''"));
            canon += &format!(" {op} {pat}");
            var += &format!(" {vop} {pat}");
        }
        3 => {
            let n = 1 + p.pick(3);
            let items: Vec<String> = (0..n).map(|_| lit(c.ty, p)).collect();
            let not = p.pick(2) == 0;
            canon += &format!(" {}IN ({})", if not { "NOT " } else { "" }, items.join(", "));
            let vnot = if not { format!("{} ", p.kw("NOT")) } else { String::new() };
            var += &format!(" {vnot}{}{w1}({})", p.kw("IN"), items.join(&format!("{w2},{w1}")));
        }
        4 => {
            let not = p.pick(2) == 0;
            canon += if not { " IS NOT NULL" } else { " IS NULL" };
            let vnot = if not { format!(" {}", p.kw("NOT")) } else { String::new() };
            var += &format!(" {}{vnot} {}", p.kw("IS"), p.kw("NULL"));
        }
        5 => {
            let AttrType::Array(elem) = c.ty else { unreachable!() };
            let l = lit(*elem, p);
            canon += &format!(" ? {l}");
            var += &format!("{w1}?{w2}{l}");
        }
        _ => {}
    }
    // Truth test: mandatory for a bare Bool, optional otherwise.
    let t = p.pick(if opt == 7 { 4 } else { 6 });
    if t < 4 {
        let (not, word) = (t >= 2, ["TRUE", "FALSE"][t % 2]);
        canon += &format!(" IS {}{word}", if not { "NOT " } else { "" });
        let vnot = if not { format!("{} ", p.kw("NOT")) } else { String::new() };
        var += &format!(" {} {vnot}{}", p.kw("IS"), p.kw(word));
    }
    (canon, var)
}

/// `n` generated clauses over `e`: (canonical texts, whole random-spelling expression).
pub(crate) fn gen_expr(e: &'static Entity, n: usize, p: &mut Picks) -> (Vec<String>, String) {
    let cands = candidates(e);
    let (mut canon, mut var) = (Vec::new(), String::new());
    for i in 0..n {
        let (c, v) = gen_clause(&cands[p.pick(cands.len())], &cands, p);
        if i > 0 {
            var += &format!("{}{}{}", p.ws(false), p.kw("AND"), p.ws(false));
        }
        var += &v;
        canon.push(c);
    }
    (canon, var)
}
