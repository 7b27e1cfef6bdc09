//! Deckhand-compatible rendering of layered configuration documents; pure, no I/O.
//!
//! Input: documents with `schema`, `metadata` and `data` (JSON values, e.g. parsed from a YAML
//! stream) and [`RenderOptions`]. Output: the rendered documents, i.e. every concrete document
//! with its final `data`, replacements in place of the documents they replace, and control
//! documents (`metadata/Control`, e.g. the LayeringPolicy) unchanged; abstract and replaced
//! documents are never returned. `schema` and `metadata` are never changed. Or a
//! [`LayeringError`] whose variant is the Deckhand error class.
//!
//! The steps, in Deckhand's order (which decides which error wins): pre-validation
//! (`validate`), the LayeringPolicy, layers, parent selection (`select`), replacement rules
//! (`replace`), the dependency order (`order`), then per document: layering actions
//! (`actions`) onto the parent's rendered data, the document's own substitutions
//! (`substitute`), and a replacement's result copied into the document it replaces. Results do
//! not depend on input order. The behaviour follows `shared/research/deckhand.md`; where this
//! engine deliberately differs from Deckhand, the module that does it says so.
//!
//! Layout: `document` (metadata view), `path` (Deckhand JSONPaths), `select`, `replace`,
//! `order`, `actions`, `substitute` (+ `pytext`, Python's `str()`), `validate`, `error`.

mod actions;
mod document;
mod error;
mod order;
mod path;
mod pytext;
mod replace;
mod select;
mod substitute;
mod validate;

pub use error::{DocRef, FormatProblem, LayeringError, ParentReason, ReplacementReason};

use document::DocView;
use serde_json::{Map, Value};
use std::collections::HashMap;
use substitute::{Patterns, Substitution};

/// How to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    /// Check every document's structure first, as Deckhand does at ingestion; any problem is
    /// `InvalidDocumentFormat`. Off by default, like Deckhand's rendering of stored documents.
    pub validate: bool,
    /// Fail when a substitution source, its `src.path` or a destination write fails (default).
    /// When off, a missing source skips the substitution, a missing `src.path` writes null, and
    /// a failed write leaves the data as it was.
    pub fail_on_missing_sub_src: bool,
}

impl Default for RenderOptions {
    fn default() -> Self {
        Self { validate: false, fail_on_missing_sub_src: true }
    }
}

/// Renders `docs` (see the module documentation).
pub fn render(docs: &[Value], opts: &RenderOptions) -> Result<Vec<Value>, LayeringError> {
    if opts.validate {
        validate::check(docs)?;
    }
    let layer_order = select::layer_order(docs)?;
    let views = docs
        .iter()
        .map(DocView::of)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|p| LayeringError::InvalidDocumentFormat { problems: vec![p] })?;

    // Raw documents are unique by (schema, layer, name): later copies are dropped (Deckhand
    // keeps the first) but still count as parent candidates.
    let mut first_of: HashMap<(&str, &str, &str), usize> = HashMap::with_capacity(views.len());
    let canonical: Vec<usize> = views
        .iter()
        .enumerate()
        .map(|(i, v)| *first_of.entry((v.schema, v.layer, v.name)).or_insert(i))
        .collect();
    let kept: Vec<usize> = (0..views.len()).filter(|&i| canonical[i] == i).collect();

    let rank = select::check_layers(&views, &layer_order)?;
    let parents = select::parents(docs, &views, &canonical, &rank)?;
    let replaced_by = replace::check(&views, &kept, &parents)?;
    let sources = replace::sources(&views, &kept, &replaced_by);

    let mut subs: Vec<Vec<Substitution>> = vec![vec![]; views.len()];
    let mut deps: Vec<Vec<usize>> = vec![vec![]; views.len()];
    for &d in &kept {
        if let Some(p) = parents[d] {
            // Other children of a replaced parent layer onto the replacement's result.
            deps[d].push(replaced_by[p].filter(|&r| r != d).unwrap_or(p));
        }
        subs[d] = substitute::parse(views[d].substitutions).map_err(|(path, reason)| {
            LayeringError::InvalidDocumentFormat {
                problems: vec![FormatProblem { document: views[d].doc_ref(), path, reason }],
            }
        })?;
        deps[d].extend(subs[d].iter().filter_map(|s| sources.get(&(s.src_schema, s.src_name)).copied()));
    }
    let sequence = order::topological(&deps).map_err(|cycle| LayeringError::SubstitutionDependencyCycle {
        cycle: cycle.into_iter().map(|i| views[i].doc_ref()).collect(),
    })?;

    let mut data: Vec<Value> = vec![Value::Null; views.len()];
    for &d in &kept {
        data[d] = docs[d].get("data").cloned().unwrap_or(Value::Null);
    }
    let mut patterns = Patterns::default();
    for d in sequence.into_iter().filter(|&d| canonical[d] == d && !views[d].is_control) {
        let view = &views[d];
        if let Some(p) = parents[d].filter(|_| !view.actions.is_empty()) {
            let mut rendered = data[p].clone();
            for action in view.actions {
                actions::apply(action, &data[d], &mut rendered).map_err(|f| action_error(view, f))?;
            }
            data[d] = rendered;
        }
        for sub in &subs[d] {
            substitute_one(d, sub, &views, &sources, &mut data, &mut patterns, opts)?;
        }
        if view.is_replacement
            && let Some(p) = parents[d]
        {
            data[p] = data[d].clone();
        }
    }

    let mut out = Vec::with_capacity(kept.len());
    for &d in &kept {
        if views[d].is_abstract || replaced_by[d].is_some() {
            continue;
        }
        let mut doc = Map::new();
        for (k, v) in docs[d].as_object().into_iter().flatten() {
            if k != "data" {
                doc.insert(k.clone(), v.clone());
            }
        }
        let rendered = std::mem::take(&mut data[d]);
        if docs[d].get("data").is_some() || !rendered.is_null() {
            doc.insert("data".into(), rendered);
        }
        out.push(Value::Object(doc));
    }
    Ok(out)
}

