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
use super::compiler::{Code, Compiler, import_names, not_a_component, source_bytes};
use super::descriptions::{Described, Descriptions};
use super::error::LoadError;
use super::imports::ImportReview;
use super::plugin::Plugin;
use super::registry::{Plugins, clash, suggested_prefix};
use super::sandbox::{LinkError, PluginKind};
use super::store::PluginShared;
use super::{Runtime, fsguard};
use crate::manifest::{Manifest, Origin, PluginDecl, Source};
use crate::protocol::ToolSpec;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

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

/// The compiler of one load, with `rt`'s engine, linker and compile cache.
fn compiler(rt: &Runtime) -> Arc<Compiler> {
    Arc::new(Compiler::new(
        rt.engine.clone(),
        rt.linker.clone(),
        rt.cache.clone(),
    ))
}

/// Loads every plugin of `manifest`; see the module documentation.
pub(super) async fn load(rt: &Runtime, manifest: &Manifest) -> Result<Plugins, LoadError> {
    // Before any plugin runs: a crash may have left a file change half
    // made, and a tool must not read or write over it.
    let recovered = super::writes::recover(&manifest.workspace);
    let Entries {
        mut plugins,
        keys,
        mut described,
        mut cacheable,
    } = entries(rt, manifest).await?;
    let twin_of: Vec<Option<usize>> = (0..plugins.len())
        .map(|i| (0..i).find(|&j| twins(&plugins[j], &plugins[i])))
        .collect();
    for (i, twin) in twin_of.iter().enumerate() {
        let Some(j) = *twin else { continue };
        if !described[j] {
            let (tools, may_cache) = plugins[j].describe().await?;
            plugins[j].tools = tools;
            described[j] = true;
            cacheable[j] = may_cache;
            if may_cache {
                remember(rt, &plugins[j], &keys[j]);
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
            remember(rt, &plugins[i], &keys[i]);
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
                remember(rt, &plugins[i], &keys[i]);
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

/// What the first pass of a load makes of each plugin of the manifest, in
/// its order: the plugin, its key in the description cache, whether its
/// tools are known, and whether they may be cached (every cached answer
/// may).
struct Entries {
    plugins: Vec<Plugin>,
    keys: Vec<String>,
    described: Vec<bool>,
    cacheable: Vec<bool>,
}

/// The first pass of [`load`]: each plugin's tools from the description
/// cache, or its code loaded and, unless an earlier plugin is its twin,
/// described at once (see [`describe_now`]).
async fn entries(rt: &Runtime, manifest: &Manifest) -> Result<Entries, LoadError> {
    let compiler = compiler(rt);
    let n = manifest.plugins.len();
    let mut plugins: Vec<Plugin> = Vec::with_capacity(n);
    let mut keys = Vec::with_capacity(n);
    let mut described = Vec::with_capacity(n);
    let mut cacheable = Vec::with_capacity(n);
    for (k, decl) in manifest.plugins.iter().enumerate() {
        let (sha256, bytes) = identify(rt, decl, manifest)?;
        let key = Descriptions::key(decl, manifest, &sha256);
        // Entries of one source share one loaded component: it is kept
        // until the last of them is described.
        let shared_later = manifest.plugins[k + 1..]
            .iter()
            .any(|d| d.source == decl.source);
        let plugin = match rt.descriptions.get(&key, &sha256) {
            Some(cached) => {
                super::imports::check(decl, &cached.imports)?;
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
                cacheable.push(true);
                plugin
            }
            None => {
                let mut plugin =
                    compiled_entry(&compiler, decl, manifest, sha256, bytes.as_deref())?;
                // A twin of an earlier plugin is not described (see below).
                if plugins.iter().any(|p| twins(p, &plugin)) {
                    described.push(false);
                    cacheable.push(false);
                } else {
                    let may_cache =
                        describe_now(&mut plugin, !shared_later, |p| remember(rt, p, &key)).await?;
                    described.push(true);
                    cacheable.push(may_cache);
                }
                plugin
            }
        };
        keys.push(key);
        plugins.push(plugin);
    }

    Ok(Entries {
        plugins,
        keys,
        described,
        cacheable,
    })
}

/// Stores `plugin`'s tools in the description cache under `key`.
fn remember(rt: &Runtime, plugin: &Plugin, key: &str) {
    rt.descriptions.put(
        key,
        &Described {
            sha256: plugin.sha256.clone(),
            provider: plugin.provider,
            imports: plugin.imports.clone(),
            tools: plugin.tools.clone(),
        },
    );
}

/// Describes a plugin whose code was just loaded, before the next one is
/// loaded. When its answer may be cached it is (`remember`), and the code
/// is let go: the plugin is then what a later run makes of the description
/// cache, its code loaded again only when a call needs it. A first run
/// thus holds one plugin's code at a time, not the code of every plugin it
/// described (the scattered pages `describe` runs of each, and the code's
/// tables). The load's compiler forgets the component too when `last`
/// (no later entry of the manifest shares it). Returns whether the answer
/// may be cached.
async fn describe_now(
    plugin: &mut Plugin,
    last: bool,
    remember: impl FnOnce(&Plugin),
) -> Result<bool, LoadError> {
    let (tools, may_cache) = plugin.describe().await?;
    plugin.tools = tools;
    if may_cache {
        remember(plugin);
        plugin.code = tokio::sync::OnceCell::new();
        if let (true, Some(compiler)) = (last, &plugin.compiler) {
            compiler.forget(&plugin.sha256);
        }
    }
    Ok(may_cache)
}

/// Loads one plugin without the description cache: compiled, linked and
/// described now.
pub(super) async fn load_one(
    rt: &Runtime,
    decl: &PluginDecl,
    manifest: &Manifest,
) -> Result<Plugin, LoadError> {
    let compiler = compiler(rt);
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
        ready: std::sync::Arc::default(),
        ready_hook: std::sync::Arc::default(),
    })
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
        sinks: Vec::new(),
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
        Some(why) => Err(ToolsError::Refused(why)),
        None => rt.linker.link(&component).map_err(|e| match e {
            LinkError::Unlinkable(e) => ToolsError::Unlinkable(e),
            LinkError::NoExport(e) => ToolsError::NoExport(e),
        }),
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
                ready: std::sync::Arc::default(),
                ready_hook: std::sync::Arc::default(),
            };
            plugin
                .describe()
                .await
                .map(|d| d.0)
                .map_err(|e| ToolsError::Describe(e.0))
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
    pub tools: Result<Vec<ToolSpec>, ToolsError>,
}

/// Why an inspected component's tools could not be read; its text is the
/// reason the step gave.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolsError {
    /// It imports an interface corral does not provide.
    #[error("{0}")]
    Refused(String),
    /// Its imports do not match what the host provides.
    #[error("{0}")]
    Unlinkable(String),
    /// It exports none of the worlds corral calls.
    #[error("{0}")]
    NoExport(String),
    /// Asking it for its tools failed.
    #[error("{0}")]
    Describe(String),
}
