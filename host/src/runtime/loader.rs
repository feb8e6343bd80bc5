//! Loading plugins: a whole manifest, one entry, or a component to inspect.
//!
//! Entries that name the same component (by SHA-256) share one compiled
//! `Component` and one linked `InstancePre`: compiled code costs megabytes
//! per copy, an entry only its settings. Everything that needs no plugin
//! code to run is checked for every entry before any is instantiated: each
//! file's `sha256` pin and trust record (against the hash of the bytes that
//! are compiled), its imports (only interfaces corral does not provide are
//! refused; what its grants do not cover is denied per call), and linking.
//!
//! Then `describe` runs. Two entries that run the same component with the
//! same settings (config, grants, limits) give it the same inputs, so they
//! describe the same tools: such twins are described once, and if that one
//! exports any tool the clash is reported at once, before the other plugins
//! run. Everything else is described once per entry, the tool names checked
//! as each answers.

use super::imports::ImportReview;
use super::store::PluginShared;
use super::{CacheOutcome, Plugin, PluginKind, Plugins, Runtime, ToolSpec, fsguard};
use crate::manifest::{Manifest, Origin, PluginDecl, Source};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;
use wasmtime::Engine;
use wasmtime::component::Component;

/// A plugin that could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

/// A component as one entry gets it.
pub(super) struct Loaded {
    /// SHA-256 of the bytes that were compiled.
    pub(super) sha256: String,
    /// The interfaces it imports.
    pub(super) imports: Vec<String>,
    /// Whether it was compiled or came from the cache, the first time.
    pub(super) outcome: CacheOutcome,
    component: Component,
}

/// The components of one load, by SHA-256.
#[derive(Default)]
pub(super) struct Components {
    compiled: HashMap<String, (Component, Vec<String>, CacheOutcome)>,
    linked: HashMap<String, PluginKind>,
}

impl Components {
    /// Reads `decl`'s component once, checks its hash against the
    /// manifest's pin and the project's trust record, and compiles it, or
    /// reuses the copy compiled for an earlier entry with the same hash.
    pub(super) fn get(
        &mut self,
        rt: &Runtime,
        decl: &PluginDecl,
        manifest: &Manifest,
    ) -> Result<Loaded, LoadError> {
        let name = &decl.name;
        let file_bytes;
        let bytes: &[u8] = match &decl.source {
            Source::Builtin(b) => corral_builtin::get(b)
                .ok_or_else(|| LoadError(format!("plugin `{name}`: no built-in plugin `{b}`")))?,
            Source::File { path, .. } => {
                file_bytes = crate::trust::read_plugin_file(path).map_err(|e| {
                    LoadError(format!(
                        "plugin `{name}` ({}): cannot read {}: {e}",
                        decl.origin,
                        path.display()
                    ))
                })?;
                &file_bytes
            }
        };
        let sha256 = crate::trust::sha256_hex(bytes);
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
        crate::trust::check_file(decl, manifest, &sha256).map_err(LoadError)?;
        if let Some((component, imports, outcome)) = self.compiled.get(&sha256) {
            tracing::debug!(plugin = %name, "shares the component {sha256} loaded for an earlier entry");
            return Ok(Loaded {
                sha256,
                imports: imports.clone(),
                outcome: *outcome,
                component: component.clone(),
            });
        }
        let started = Instant::now();
        let (component, outcome) = rt.cache.load(&rt.engine, bytes, &sha256).map_err(|e| {
            LoadError(format!(
                "plugin `{name}` ({}): not a valid component: {e:#}",
                decl.origin
            ))
        })?;
        let elapsed = started.elapsed();
        match outcome {
            CacheOutcome::Hit => {
                tracing::info!(plugin = %name, "compile cache hit ({elapsed:.1?})")
            }
            CacheOutcome::Compiled => tracing::info!(plugin = %name, "compiled ({elapsed:.1?})"),
        }
        let imports = import_names(&rt.engine, &component);
        self.compiled.insert(
            sha256.clone(),
            (component.clone(), imports.clone(), outcome),
        );
        Ok(Loaded {
            sha256,
            imports,
            outcome,
            component,
        })
    }

    /// Links `loaded` against the host's imports (once per component) and
    /// tells what kind of plugin it is.
    pub(super) fn link(
        &mut self,
        rt: &Runtime,
        decl: &PluginDecl,
        loaded: &Loaded,
    ) -> Result<PluginKind, LoadError> {
        if let Some(kind) = self.linked.get(&loaded.sha256) {
            return Ok(kind.clone());
        }
        let name = &decl.name;
        let pre = rt.linker.instantiate_pre(&loaded.component).map_err(|e| {
            LoadError(format!(
                "plugin `{name}` ({}): cannot be linked: {e:#}",
                decl.origin
            ))
        })?;
        let kind = PluginKind::of(pre).map_err(|e| {
            LoadError(format!(
                "plugin `{name}` ({}): exports neither corral:plugin/tool@0.1.0 nor corral:plugin/provider@0.1.0: {e}",
                decl.origin
            ))
        })?;
        self.linked.insert(loaded.sha256.clone(), kind.clone());
        Ok(kind)
    }
}