fn action_error(view: &DocView<'_>, f: actions::ActionFailure) -> LayeringError {
    let document = view.doc_ref();
    match f {
        actions::ActionFailure::Unsupported(method) => {
            LayeringError::UnsupportedActionMethod { document: document.into(), method }
        }
        actions::ActionFailure::Missing { method, path, reason } => {
            LayeringError::MissingDocumentKey { document: document.into(), method, path, reason }
        }
        actions::ActionFailure::Malformed(reason) => LayeringError::InvalidDocumentFormat {
            problems: vec![FormatProblem {
                document,
                path: "metadata.layeringDefinition.actions".into(),
                reason,
            }],
        },
    }
}

/// Applies one substitution of document `d`, honouring `fail_on_missing_sub_src`.
fn substitute_one(
    d: usize,
    sub: &Substitution<'_>,
    views: &[DocView<'_>],
    sources: &HashMap<(&str, &str), usize>,
    data: &mut [Value],
    patterns: &mut Patterns,
    opts: &RenderOptions,
) -> Result<(), LayeringError> {
    let strict = opts.fail_on_missing_sub_src;
    let document = || Box::new(views[d].doc_ref());
    let Some(&src) = sources.get(&(sub.src_schema, sub.src_name)) else {
        if !strict {
            return Ok(());
        }
        return Err(LayeringError::SubstitutionSourceNotFound {
            document: document(),
            src_schema: sub.src_schema.to_string(),
            src_name: sub.src_name.to_string(),
        });
    };
    let unknown = |path: &str, reason: String| LayeringError::UnknownSubstitutionError {
        document: document(),
        src: views[src].doc_ref().into(),
        path: path.to_string(),
        reason,
    };
    let value = match substitute::source_value(sub, &data[src]) {
        Some(v) => v,
        None if strict => {
            return Err(LayeringError::SubstitutionSourceDataNotFound {
                document: document(),
                src: views[src].doc_ref().into(),
                path: sub.src_path.to_string(),
            });
        }
        None => Value::Null,
    };
    let value = match substitute::apply_src_pattern(sub, value, patterns) {
        Ok(v) => v,
        Err(reason) if strict => return Err(unknown(sub.src_path, reason)),
        Err(_) => return Ok(()),
    };
    for dest in &sub.dests {
        match substitute::write(dest, &mut data[d], &value, patterns) {
            Err(reason) if strict => return Err(unknown(dest.path, reason)),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
