//! The error a test guest reports for a failed filesystem call. Included
//! with `#[path = "../../shared/io.rs"] mod io;`.

use corral_sdk::Error;

/// `Failed`, naming `what` was attempted and the kind of `e`.
pub fn io(what: &str, e: std::io::Error) -> Error {
    Error::Failed(format!("{what}: {:?}: {e}", e.kind()))
}
