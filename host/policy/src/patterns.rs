//! Path and text patterns: lexical path normalisation, canonical JSON,
//! globs and `*` wildcards.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// Lexically normalises a path: drops `.` and empty segments (so `./` and
/// `//` go), resolves `..` against the segment before it, and keeps a
/// leading `/`. Never touches the filesystem, so symlinks are not followed.
pub(super) fn normalize_path(path: &str) -> String {
    corral_syntax::path::normalize(path)
}

/// Sorts object keys so that a pattern sees the same text however the model
/// ordered its arguments.
pub(super) fn canonical_json(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            serde_json::Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), canonical_json(v)))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(canonical_json).collect())
        }
        other => other.clone(),
    }
}

/// `pattern` as a path glob (`*` within a segment, `**` across them),
/// compiled once per process: a rule is judged against every call, and
/// compiling a glob (a regular expression underneath) costs far more than
/// matching it.
pub(super) fn glob(pattern: &str) -> Result<globset::GlobMatcher, globset::Error> {
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex, PoisonError};
    type Compiled = Result<globset::GlobMatcher, globset::Error>;
    /// Patterns kept at most; rules are few, but approvals for the session
    /// add some as it goes.
    const KEPT: usize = 1024;
    static COMPILED: LazyLock<Mutex<HashMap<String, Compiled>>> = LazyLock::new(Default::default);
    if let Some(known) = COMPILED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(pattern)
    {
        return known.clone();
    }
    let compiled = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher());
    let mut kept = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    if kept.len() >= KEPT {
        kept.clear();
    }
    kept.insert(pattern.to_owned(), compiled.clone());
    compiled
}

/// `*` matches any run of characters (including none); everything else is
/// literal.
pub(super) use corral_syntax::wildcard;

/// Why a `[guard]` list of globs does not compile; the message names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobsError {
    /// One pattern is not a glob.
    #[error("guard.{key}: `{pattern}` is not a valid glob: {error}")]
    Invalid {
        /// The list's key (`secrets`, `untrusted`, `trusted`).
        key: String,
        /// The pattern, without a leading `./`.
        pattern: String,
        /// Why.
        error: globset::Error,
    },
    /// The set of them cannot be built.
    #[error("guard.{key}: {error}")]
    Set {
        /// The list's key.
        key: String,
        /// Why.
        error: globset::Error,
    },
}

/// For callers whose errors are still text.
impl From<GlobsError> for String {
    fn from(e: GlobsError) -> Self {
        e.to_string()
    }
}

/// Compiles `patterns` (workspace-relative globs); the error names `key`.
pub fn globs<'a>(
    key: &str,
    patterns: impl IntoIterator<Item = &'a str>,
) -> Result<GlobSet, GlobsError> {
    let mut set = GlobSetBuilder::new();
    for p in patterns {
        let p = p.trim_start_matches("./");
        let glob = GlobBuilder::new(p)
            .literal_separator(true)
            .build()
            .map_err(|error| GlobsError::Invalid {
                key: key.to_owned(),
                pattern: p.to_owned(),
                error,
            })?;
        set.add(glob);
    }
    set.build().map_err(|error| GlobsError::Set {
        key: key.to_owned(),
        error,
    })
}
