//! CEL for custom prerequisites: one shared environment (the standard library plus the string
//! extension), compiling a `cel:` expression once when the workflow is written, and binding the
//! `Space`, `ChangeOrder` and `Release` JSON when it is evaluated.
//!
//! Compiling also refuses an expression that reads a variable other than the three it will be
//! given, since such an expression could never evaluate. Binding writes every JSON integer that
//! fits as a signed CEL `int` (serde_json would hand non-negative ones over as `uint`, and
//! `Space.Replicas + 1` would then have no overload).

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use crate::invoke::CelJson;
use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::{Context, Env, Program};
use serde_json::Value;

/// The prefix every custom prerequisite's Expression carries.
pub const CEL_PREFIX: &str = "cel:";

/// The variables a custom prerequisite's expression is evaluated with.
pub const CEL_VARIABLES: [&str; 3] = ["Space", "ChangeOrder", "Release"];

/// Identifiers CEL resolves by itself (type names, usable as `type(x) == string`).
const CEL_TYPE_NAMES: [&str; 11] =
    ["bool", "bytes", "double", "duration", "dyn", "int", "list", "map", "null_type", "string", "uint"];

fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings).expect("the string extension registers once");
        Arc::new(env)
    })
}

/// A compiled `cel:` expression, cheap to clone and shared by every evaluation.
#[derive(Clone, Debug)]
pub(crate) struct CelExpression {
    source: String,
    program: Arc<Program>,
}

impl CelExpression {
    /// Compiles `text` (with its `cel:` prefix); the error is one sentence saying what is wrong.
    pub(crate) fn compile(text: &str) -> Result<CelExpression, String> {
        let Some(source) = text.trim_start().strip_prefix(CEL_PREFIX) else {
            return Err(format!(
                "an Expression must start with '{CEL_PREFIX}', e.g. \"cel:Space.Labels.Tier == 'gold'\""
            ));
        };
        let source = source.trim();
        if source.is_empty() {
            return Err(format!("the expression after '{CEL_PREFIX}' is empty"));
        }
        let program = env().compile(source).map_err(|e| {
            // The first line says what is wrong and where; the rest repeats the source.
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            format!("is not a valid CEL expression ({first})")
        })?;
        let mut free = BTreeSet::new();
        free_variables(program.expression(), &mut Vec::new(), &mut free);
        let unknown: Vec<&str> = free
            .iter()
            .map(String::as_str)
            .filter(|v| !CEL_VARIABLES.contains(v) && !CEL_TYPE_NAMES.contains(v))
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "reads {} {}, which will never be bound (the variables are {})",
                if unknown.len() == 1 { "variable" } else { "variables" },
                unknown.iter().map(|v| format!("'{v}'")).collect::<Vec<_>>().join(", "),
                CEL_VARIABLES.join(", ")
            ));
        }
        Ok(CelExpression { source: source.to_string(), program: Arc::new(program) })
    }

    /// The expression without its prefix.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// Runs the program against `context`.
    pub(crate) fn execute(&self, context: &Context<'_, '_>) -> cel::ResolveResult {
        self.program.execute(context)
    }
}

/// A fresh evaluation context on the shared environment.
pub(crate) fn context() -> Context<'static, 'static> {
    Context::with_env(Arc::clone(env()))
}

/// Converts `json` to a CEL value with integers as signed `int` where they fit.
pub(crate) fn to_cel(json: &Value) -> Result<cel::Value, String> {
    cel::to_value(CelJson(json)).map_err(|e| e.to_string())
}

