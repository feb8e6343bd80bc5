//! The last step of a load: tools a person has not seen are not offered.
//! A plugin whose tools differ from what was reviewed is withheld whole;
//! a tool whose name imitates another plugin's is withheld alone (see
//! [`crate::manifest::reviewed`]).

use super::plugin::Plugin;
use crate::manifest::reviewed::{changes_text, lookalike_key};
use crate::manifest::{DEFAULTS_NAME, Manifest, Source};
use std::collections::HashMap;

/// A tool that is not offered, and why.
#[derive(Debug, Clone)]
pub struct Withheld {
    /// The tool's name.
    pub tool: String,
    /// The plugin that exports it.
    pub plugin: String,
    /// How it describes itself.
    pub spec: crate::protocol::ToolSpec,
    /// Why, with the fix.
    pub reason: String,
}

/// Withholds what must not be offered from `plugins` and says why, with a
/// warning for each.
pub(super) fn vet(manifest: &Manifest, plugins: &mut [Plugin]) -> Vec<Withheld> {
    let mut withheld = Vec::new();
    if let Some(reviews) = &manifest.tool_reviews {
        for p in plugins.iter_mut() {
            if matches!(p.decl.source, Source::Builtin(_)) || p.provider {
                continue;
            }
            if let Err(changes) = reviews.check(&p.decl.name, &p.sha256, &p.tools) {
                let reason = format!(
                    "plugin `{}` ({}) describes its tools differently from what was reviewed, so \
                     none of them is offered until you review them again with \
                     `corral plugin review {}`:\n{}",
                    p.decl.name,
                    p.decl.origin,
                    p.decl.name,
                    changes_text(&changes).trim_end()
                );
                tracing::warn!("{}", crate::terminal::inert(&reason));
                for t in p.tools.drain(..) {
                    withheld.push(Withheld {
                        tool: t.name.clone(),
                        plugin: p.decl.name.clone(),
                        spec: t,
                        reason: reason.clone(),
                    });
                }
            }
        }
    }
    withheld.extend(lookalikes(manifest, plugins));
    withheld
}

/// How early `p` was declared: built-in first, then the user's file, then
/// the project's, each in the order of its lines.
fn seniority(manifest: &Manifest, p: &Plugin) -> (u8, usize) {
    let file = &p.decl.origin.file;
    let path = std::path::Path::new(file);
    let layer = if file == DEFAULTS_NAME {
        0
    } else if path.file_name().is_some_and(|n| n == "corral.toml")
        && path.parent().and_then(|d| d.canonicalize().ok()).as_deref()
            == Some(manifest.workspace.as_path())
    {
        2
    } else {
        1
    };
    (layer, p.decl.origin.line)
}

/// Withholds each tool whose name looks like a tool of another plugin
/// declared earlier.
fn lookalikes(manifest: &Manifest, plugins: &mut [Plugin]) -> Vec<Withheld> {
    let mut order: Vec<usize> = (0..plugins.len()).collect();
    order.sort_by_key(|&i| seniority(manifest, &plugins[i]));
    // Key → (tool name, plugin index) of the first one seen.
    let mut first: HashMap<String, (String, usize)> = HashMap::new();
    let mut out = Vec::new();
    for i in order {
        let mut keep = Vec::with_capacity(plugins[i].tools.len());
        for t in std::mem::take(&mut plugins[i].tools) {
            let key = lookalike_key(&t.name);
            match first.get(&key) {
                Some((name, j)) if *j != i && *name != t.name => {
                    let reason = format!(
                        "tool `{}` of plugin `{}` ({}) looks like tool `{name}` of plugin `{}` \
                         ({}), so it is not offered: a model or a person could take one for the \
                         other. Remove one of the plugins, or give the later one a `tool_prefix`",
                        t.name,
                        plugins[i].decl.name,
                        plugins[i].decl.origin,
                        plugins[*j].decl.name,
                        plugins[*j].decl.origin,
                    );
                    tracing::warn!("{}", crate::terminal::inert(&reason));
                    out.push(Withheld {
                        tool: t.name.clone(),
                        plugin: plugins[i].decl.name.clone(),
                        spec: t,
                        reason,
                    });
                }
                Some(_) => keep.push(t),
                None => {
                    first.insert(key, (t.name.clone(), i));
                    keep.push(t);
                }
            }
        }
        plugins[i].tools = keep;
    }
    out
}
