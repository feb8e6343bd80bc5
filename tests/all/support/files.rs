//! Files a test puts in place or fingerprints.

use crate::Sandbox;
use sha2::Digest as _;
use std::path::Path;

/// The SHA-256 of the file at `path`, in lowercase hex.
pub fn sha256_of(path: impl AsRef<Path>) -> String {
    hex::encode(sha2::Sha256::digest(
        std::fs::read(path).expect("read component"),
    ))
}

/// Puts a copy of the component `from` at `rel` in the workspace.
pub fn place(sb: &Sandbox, from: &str, rel: &str) {
    let to = sb.ws().join(rel);
    std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
    // Replaced, not rewritten in place, as a build or a checkout would.
    let tmp = to.with_extension("new");
    std::fs::copy(from, &tmp).expect("copy component");
    std::fs::rename(&tmp, &to).expect("rename component");
}

/// Fails the test, saying `why`, if `rel` exists in the workspace.
#[track_caller]
pub fn assert_absent(sb: &Sandbox, rel: &str, why: &str) {
    assert!(!sb.ws().join(rel).exists(), "{rel} exists: {why}");
}
