//! The first-party plugins (`builtin:fs`, `builtin:search`) as component
//! bytes, built from `plugins/` by this crate's build script.

include!(concat!(env!("OUT_DIR"), "/plugins.rs"));

/// The component bytes of the built-in plugin `name`, if there is one.
pub fn get(name: &str) -> Option<&'static [u8]> {
    PLUGINS.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}
