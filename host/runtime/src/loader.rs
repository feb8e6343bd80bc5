//! Loading plugins: a whole manifest, one entry, or a component to inspect.
//!
//! A load reads every entry's component and checks its hash against the
//! manifest's `sha256` pin and the project's trust record before anything
//! else. Then it looks for the entry's tools in the description cache
//! (`descriptions`): an entry found there is not compiled, linked or
//! instantiated now, only on its first call (see [`Plugin`]), and when
//! that happens with no compiled copy in the compile cache, the file is read
//! again and must still have the hash that was checked. Its imports are
//! checked from the cached list at once, as for any other entry.
//!
//! Entries not found there are compiled at load. Entries that name the same
//! component (by SHA-256) share one compiled `Component` and one linked
//! `InstancePre`: compiled code costs megabytes per copy, an entry only its
//! settings. Everything that needs no plugin code to run is checked for
//! every entry before any is instantiated: pins, trust records, imports
//! (only interfaces corral does not provide are refused; what its grants do
//! not cover is denied per call), and linking.
//!
//! Then `describe` runs for the entries whose tools were not cached, and
//! what they answer is cached. Two entries that run the same component with
//! the same settings (config, grants, limits) give it the same inputs, so
//! they describe the same tools: such twins are described once, and if that
//! one exports any tool the clash is reported at once, before the other
//! plugins run. Everything else is described once per entry, the tool names
//! checked as each answers.

use super::cache::CacheOutcome;
use super::descriptions::{Described, Descriptions};
use super::imports::ImportReview;
use super::plugin::Code;
use super::plugin::{Plugin, PluginKind};
use super::registry::Plugins;
use super::store::{CallState, PluginShared};
use super::{Runtime, cache, fsguard};
use crate::manifest::{Manifest, Origin, PluginDecl, Source};
use crate::protocol::ToolSpec;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

/// A plugin that could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

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
    engine: Engine,
    linker: Arc<Linker<CallState>>,
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
    fn new(rt: &Runtime) -> Self {
        Self {
            engine: rt.engine.clone(),
            linker: rt.linker.clone(),
            cache: rt.cache.clone(),
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
        super::imports::check(decl, &imports).map_err(LoadError)?;
        let kind = self.link(decl, sha256, &component)?;
        Ok(Compiled {
            imports,
            code: Code { kind, outcome },
        })
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
        let pre = self.linker.instantiate_pre(component).map_err(|e| {
            LoadError(format!(
                "plugin `{name}` ({}): cannot be linked: {e:#}",
                decl.origin
            ))
        })?;
        let kind = PluginKind::of(pre).map_err(|e| {
            LoadError(format!(
                "plugin `{name}` ({}): exports none of corral:plugin/tool@0.1.0, corral:plugin/provider@0.1.0 and corral:plugin/hook@0.1.0: {e}",
                decl.origin
            ))
        })?;
        if let Ok(mut c) = self.components.lock() {
            c.linked.insert(sha256.to_owned(), kind.clone());
        }
        Ok(kind)
    }
}