/// Loads every plugin of `manifest`; see the module documentation.
pub(super) async fn load(rt: &Runtime, manifest: &Manifest) -> Result<Plugins, LoadError> {
    let mut components = Components::default();
    let mut plugins = Vec::with_capacity(manifest.plugins.len());
    for decl in &manifest.plugins {
        plugins.push(prepare(rt, decl, manifest, &mut components)?);
    }
    drop(components);

    let twin_of: Vec<Option<usize>> = (0..plugins.len())
        .map(|i| (0..i).find(|&j| twins(&plugins[j], &plugins[i])))
        .collect();
    let mut described = vec![false; plugins.len()];
    for (i, twin) in twin_of.iter().enumerate() {
        let Some(j) = *twin else { continue };
        if !described[j] {
            plugins[j].tools = plugins[j].describe().await?;
            described[j] = true;
        }
        if let Some(tool) = plugins[j].tools.first() {
            let (first, second) = (&plugins[j], &plugins[i]);
            return Err(LoadError(format!(
                "tool `{}` is exported by two plugins: `{}` ({}) and `{}` ({}), which run the same \
                 component (sha256 {}) with the same settings, so they export the same tools; \
                 remove one or set `enabled = false` on it, or give each its own `config`",
                tool.name,
                first.decl.name,
                first.decl.origin,
                second.decl.name,
                second.decl.origin,
                first.sha256,
            )));
        }
    }

    let mut owner: HashMap<String, usize> = HashMap::new();
    for i in 0..plugins.len() {
        // A twin of a plugin with no tools has none either.
        if twin_of[i].is_some() {
            continue;
        }
        if !described[i] {
            plugins[i].tools = plugins[i].describe().await?;
        }
        for tool in &plugins[i].tools {
            if let Some(&j) = owner.get(&tool.name) {
                return Err(clash(&tool.name, &plugins[j], &plugins[i]));
            }
            owner.insert(tool.name.clone(), i);
        }
    }
    Plugins::new(plugins.into_iter().map(Arc::new).collect())
}

/// Everything of loading one plugin short of running it: its component
/// (shared through `components`), its imports checked and linked.
pub(super) fn prepare(
    rt: &Runtime,
    decl: &PluginDecl,
    manifest: &Manifest,
    components: &mut Components,
) -> Result<Plugin, LoadError> {
    let name = &decl.name;
    let loaded = components.get(rt, decl, manifest)?;
    super::imports::check(decl, &loaded.imports).map_err(LoadError)?;
    let kind = components.link(rt, decl, &loaded)?;
    let (sha256, imports, outcome) = (loaded.sha256, loaded.imports, loaded.outcome);
    Ok(Plugin {
        engine: rt.engine.clone(),
        shared: Arc::new(PluginShared {
            guard: fsguard::Guard::new(Some(&manifest.workspace), &decl.source)
                .map(Arc::new)
                .map_err(|e| {
                    LoadError(format!(
                        "plugin `{name}`: the workspace {} cannot be opened: {e}",
                        manifest.workspace.display()
                    ))
                })?,
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
                })
            }),
        }),
        decl: decl.clone(),
        sha256,
        imports,
        cache: outcome,
        kind,
        tools: Vec::new(),
    })
}

/// The error for `tool` exported by both `first` and `second`.
pub(super) fn clash(tool: &str, first: &Plugin, second: &Plugin) -> LoadError {
    LoadError(format!(
        "tool `{tool}` is exported by two plugins: `{}` ({}) and `{}` ({}); \
         remove one or set `enabled = false` on it",
        first.decl.name, first.decl.origin, second.decl.name, second.decl.origin
    ))
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
        Ok(PluginKind::Provider(_)) => Ok(Vec::new()),
        Ok(kind) => {
            let plugin = Plugin {
                engine: rt.engine.clone(),
                shared: Arc::new(PluginShared {
                    guard: fsguard::Guard::new(None, &decl.source)
                        .map(Arc::new)
                        .map_err(|e| LoadError(e.to_string()))?,
                    exec: None,
                    name: "inspected".into(),
                    origin: "(inspect)".into(),
                    config: BTreeMap::new(),
                    fs: Arc::new([]),
                }),
                decl,
                sha256: sha256.clone(),
                imports: imports.clone(),
                cache: CacheOutcome::Compiled,
                kind,
                tools: Vec::new(),
            };
            plugin.describe().await.map_err(|e| e.0)
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