/// Collects identifiers not bound by an enclosing comprehension (`exists(k, ...)` binds `k`).
fn free_variables(e: &IdedExpr, bound: &mut Vec<String>, out: &mut BTreeSet<String>) {
    match &e.expr {
        Expr::Unspecified | Expr::Literal(_) => {}
        Expr::Ident(name) => {
            if !name.starts_with('@') && !bound.contains(name) {
                out.insert(name.clone());
            }
        }
        Expr::Select(s) => free_variables(&s.operand, bound, out),
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                free_variables(t, bound, out);
            }
            c.args.iter().for_each(|a| free_variables(a, bound, out));
        }
        Expr::List(l) => l.elements.iter().for_each(|a| free_variables(a, bound, out)),
        Expr::Map(m) => m.entries.iter().for_each(|en| entry_variables(&en.expr, bound, out)),
        Expr::Struct(s) => s.entries.iter().for_each(|en| entry_variables(&en.expr, bound, out)),
        Expr::Comprehension(c) => {
            free_variables(&c.iter_range, bound, out);
            free_variables(&c.accu_init, bound, out);
            let depth = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            for part in [&c.loop_cond, &c.loop_step, &c.result] {
                free_variables(part, bound, out);
            }
            bound.truncate(depth);
        }
    }
}

fn entry_variables(e: &EntryExpr, bound: &mut Vec<String>, out: &mut BTreeSet<String>) {
    match e {
        EntryExpr::StructField(f) => free_variables(&f.value, bound, out),
        EntryExpr::MapEntry(m) => {
            free_variables(&m.key, bound, out);
            free_variables(&m.value, bound, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(src: &str, space: Value) -> cel::ResolveResult {
        let e = CelExpression::compile(src).unwrap_or_else(|m| panic!("{src}: {m}"));
        let mut ctx = context();
        ctx.add_variable_from_value("Space", to_cel(&space).unwrap());
        e.execute(&ctx)
    }

    #[test]
    fn integers_bind_as_signed_so_arithmetic_works() {
        let space = json!({"Replicas": 3, "Big": u64::MAX, "Ratio": 0.5});
        assert_eq!(run("cel:Space.Replicas + 1 == 4", space.clone()), Ok(cel::Value::Bool(true)));
        assert_eq!(run("cel:Space.Replicas - 5 < 0", space.clone()), Ok(cel::Value::Bool(true)));
        assert_eq!(run("cel:Space.Big == 18446744073709551615u", space.clone()), Ok(cel::Value::Bool(true)));
        assert_eq!(run("cel:Space.Ratio < 1.0", space), Ok(cel::Value::Bool(true)));
    }

    #[test]
    fn string_extension_is_available() {
        let space = json!({"Labels": {"Tier": "GOLD"}});
        assert_eq!(run("cel:Space.Labels.Tier.lowerAscii() == 'gold'", space), Ok(cel::Value::Bool(true)));
    }

    #[test]
    fn refuses_missing_prefix_empty_syntax_and_unknown_variables() {
        assert!(CelExpression::compile("Space.Slug == 'a'").unwrap_err().contains("must start with 'cel:'"));
        assert!(CelExpression::compile("cel:  ").unwrap_err().contains("empty"));
        assert!(
            CelExpression::compile("cel:Space.Slug ==").unwrap_err().contains("not a valid CEL expression")
        );
        let err = CelExpression::compile("cel:Spcae.Slug == 'a' && Relase == null").unwrap_err();
        assert!(err.contains("'Relase', 'Spcae'") && err.contains("Space, ChangeOrder, Release"), "{err}");
    }

    #[test]
    fn comprehension_variables_and_type_names_are_not_free() {
        let ok = [
            "cel:Space.Labels.exists(k, k == 'Stage')",
            "cel:Space.Labels.all(k, Space.Labels[k] != '') && [1, 2].map(x, x * 2) == [2, 4]",
            "cel:type(Space.Slug) == string && Release == null && has(ChangeOrder.Slug)",
            "cel:{'a': Space.Slug}['a'] != ''",
        ];
        for src in ok {
            CelExpression::compile(src).unwrap_or_else(|m| panic!("{src}: {m}"));
        }
        // A comprehension variable is bound only inside its comprehension.
        let err = CelExpression::compile("cel:Space.Labels.exists(k, true) && k == 'x'").unwrap_err();
        assert!(err.contains("'k'"), "{err}");
    }

    #[test]
    fn compiled_expressions_can_be_shared_across_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<CelExpression>();
    }
}
