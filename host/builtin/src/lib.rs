//! The first-party plugins (`builtin:fs`, `builtin:search`, …) as component
//! bytes, built from `plugins/` by this crate's build script, and the same
//! plugins compiled to native code by that script with the runtime's engine
//! configuration (`corral_engine::config`), so that a user's first command
//! compiles none of them.

include!(concat!(env!("OUT_DIR"), "/plugins.rs"));

/// The component bytes of the built-in plugin `name`, if there is one.
pub fn get(name: &str) -> Option<&'static [u8]> {
    PLUGINS.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// The built-in plugin `name` as the build compiled it: the SHA-256 of its
/// component (hex) and the compiled code, which only an engine whose
/// `corral_engine::compatibility_key` is [`ENGINE_KEY`] may load.
pub fn precompiled(name: &str) -> Option<(&'static str, &'static [u8])> {
    PRECOMPILED
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, sha256, code)| (*sha256, *code))
}

#[cfg(test)]
mod tests {
    /// The manifest checks `builtin:NAME` against the protocol's list
    /// without embedding the plugins, so that list must name exactly
    /// what this crate builds, in the same order (the order users see in
    /// the manifest's error).
    #[test]
    fn the_protocol_lists_every_built_plugin() {
        let built: Vec<&str> = super::PLUGINS.iter().map(|(name, _)| *name).collect();
        assert_eq!(built, corral_protocol::BUILTIN_PLUGINS);
    }
}
