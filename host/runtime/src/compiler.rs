//! Compiling and linking a plugin's component, at load or on its first
//! call ([`Compiler`]): a built-in from the code the build compiled, else
//! from the compile cache or compiled now, its imports checked, linked once
//! per component. Entries with the same component share one compiled copy.

use super::cache::{self, CacheOutcome};
use super::error::LoadError;
use super::sandbox::{HostLinker, LinkError, PluginKind};
use crate::manifest::{PluginDecl, Source};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wasmtime::Engine;
use wasmtime::component::Component;

/// A plugin's compiled and linked code.
pub(super) struct Code {
    pub(super) kind: PluginKind,
    /// Whether it was compiled or came from the compile cache.
    pub(super) outcome: CacheOutcome,
}

/// The components of one load, by SHA-256.
#[derive(Default)]
struct Components {
    compiled: HashMap<String, (Component, Vec<String>, CacheOutcome)>,
    linked: HashMap<String, PluginKind>,
}

/// What compiling and linking an entry needs, at load or on its first call;
/// shared by the plugins of one load, so that entries with the same
/// component share one compiled copy whenever each is compiled.
pub(super) struct Compiler {
    pub(super) engine: Engine,
    linker: Arc<HostLinker>,
    cache: Arc<cache::Cache>,
    components: Mutex<Components>,
}

/// A compiled and linked component, as one entry gets it.
pub(super) struct Compiled {
    /// The interfaces it imports, sorted.
    pub(super) imports: Vec<String>,
    /// The code to instantiate.
    pub(super) code: Code,
}

impl Compiler {
    /// A compiler for `engine` that links with `linker` and keeps what it
    /// compiles in `cache`.
    pub(super) fn new(engine: Engine, linker: Arc<HostLinker>, cache: Arc<cache::Cache>) -> Self {
        Self {
            engine,
            linker,
            cache,
            components: Mutex::default(),
        }
    }

    /// Compiles (or loads from the compile cache) `decl`'s component, whose
    /// bytes were checked to have the SHA-256 `sha256`, refuses imports
    /// corral does not provide, and links it. `bytes` are the checked bytes
    /// when the caller still holds them; otherwise, if the component must be
    /// compiled, its source is read again and must still have that hash.
    pub(super) fn compile(
        &self,
        decl: &PluginDecl,
        sha256: &str,
        bytes: Option<&[u8]>,
    ) -> Result<Compiled, LoadError> {
        let name = &decl.name;
        let known = self
            .components
            .lock()
            .ok()
            .and_then(|c| c.compiled.get(sha256).cloned());
        let (component, imports, outcome) = match known {
            Some(known) => {
                tracing::debug!(plugin = %name, "shares the component {sha256} loaded for another entry");
                known
            }
            None => {
                let started = Instant::now();
                let (component, outcome) = self.compile_new(decl, sha256, bytes)?;
                let elapsed = started.elapsed();
                match outcome {
                    CacheOutcome::Precompiled => {
                        tracing::info!(plugin = %name, "precompiled by the build ({elapsed:.1?})")
                    }
                    CacheOutcome::Hit => {
                        tracing::info!(plugin = %name, "compile cache hit ({elapsed:.1?})")
                    }
                    CacheOutcome::Compiled => {
                        tracing::info!(plugin = %name, "compiled ({elapsed:.1?})")
                    }
                }
                let imports = import_names(&self.engine, &component);
                if let Ok(mut c) = self.components.lock() {
                    c.compiled.insert(
                        sha256.to_owned(),
                        (component.clone(), imports.clone(), outcome),
                    );
                }
                (component, imports, outcome)
            }
        };
        super::imports::check(decl, &imports)?;
        let kind = self.link(decl, sha256, &component)?;
        Ok(Compiled {
            imports,
            code: Code { kind, outcome },
        })
    }

    /// Lets go of the component with the SHA-256 `sha256` and its link: an
    /// entry or call that needs it later loads it again. Entries holding it
    /// keep their own copy.
    pub(super) fn forget(&self, sha256: &str) {
        if let Ok(mut c) = self.components.lock() {
            c.compiled.remove(sha256);
            c.linked.remove(sha256);
        }
    }

    /// `decl`'s component, not yet loaded by this load: a built-in from the
    /// code the build compiled, else from the compile cache or compiled now
    /// (with a progress line when that takes a while).
    fn compile_new(
        &self,
        decl: &PluginDecl,
        sha256: &str,
        bytes: Option<&[u8]>,
    ) -> Result<(Component, CacheOutcome), LoadError> {
        let name = &decl.name;
        let mut why_compiled = None;
        if let Source::Builtin(b) = &decl.source {
            match super::precompiled::load(&self.engine, &self.cache, b, sha256) {
                Ok(component) => return Ok((component, CacheOutcome::Precompiled)),
                Err(why) => {
                    tracing::info!(plugin = %name, "built-in `{b}` not precompiled for this engine ({why}); compiling it");
                    why_compiled = Some(why);
                }
            }
        }
        let mut changed = None;
        // Started only on a miss, just before the compile; dropped (which
        // reports the end) when the component is ready.
        let mut progress = None;
        let loaded = self.cache.load_with(&self.engine, sha256, || {
            let bytes = match bytes {
                Some(b) => Cow::Borrowed(b),
                None => reread(decl, sha256).map_err(|why| {
                    changed = Some(why.clone());
                    wasmtime::format_err!("{why}")
                })?,
            };
            // A file that is no component says what it is and how to make
            // one, instead of the compiler's account of its first bytes.
            if let Some(why) = not_a_component(&bytes) {
                let why = format!("plugin `{name}` ({}): {why}", decl.origin);
                changed = Some(why.clone());
                return Err(wasmtime::format_err!("{why}"));
            }
            progress = Some(super::progress::Watch::start(name, why_compiled));
            Ok(bytes)
        });
        drop(progress);
        match (loaded, changed) {
            (Ok(loaded), _) => Ok(loaded),
            (Err(_), Some(why)) => Err(LoadError(why)),
            (Err(e), None) => Err(LoadError(format!(
                "plugin `{name}` ({}): not a valid component: {e:#}",
                decl.origin
            ))),
        }
    }

