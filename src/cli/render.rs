//! `changeflow render`: Deckhand-style rendering of a local YAML stream, no server involved.
//! Reads the documents, calls `layering::render`, prints the rendered documents as a YAML
//! stream (or a JSON array with `-o json`). A rendering error exits non-zero with the Deckhand
//! error class, the document and the reason.

use super::Format;
use crate::layering::{RenderOptions, render};
use crate::model::{parse_stream, render_stream};
use anyhow::Context;
use std::io::Read;

/// Arguments of `changeflow render`; the guide below is printed after the options in `--help`.
#[derive(Debug, clap::Args)]
#[command(after_help = GUIDE)]
pub struct RenderArgs {
    /// YAML stream to render; `-` (the default) reads standard input.
    #[arg(default_value = "-", value_name = "FILE|-")]
    pub file: String,
    /// Check every document's structure first, as Deckhand does when documents are stored
    /// (required metadata such as `storagePolicy`, known keys, complete substitutions); any
    /// problem fails with InvalidDocumentFormat before rendering.
    #[arg(long)]
    pub validate: bool,
    /// Do not fail when a substitution's source document or `src.path` is missing, or a value
    /// cannot be written: skip that substitution (a missing `src.path` writes null) and go on.
    #[arg(long)]
    pub tolerate_missing_sources: bool,
}

const GUIDE: &str = "\
The input is a YAML stream of documents with `schema`, `metadata` and `data`, including one
`deckhand/LayeringPolicy/v1` whose `data.layerOrder` lists the layers, most general first
(e.g. [global, region, site]). A document selects its parent with
`metadata.layeringDefinition.parentSelector` (labels of a document in a higher layer) and
combines its data with the parent's through `actions` (merge, replace or delete at a path such
as `.` or `.values.image`). `metadata.substitutions` copy values from other documents;
`metadata.replacement: true` makes a document take the place of its parent (same schema and
name, lower layer).

Output: every concrete document with its rendered data, replacements instead of the documents
they replace, and control documents (the LayeringPolicy) unchanged; abstract documents are not
printed. On error the exit status is non-zero and the message starts with the Deckhand error
class (e.g. InvalidDocumentReplacement), then the document and the reason.

Example: changeflow render site.yaml -o json";

/// Runs `changeflow render`.
pub fn run(args: RenderArgs, format: Format) -> anyhow::Result<()> {
    let text = if args.file == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).context("reading standard input")?;
        s
    } else {
        std::fs::read_to_string(&args.file).with_context(|| format!("reading {}", args.file))?
    };
    let docs = parse_stream(&text).with_context(|| format!("{} is not a YAML document stream", args.file))?;
    let opts =
        RenderOptions { validate: args.validate, fail_on_missing_sub_src: !args.tolerate_missing_sources };
    let rendered = render(&docs, &opts)?;
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&rendered)?),
        Format::Yaml | Format::Table => print!("{}", render_stream(&rendered)),
    }
    Ok(())
}
