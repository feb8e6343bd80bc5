//! Checks on text a test got back (a command's output, a file, a screen),
//! each failing with the text in full; and the tail of a text too long to
//! show whole.

/// Fails the test, showing `text`, unless it contains `needle`.
#[track_caller]
pub fn has(text: &str, needle: impl AsRef<str>) {
    let needle = needle.as_ref();
    assert!(text.contains(needle), "no {needle:?} in:\n{text}");
}

/// Fails the test, showing `text`, if it contains `needle`.
#[track_caller]
pub fn lacks(text: &str, needle: impl AsRef<str>) {
    let needle = needle.as_ref();
    assert!(!text.contains(needle), "{needle:?} in:\n{text}");
}

/// Fails the test, showing `text`, unless it contains every one of `needles`.
#[track_caller]
pub fn has_all(text: &str, needles: &[&str]) {
    for needle in needles {
        has(text, needle);
    }
}

/// Fails the test, showing `text`, if it contains any of `needles`.
#[track_caller]
pub fn lacks_all(text: &str, needles: &[&str]) {
    for needle in needles {
        lacks(text, needle);
    }
}

/// About the last `n` bytes of `text` (from a character's start), to show
/// in a failure message when the whole would be too long.
pub fn tail(text: &str, n: usize) -> &str {
    let mut at = text.len().saturating_sub(n);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    &text[at..]
}

/// Fails the test, showing `text`, unless it contains each of `needles`
/// after the one before.
#[track_caller]
pub fn has_in_order(text: &str, needles: &[&str]) {
    let mut rest = text;
    for needle in needles {
        let at = rest
            .find(needle)
            .unwrap_or_else(|| panic!("`{needle}` missing or out of order in:\n{text}"));
        rest = &rest[at + needle.len()..];
    }
}
