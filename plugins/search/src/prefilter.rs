//! A faster way to find candidate lines for patterns that are a few
//! literals (`TODO|FIXME`, `[Tt]odo`), for the sandboxed search.
//!
//! Natively, ripgrep's regex engine finds a few literals at once with
//! Teddy, a SIMD algorithm that exists only for x86-64 and aarch64. Compiled
//! to wasm it falls back to an Aho-Corasick automaton stepped byte by byte,
//! which made `TODO|FIXME` five times slower than `TODO` alone over the same
//! tree. memchr's `memmem` does have a wasm SIMD version, so for up to
//! [`MAX_LITERALS`] literals this searches for each one with its own
//! `memmem` finder, remembers where each was found next, and reports the
//! earliest as a candidate line, which the searcher then verifies with the
//! full regex. Each literal's scan moves forward only, so a buffer costs one
//! pass per literal however many matches it holds.

use grep_matcher::{LineMatchKind, LineTerminator, Match, Matcher, NoError};
use grep_regex::RegexMatcher;
use memchr::memmem::Finder;
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use std::cell::RefCell;

/// Literals searched for one by one at most; beyond this one automaton
/// over all of them costs less than a pass per literal.
const MAX_LITERALS: usize = 8;

/// A [`RegexMatcher`] whose candidate lines come from per-literal `memmem`
/// scans. Only for [`grep_searcher::Searcher::search_slice`], with
/// [`Prefiltered::start`] called before each buffer: the scans' positions
/// are remembered relative to the end of the buffer being searched.
pub(crate) struct Prefiltered<'a> {
    inner: &'a RegexMatcher,
    finders: Vec<Finder<'static>>,
    next: RefCell<Next>,
}

/// Where each literal was found next in the buffer being searched, as
/// distances from the buffer's end (the searcher passes ever shorter tails
/// of one buffer, which all share its end).
#[derive(Default)]
struct Next {
    /// Address one past the buffer's last byte; 0 before the first scan.
    end: usize,
    /// Per literal: the distance from the end at which its last scan
    /// started, and where it found the literal (`None`: nowhere after).
    scans: Vec<Option<(usize, Option<usize>)>>,
}

impl<'a> Prefiltered<'a> {
    /// A prefiltered `inner` when every match of `pattern` (as `inner` was
    /// built from it) begins with one of a few literals; `None` otherwise,
    /// or when the regex engine's own search is as good (one literal).
    pub(crate) fn new(
        inner: &'a RegexMatcher,
        pattern: &str,
        ignore_case: bool,
        fixed_strings: bool,
    ) -> Option<Self> {
        let pattern = if fixed_strings {
            regex_syntax::escape(pattern)
        } else {
            pattern.to_owned()
        };
        let hir = regex_syntax::ParserBuilder::new()
            .case_insensitive(ignore_case)
            .build()
            .parse(&pattern)
            .ok()?;
        let mut seq = Extractor::new().kind(ExtractKind::Prefix).extract(&hir);
        seq.dedup();
        let literals = seq.literals()?;
        if literals.len() < 2
            || literals.len() > MAX_LITERALS
            || literals.iter().any(|l| l.as_bytes().is_empty())
        {
            return None;
        }
        let finders = literals
            .iter()
            .map(|l| Finder::new(l.as_bytes()).into_owned())
            .collect();
        Some(Self {
            inner,
            finders,
            next: RefCell::new(Next::default()),
        })
    }

    /// Forgets the positions found in the previous buffer; call before
    /// searching another one (it may lie at the same address).
    pub(crate) fn start(&self) {
        let mut next = self.next.borrow_mut();
        next.end = 0;
        next.scans.clear();
        next.scans.resize(self.finders.len(), None);
    }
}

