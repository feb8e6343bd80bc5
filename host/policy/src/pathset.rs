//! A set of workspace-relative path globs matched as globset matches them
//! (`*` within a segment, `**` across segments), where the common forms
//! are matched by comparing bytes: a file name (`**/.env`), its ending
//! (`**/*.pem`), its beginning (`**/id_rsa*`), a directory anywhere
//! (`**/node_modules/**`) or at the top (`target/**`). Every pattern
//! of another form goes to a [`GlobSet`].
//!
//! The guard labels every file a call touched, and a process that makes one
//! call builds its sets once: compiling the defaults into a regular
//! expression set cost more than the call's own checks, and matching a
//! name is cheaper than running a regular expression per path. The unit
//! tests hold every form to globset's answer over a corpus of paths.

use crate::patterns::{GlobsError, globs};
use globset::GlobSet;

/// One pattern of a form matched without a regular expression.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Form {
    /// `**/NAME`: the last segment is `NAME`.
    Name(Vec<u8>),
    /// `**/*SUFFIX`: the last segment ends with `SUFFIX`.
    NameEnds(Vec<u8>),
    /// `**/PREFIX*`: the last segment starts with `PREFIX`.
    NameStarts(Vec<u8>),
    /// `**/DIR/**`: a segment before the last is `DIR`.
    DirAnywhere(Vec<u8>),
    /// `DIR/**`: the first segment is `DIR`, and more follows.
    DirAtTop(Vec<u8>),
}

/// Whether `text` has no glob syntax and no separator: a literal segment.
fn literal_segment(text: &str) -> bool {
    !text.is_empty() && !text.contains(['*', '?', '[', ']', '{', '}', '\\', '/', ','])
}

impl Form {
    /// The form of `pattern`, when it has one of them.
    fn of(pattern: &str) -> Option<Self> {
        if let Some(rest) = pattern.strip_prefix("**/") {
            if let Some(dir) = rest.strip_suffix("/**") {
                return literal_segment(dir).then(|| Self::DirAnywhere(dir.into()));
            }
            if literal_segment(rest) {
                return Some(Self::Name(rest.into()));
            }
            if let Some(suffix) = rest.strip_prefix('*') {
                return literal_segment(suffix).then(|| Self::NameEnds(suffix.into()));
            }
            if let Some(prefix) = rest.strip_suffix('*') {
                return literal_segment(prefix).then(|| Self::NameStarts(prefix.into()));
            }
            return None;
        }
        let dir = pattern.strip_suffix("/**")?;
        literal_segment(dir).then(|| Self::DirAtTop(dir.into()))
    }

    /// Whether `path` (its bytes, segments split by `/`) matches.
    fn matches(&self, path: &[u8], name: &[u8]) -> bool {
        match self {
            Self::Name(n) => name == n.as_slice(),
            Self::NameEnds(s) => name.ends_with(s),
            Self::NameStarts(p) => name.starts_with(p),
            Self::DirAnywhere(d) => {
                // `(^|/)DIR/` anywhere in the path.
                path.windows(d.len() + 1).enumerate().any(|(at, w)| {
                    w[d.len()] == b'/'
                        && &w[..d.len()] == d.as_slice()
                        && (at == 0 || path[at - 1] == b'/')
                })
            }
            Self::DirAtTop(d) => {
                path.len() > d.len() && path.starts_with(d) && path[d.len()] == b'/'
            }
        }
    }
}

/// Workspace-relative path globs, as one set.
#[derive(Debug, Clone)]
pub struct PathSet {
    forms: Vec<Form>,
    /// The patterns of no [`Form`], when there are any.
    rest: Option<GlobSet>,
}

impl PathSet {
    /// `patterns` (a leading `./` is dropped), as one set; the error names
    /// `key` and the pattern that is not a glob.
    pub fn new<'a>(
        key: &str,
        patterns: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, GlobsError> {
        let mut forms = Vec::new();
        let mut rest = Vec::new();
        for pattern in patterns {
            let pattern = pattern.trim_start_matches("./");
            match Form::of(pattern) {
                Some(form) => forms.push(form),
                None => rest.push(pattern),
            }
        }
        let rest = if rest.is_empty() {
            None
        } else {
            Some(globs(key, rest)?)
        };
        Ok(Self { forms, rest })
    }