    /// Links `component` against the host's imports (once per component)
    /// and tells what kind of plugin it is.
    fn link(
        &self,
        decl: &PluginDecl,
        sha256: &str,
        component: &Component,
    ) -> Result<PluginKind, LoadError> {
        let known = self
            .components
            .lock()
            .ok()
            .and_then(|c| c.linked.get(sha256).cloned());
        if let Some(kind) = known {
            return Ok(kind);
        }
        let name = &decl.name;
        let kind = self.linker.link(component).map_err(|e| match e {
            LinkError::Unlinkable(e) => LoadError(format!(
                "plugin `{name}` ({}): cannot be linked: {e}",
                decl.origin
            )),
            LinkError::NoExport(e) => LoadError(format!(
                "plugin `{name}` ({}): exports none of corral:plugin/tool@0.1.0, corral:plugin/provider@0.1.0 and corral:plugin/hook@0.1.0: {e}",
                decl.origin
            )),
        })?;
        if let Ok(mut c) = self.components.lock() {
            c.linked.insert(sha256.to_owned(), kind.clone());
        }
        Ok(kind)
    }
}

/// The bytes of `decl`'s component: built in, or read from its file.
pub(super) fn source_bytes(decl: &PluginDecl) -> Result<Cow<'static, [u8]>, String> {
    let name = &decl.name;
    match &decl.source {
        Source::Builtin(b) => corral_builtin::get(b)
            .map(Cow::Borrowed)
            .ok_or_else(|| format!("plugin `{name}`: no built-in plugin `{b}`")),
        Source::File { path, .. } => crate::trust::read_plugin_file(path)
            .map(Cow::Owned)
            .map_err(|e| {
                format!(
                    "plugin `{name}` ({}): cannot read {}: {e}",
                    decl.origin,
                    path.display()
                )
            }),
    }
}

/// `decl`'s component read again to be compiled, refused unless it still
/// has the hash `sha256` that its pin and trust record were checked
/// against when the manifest loaded.
fn reread(decl: &PluginDecl, sha256: &str) -> Result<Cow<'static, [u8]>, String> {
    let bytes = source_bytes(decl)?;
    let now = crate::trust::sha256_hex(&bytes);
    if now != sha256 {
        return Err(format!(
            "plugin `{}` ({}): {} changed since corral loaded it (sha256 {sha256}, now {now}); \
             run the command again to check the new file against its pin and trust record",
            decl.name, decl.origin, decl.source
        ));
    }
    Ok(bytes)
}

/// Why `bytes` cannot be a WebAssembly component, told so that the user
/// can act on it: not WebAssembly at all, or a core module that must first
/// become a component. `None` when the header is a component's.
pub(super) fn not_a_component(bytes: &[u8]) -> Option<String> {
    const MAGIC: &[u8] = b"\0asm";
    const MAKE: &str = "build the plugin for the `wasm32-wasip2` target (`cargo build --target \
                        wasm32-wasip2 --release`, or `corral new` and the SDK for Python or \
                        JavaScript), or turn a core module into a component with `wasm-tools \
                        component new MODULE.wasm -o COMPONENT.wasm` (add `--adapt` with the WASI \
                        preview-1 adapter for a wasip1 module)";
    if bytes.get(..4) != Some(MAGIC) {
        let kind = if bytes.is_empty() {
            "the file is empty".to_owned()
        } else if std::str::from_utf8(&bytes[..bytes.len().min(512)]).is_ok() {
            "the file is text, not WebAssembly".to_owned()
        } else {
            "the file does not start with the WebAssembly magic bytes `\\0asm`".to_owned()
        };
        return Some(format!(
            "`source` must be a WebAssembly component (.wasm), but {kind}; {MAKE}"
        ));
    }
    // Bytes 4..8: a core module has version 1 and layer 0; a component
    // has layer 1.
    match bytes.get(4..8) {
        Some([1, 0, 0, 0]) => Some(format!(
            "`source` is a core WebAssembly module, and corral runs only components (the \
             component model's wasm, which declares its imports and exports by interface); \
             {MAKE}"
        )),
        Some([_, _, 1, 0]) => None,
        _ => Some(format!(
            "`source` is WebAssembly of an unknown version or layer, not a component corral \
             can run; {MAKE}"
        )),
    }
}

/// The names of everything `component` imports, sorted.
pub(super) fn import_names(engine: &Engine, component: &Component) -> Vec<String> {
    let mut names: Vec<String> = component
        .component_type()
        .imports(engine)
        .map(|(n, _)| n.to_owned())
        .collect();
    names.sort();
    names
}