/// A component's SHA-256 and, when they were read to hash them, its bytes.
type Identified = (String, Option<Cow<'static, [u8]>>);

/// Tells `decl`'s component by its SHA-256 and checks that hash against
/// the manifest's pin and the project's trust record. Returns the hash and,
/// when they had to be read for it, the bytes.
///
/// A built-in's hash was recorded by the build. A file's comes from the
/// verified-hash cache when the file still has the identity it had when it
/// was hashed (see `hashes`); otherwise the file is read and hashed now.
/// Either way nothing compiles bytes without hashing them there (`reread`).
fn identify(rt: &Runtime, decl: &PluginDecl, manifest: &Manifest) -> Result<Identified, LoadError> {
    let name = &decl.name;
    let (sha256, bytes) = match &decl.source {
        Source::Builtin(b) => match super::precompiled::sha256(b) {
            Some(sha256) => (sha256.to_owned(), None),
            None => {
                let bytes = source_bytes(decl).map_err(LoadError)?;
                (crate::trust::sha256_hex(&bytes), Some(bytes))
            }
        },
        Source::File { path, .. } => match rt.hashes.get(path) {
            Some(sha256) => {
                tracing::debug!(plugin = %name, "hash of {} from the verified-hash cache", path.display());
                (sha256, None)
            }
            None => {
                let started = Instant::now();
                let (bytes, identity) = read_file(decl, path).map_err(LoadError)?;
                let sha256 = crate::trust::sha256_hex(&bytes);
                if let Some(identity) = identity {
                    rt.hashes.put(&identity, &sha256);
                }
                tracing::debug!(
                    plugin = %name,
                    "read and hashed {} ({} bytes, {:.1?})",
                    path.display(),
                    bytes.len(),
                    started.elapsed()
                );
                (sha256, Some(Cow::Owned(bytes)))
            }
        },
    };
    if let Source::File {
        sha256: Some(pin),
        path,
    } = &decl.source
        && *pin != sha256
    {
        return Err(LoadError(format!(
            "plugin `{name}` ({}): {} has sha256 {sha256}, but the manifest pins {pin}; \
             the file changed. Check where it came from, then update `sha256` to approve it",
            decl.origin,
            path.display()
        )));
    }
    crate::trust::check_file(decl, manifest, &sha256).map_err(|e| LoadError(e.to_string()))?;
    Ok((sha256, bytes))
}

/// The bytes of `decl`'s component: built in, or read from its file.
fn source_bytes(decl: &PluginDecl) -> Result<Cow<'static, [u8]>, String> {
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

/// Reads the plugin file `path` of `decl` whole, with its identity when it
/// kept the same one while it was read (else `None`: it is being written,
/// and its hash must not be remembered).
fn read_file(
    decl: &PluginDecl,
    path: &std::path::Path,
) -> Result<(Vec<u8>, Option<super::hashes::Identity>), String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let cannot = |e: &dyn std::fmt::Display| {
        format!(
            "plugin `{}` ({}): cannot read {}: {e}",
            decl.name,
            decl.origin,
            path.display()
        )
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(crate::fsread::OPEN_FLAGS)
        .open(path)
        .map_err(|e| cannot(&e))?;
    let before = file.metadata().map_err(|e| cannot(&e))?;
    let reader = file.try_clone().map_err(|e| cannot(&e))?;
    let bytes =
        crate::fsread::read_open(reader, crate::trust::MAX_PLUGIN_FILE).map_err(|e| cannot(&e))?;
    let after = file.metadata().map_err(|e| cannot(&e))?;
    let (before, after) = (
        super::hashes::Identity::of(&before),
        super::hashes::Identity::of(&after),
    );
    Ok((bytes, (before == after).then_some(after)))
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

/// Loads every plugin of `manifest`; see the module documentation.
pub(super) async fn load(rt: &Runtime, manifest: &Manifest) -> Result<Plugins, LoadError> {
    // Before any plugin runs: a crash may have left a file change half
    // made, and a tool must not read or write over it.
    let recovered = super::writes::recover(&manifest.workspace);
    let compiler = Arc::new(Compiler::new(rt));
    let mut plugins = Vec::with_capacity(manifest.plugins.len());
    let mut keys = Vec::with_capacity(manifest.plugins.len());
    // Whether each plugin's tools are known (from the description cache).
    let mut described = Vec::with_capacity(manifest.plugins.len());
    for decl in &manifest.plugins {
        let (sha256, bytes) = identify(rt, decl, manifest)?;
        let key = Descriptions::key(decl, manifest, &sha256);
        let plugin = match rt.descriptions.get(&key, &sha256) {
            Some(cached) => {
                super::imports::check(decl, &cached.imports).map_err(LoadError)?;
                tracing::info!(
                    plugin = %decl.name,
                    "tools from the description cache; the component is loaded only when a call \
                     first needs it"
                );
                let mut plugin = entry(
                    &compiler,
                    decl,
                    manifest,
                    sha256,
                    cached.imports,
                    cached.provider,
                    None,
                )?;
                plugin.tools = cached.tools;
                described.push(true);
                plugin
            }
            None => {
                described.push(false);
                compiled_entry(&compiler, decl, manifest, sha256, bytes.as_deref())?
            }
        };
        keys.push(key);
        plugins.push(plugin);
    }

    let remember = |plugin: &Plugin, key: &str| {
        rt.descriptions.put(
            key,
            &Described {
                sha256: plugin.sha256.clone(),
                provider: plugin.provider,
                imports: plugin.imports.clone(),
                tools: plugin.tools.clone(),
            },
        );
    };
    let twin_of: Vec<Option<usize>> = (0..plugins.len())
        .map(|i| (0..i).find(|&j| twins(&plugins[j], &plugins[i])))
        .collect();
    // Whether each answer may be cached (every cached one may).
    let mut cacheable = described.clone();
    for (i, twin) in twin_of.iter().enumerate() {
        let Some(j) = *twin else { continue };
        if !described[j] {
            let (tools, may_cache) = plugins[j].describe().await?;
            plugins[j].tools = tools;
            described[j] = true;
            cacheable[j] = may_cache;
            if may_cache {
                remember(&plugins[j], &keys[j]);
            }
        }
        if let Some(tool) = plugins[j].tools.first() {
            let (first, second) = (&plugins[j], &plugins[i]);
            return Err(LoadError(format!(
                "tool `{}` is exported by two plugins: `{}` ({}) and `{}` ({}), which run the same \
                 component (sha256 {}) with the same settings, so they export the same tools; \
                 give one of them a `tool_prefix` (e.g. `tool_prefix = \"{}_\"` in \
                 [plugins.{}], which renames its tools), or remove one or set `enabled = false` \
                 on it",
                tool.name,
                first.decl.name,
                first.decl.origin,
                second.decl.name,
                second.decl.origin,
                first.sha256,
                suggested_prefix(&second.decl.name),
                second.decl.name,
            )));
        }
        // It would answer as its twin did: no tools.
        if !described[i] && cacheable[j] {
            remember(&plugins[i], &keys[i]);
        }
    }

    let mut owner: HashMap<String, usize> = HashMap::new();
    for i in 0..plugins.len() {
        // A twin of a plugin with no tools has none either.
        if twin_of[i].is_some() {
            continue;
        }
        if !described[i] {
            let (tools, cacheable) = plugins[i].describe().await?;
            plugins[i].tools = tools;
            if cacheable {
                remember(&plugins[i], &keys[i]);
            }
        }
        for tool in &plugins[i].tools {
            if let Some(&j) = owner.get(&tool.name) {
                return Err(clash(&tool.name, &plugins[j], &plugins[i]));
            }
            owner.insert(tool.name.clone(), i);
        }
    }
    let withheld = super::vetting::vet(manifest, &mut plugins);
    let mut plugins = Plugins::new(plugins.into_iter().map(Arc::new).collect(), withheld)?;
    plugins.recovered = recovered;
    Ok(plugins)
}

/// Loads one plugin without the description cache: compiled, linked and
/// described now.
pub(super) async fn load_one(
    rt: &Runtime,
    decl: &PluginDecl,
    manifest: &Manifest,
) -> Result<Plugin, LoadError> {
    let compiler = Arc::new(Compiler::new(rt));
    let (sha256, bytes) = identify(rt, decl, manifest)?;
    let mut plugin = compiled_entry(&compiler, decl, manifest, sha256, bytes.as_deref())?;
    plugin.tools = plugin.describe().await?.0;
    Ok(plugin)
}

/// Compiles `decl`'s component (or takes it from the cache) and makes its
/// entry, code included.
fn compiled_entry(
    compiler: &Arc<Compiler>,
    decl: &PluginDecl,
    manifest: &Manifest,
    sha256: String,
    bytes: Option<&[u8]>,
) -> Result<Plugin, LoadError> {
    let compiled = compiler.compile(decl, &sha256, bytes)?;
    let provider = compiled.code.kind.is_provider();
    entry(
        compiler,
        decl,
        manifest,
        sha256,
        compiled.imports,
        provider,
        Some(compiled.code),
    )
}

/// The plugin of `decl`, whose component has the SHA-256 `sha256`, with its
/// code when it is compiled already (else on its first call).
fn entry(
    compiler: &Arc<Compiler>,
    decl: &PluginDecl,
    manifest: &Manifest,
    sha256: String,
    imports: Vec<String>,
    provider: bool,
    code: Option<Code>,
) -> Result<Plugin, LoadError> {
    let name = &decl.name;
    Ok(Plugin {
        engine: compiler.engine.clone(),
        shared: Arc::new(PluginShared {
            guard: fsguard::Guard::new(Some(&manifest.workspace), &decl.source)
                .map(Arc::new)
                .map_err(|e| {
                    LoadError(format!(
                        "plugin `{name}`: the workspace {} cannot be opened: {e}",
                        manifest.workspace.display()
                    ))
                })?,
            journal: super::writes::journal_dir(&manifest.workspace),
            connections: Arc::default(),
            name: name.as_str().into(),
            origin: decl.origin.to_string().into(),
            config: decl.config.clone(),
            fs: decl.fs.clone().into(),
            exec: (!decl.exec.is_empty()).then(|| {
                Arc::new(crate::exec::Exec {
                    plugin: name.clone(),
                    grants: decl.exec.clone(),
                    workspace: manifest.workspace.clone(),
                    env: decl.env.clone(),
                    // stdout and stderr each get a quarter of the call's output
                    // limit, so a program's capped output plus the tool's own
                    // text still fits in what the plugin may return.
                    output_cap: usize::try_from(decl.limits.output_kb.saturating_mul(1024) / 4)
                        .unwrap_or(usize::MAX),
                    require_os_sandbox: manifest.require_os_sandbox,
                    protect_git: !matches!(&decl.source, Source::Builtin(b) if b == "git"),
                    // Set per call, from the tool's effects (`process`).
                    read_only: false,
                })
            }),
        }),
        decl: decl.clone(),
        sha256,
        imports,
        provider,
        tools: Vec::new(),
        code: tokio::sync::OnceCell::new_with(code),
        compiler: Some(compiler.clone()),
        offered: std::sync::Mutex::default(),
    })
}

/// The error for `tool` exported by both `first` and `second`.
pub(super) fn clash(tool: &str, first: &Plugin, second: &Plugin) -> LoadError {
    LoadError(format!(
        "tool `{tool}` is exported by two plugins: `{}` ({}) and `{}` ({}), and a model \
         can only call one tool by that name; give one of them a `tool_prefix` (e.g. \
         `tool_prefix = \"{}_\"` in [plugins.{}], which renames its tools), or set \
         `enabled = false` on one, or remove it",
        first.decl.name,
        first.decl.origin,
        second.decl.name,
        second.decl.origin,
        suggested_prefix(&second.decl.name),
        second.decl.name,
    ))
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

/// A `tool_prefix` to suggest for plugin `name`: its name with the
/// characters a prefix may not hold replaced.
fn suggested_prefix(name: &str) -> String {
    let safe: String = name
        .chars()
        .take(31)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    safe
}

/// Whether `a` and `b` give the same component the same inputs, so that
/// describing one tells the tools of both. Everything a guest can observe
/// of its entry counts; only the name, where it was declared and how its
/// file was named do not. The name and the manifest line do reach a guest
/// inside the host's `process` errors, granted or not, so entries whose
/// component imports `process` are never twins.
fn twins(a: &Plugin, b: &Plugin) -> bool {
    a.sha256 == b.sha256
        && !a
            .imports
            .iter()
            .any(|i| super::imports::classify(i) == super::Capability::Process)
        && settings(&a.decl) == settings(&b.decl)
}

/// `decl` without what its guest cannot observe.
fn settings(decl: &PluginDecl) -> PluginDecl {
    let nowhere = Origin {
        file: String::new(),
        line: 0,
    };
    let mut d = decl.clone();
    d.name.clear();
    d.origin = nowhere.clone();
    d.source = Source::Builtin(String::new());
    for grant in &mut d.net {
        grant.origin = nowhere.clone();
    }
    d
}

/// Reads a component's imports, exports and tools without granting it
/// anything: it is described in a store with no directories, no
/// environment and no network.
pub(super) async fn inspect(rt: &Runtime, bytes: &[u8]) -> Result<Inspection, LoadError> {
    // A file that is no component says what it is, as at load.
    if let Some(why) = not_a_component(bytes) {
        return Err(LoadError(why));
    }
    let sha256 = hex::encode(Sha256::digest(bytes));
    let (component, _) = rt
        .cache
        .load(&rt.engine, bytes, &sha256)
        .map_err(|e| LoadError(format!("not a valid WebAssembly component: {e:#}")))?;
    let imports = import_names(&rt.engine, &component);
    let refused = super::imports::refusal(&imports);
    let exports = component
        .component_type()
        .exports(&rt.engine)
        .map(|(n, _)| n.to_owned())
        .collect();
    let decl = PluginDecl {
        name: "inspected".into(),
        source: Source::Builtin("inspected".into()),
        fs: Vec::new(),
        net: Vec::new(),
        env: Vec::new(),
        secrets: Vec::new(),
        exec: Vec::new(),
        limits: Default::default(),
        config: BTreeMap::new(),
        tool_prefix: String::new(),
        reads_secrets: Vec::new(),
        destination_args: BTreeMap::new(),
        origin: crate::manifest::Origin {
            file: "(inspect)".into(),
            line: 0,
        },
    };
    let reviews = imports
        .iter()
        .map(|i| super::imports::review(&decl, i))
        .collect();
    let linked = match refused {
        Some(why) => Err(why),
        None => rt
            .linker
            .instantiate_pre(&component)
            .map_err(|e| format!("{e:#}"))
            .and_then(PluginKind::of),
    };
    let tools = match linked {
        Ok(PluginKind::Provider(_) | PluginKind::Hook(_)) => Ok(Vec::new()),
        Ok(kind) => {
            let provider = kind.is_provider();
            let plugin = Plugin {
                engine: rt.engine.clone(),
                shared: Arc::new(PluginShared {
                    guard: fsguard::Guard::new(None, &decl.source)
                        .map(Arc::new)
                        .map_err(|e| LoadError(e.to_string()))?,
                    exec: None,
                    journal: None,
                    connections: Arc::default(),
                    name: "inspected".into(),
                    origin: "(inspect)".into(),
                    config: BTreeMap::new(),
                    fs: Arc::new([]),
                }),
                decl,
                sha256: sha256.clone(),
                imports: imports.clone(),
                provider,
                tools: Vec::new(),
                code: tokio::sync::OnceCell::new_with(Some(Code {
                    kind,
                    outcome: CacheOutcome::Compiled,
                })),
                compiler: None,
                offered: std::sync::Mutex::default(),
            };
            plugin.describe().await.map(|d| d.0).map_err(|e| e.0)
        }
        Err(e) => Err(e),
    };
    Ok(Inspection {
        sha256,
        imports: reviews,
        exports,
        tools,
    })
}

/// What `corral plugin inspect` reports.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// SHA-256 of the component file.
    pub sha256: String,
    /// Every interface it imports, judged as for a plugin with no grants.
    pub imports: Vec<ImportReview>,
    /// Every interface it exports.
    pub exports: Vec<String>,
    /// Its tools, or why they could not be read.
    pub tools: Result<Vec<ToolSpec>, String>,
}

/// The names of everything `component` imports, sorted.
fn import_names(engine: &Engine, component: &Component) -> Vec<String> {
    let mut names: Vec<String> = component
        .component_type()
        .imports(engine)
        .map(|(n, _)| n.to_owned())
        .collect();
    names.sort();
    names
}