    /// Whether `path` matches a pattern of the set.
    pub fn is_match(&self, path: impl AsRef<std::path::Path>) -> bool {
        let path = path.as_ref();
        let bytes = path.as_os_str().as_encoded_bytes();
        let name = match bytes.iter().rposition(|&b| b == b'/') {
            Some(at) => &bytes[at + 1..],
            None => bytes,
        };
        self.forms.iter().any(|f| f.matches(bytes, name))
            || self.rest.as_ref().is_some_and(|set| set.is_match(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DEFAULT_SECRETS, DEFAULT_UNTRUSTED};

    /// Segments the corpus is made of: the defaults' names, near misses,
    /// dots, and bytes that are not UTF-8.
    const SEGMENTS: &[&str] = &[
        ".env",
        ".env.",
        ".env.local",
        ".envx",
        "x.env",
        "a.pem",
        ".pem",
        "pem",
        "a.pem.bak",
        "id_rsa",
        "id_rsa.pub",
        "xid_rsa",
        "node_modules",
        "xnode_modules",
        "node_modulesx",
        "target",
        "targets",
        ".venv",
        "vendor",
        "src",
        "credentials.json",
        ".",
        "..",
        "",
        "a b",
    ];

    fn corpus() -> Vec<Vec<u8>> {
        let mut paths: Vec<Vec<u8>> = Vec::new();
        for a in SEGMENTS {
            paths.push(a.as_bytes().to_vec());
            paths.push(format!("/{a}").into_bytes());
            paths.push(format!("{a}/").into_bytes());
            for b in SEGMENTS {
                paths.push(format!("{a}/{b}").into_bytes());
                for c in ["x", "node_modules", ".env", "id_rsa_2", "k.key"] {
                    paths.push(format!("{a}/{b}/{c}").into_bytes());
                    paths.push(format!("{c}/{a}/{b}").into_bytes());
                }
            }
        }
        paths.push(b"node_modules/\xff\xfe".to_vec());
        paths.push(b"\xff/.env".to_vec());
        paths.push(b"a//node_modules//b".to_vec());
        paths
    }

    fn path(bytes: &[u8]) -> &std::path::Path {
        use std::os::unix::ffi::OsStrExt as _;
        std::path::Path::new(std::ffi::OsStr::from_bytes(bytes))
    }

    #[test]
    fn every_form_matches_what_globset_matches() {
        let mut patterns: Vec<&str> = DEFAULT_SECRETS.to_vec();
        patterns.extend(DEFAULT_UNTRUSTED);
        patterns.extend(["**/a b", "**/*.json", "src/**", "**/src/**", "**/.env*"]);
        let corpus = corpus();
        for pattern in patterns {
            let ours = PathSet::new("t", [pattern]).unwrap();
            assert!(ours.rest.is_none(), "`{pattern}` has a form");
            let theirs = globs("t", [pattern]).unwrap();
            for bytes in &corpus {
                let p = path(bytes);
                assert_eq!(
                    ours.is_match(p),
                    theirs.is_match(p),
                    "`{pattern}` on {:?}",
                    String::from_utf8_lossy(bytes)
                );
            }
        }
    }

    #[test]
    fn other_patterns_go_to_globset_and_errors_name_them() {
        for pattern in [
            "src/*.rs",
            "**/a?c",
            "a/**/b",
            "**/*.{pem,key}",
            "x",
            "**/[ab]",
        ] {
            let ours = PathSet::new("t", [pattern]).unwrap();
            assert!(ours.forms.is_empty(), "`{pattern}` has no form");
            let theirs = globs("t", [pattern]).unwrap();
            for bytes in &corpus() {
                let p = path(bytes);
                assert_eq!(ours.is_match(p), theirs.is_match(p), "`{pattern}`");
            }
        }
        let err = PathSet::new("secrets", ["**/.env", "a/[b"]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("guard.secrets: `a/[b` is not a valid glob")
        );
    }

    #[test]
    fn a_leading_dot_slash_is_dropped_and_the_empty_set_matches_nothing() {
        let set = PathSet::new("t", ["./target/**"]).unwrap();
        assert!(set.is_match("target/debug/x"));
        assert!(!set.is_match("target"));
        let none = PathSet::new("t", []).unwrap();
        assert!(!none.is_match("anything") && !none.is_match(""));
    }
}