impl Matcher for Prefiltered<'_> {
    type Captures = <RegexMatcher as Matcher>::Captures;
    type Error = NoError;

    fn find_at(&self, haystack: &[u8], at: usize) -> Result<Option<Match>, NoError> {
        self.inner.find_at(haystack, at)
    }

    fn new_captures(&self) -> Result<Self::Captures, NoError> {
        self.inner.new_captures()
    }

    fn captures_at(
        &self,
        haystack: &[u8],
        at: usize,
        caps: &mut Self::Captures,
    ) -> Result<bool, NoError> {
        self.inner.captures_at(haystack, at, caps)
    }

    fn shortest_match(&self, haystack: &[u8]) -> Result<Option<usize>, NoError> {
        self.inner.shortest_match(haystack)
    }

    fn is_match(&self, haystack: &[u8]) -> Result<bool, NoError> {
        self.inner.is_match(haystack)
    }

    fn line_terminator(&self) -> Option<LineTerminator> {
        self.inner.line_terminator()
    }

    fn non_matching_bytes(&self) -> Option<&grep_matcher::ByteSet> {
        self.inner.non_matching_bytes()
    }

    fn find_candidate_line(&self, haystack: &[u8]) -> Result<Option<LineMatchKind>, NoError> {
        let len = haystack.len();
        let end = haystack.as_ptr() as usize + len;
        let mut next = self.next.borrow_mut();
        if next.end != end {
            next.end = end;
            next.scans.clear();
            next.scans.resize(self.finders.len(), None);
        }
        // The earliest hit, as the largest distance from the end.
        let mut earliest: Option<usize> = None;
        for (finder, scan) in self.finders.iter().zip(next.scans.iter_mut()) {
            let hit = match *scan {
                // A scan that started at or before this tail: its answer
                // holds unless the hit lies before the tail's start.
                Some((from, found)) if from >= len && found.is_none_or(|d| d <= len) => found,
                _ => {
                    let found = finder.find(haystack).map(|p| len - p);
                    *scan = Some((len, found));
                    found
                }
            };
            if let Some(d) = hit {
                earliest = Some(earliest.map_or(d, |e| e.max(d)));
            }
        }
        Ok(earliest.map(|d| LineMatchKind::Candidate(len - d)))
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first surprise"
)]
mod tests {
    use super::*;
    use grep_regex::RegexMatcherBuilder;
    use grep_searcher::{SearcherBuilder, sinks::UTF8};

    fn lines(matcher: &impl Matcher, text: &[u8]) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        SearcherBuilder::new()
            .line_number(true)
            .build()
            .search_slice(
                matcher,
                text,
                UTF8(|n, l| {
                    out.push((n, l.to_owned()));
                    Ok(true)
                }),
            )
            .unwrap();
        out
    }

    #[test]
    fn finds_the_same_lines_as_the_regex_alone() {
        let text = b"a TODO\nnothing\nFIXME and TODO\nx\nfixme\nTODOFIXME\n\
            long line without either of them at all\nlast FIXME";
        for (pattern, ignore_case) in [
            ("TODO|FIXME", false),
            ("TODO|FIXME", true),
            ("[Tt]odo|FIX(ME)?", false),
            ("(TODO|FIXME): \\w+", false),
            ("FIXME|zzz", false),
        ] {
            let inner = RegexMatcherBuilder::new()
                .case_insensitive(ignore_case)
                .build(pattern)
                .unwrap();
            let expected = lines(&inner, text);
            match Prefiltered::new(&inner, pattern, ignore_case, false) {
                Some(fast) => {
                    // Twice: the second buffer starts afresh.
                    for _ in 0..2 {
                        fast.start();
                        assert_eq!(lines(&fast, text), expected, "{pattern}");
                    }
                }
                None => assert!(ignore_case, "{pattern} was not prefiltered"),
            }
        }
    }

    #[test]
    fn is_left_out_where_the_regex_engine_does_as_well() {
        let inner = RegexMatcherBuilder::new().build("x").unwrap();
        for pattern in ["TODO", "fn \\w+", "a|b*", ".*"] {
            assert!(
                Prefiltered::new(&inner, pattern, false, false).is_none(),
                "{pattern}"
            );
        }
        assert!(Prefiltered::new(&inner, "a.b|c", false, true).is_none());
        assert!(Prefiltered::new(&inner, "TODO|FIXME", false, false).is_some());
    }
}
