//! Loading a whole manifest.
//!
//! Entries that name the same component (by SHA-256) share one compiled
//! `Component` and one linked `InstancePre`: compiled code costs megabytes
//! per copy, an entry only its settings. Everything that needs no plugin
//! code to run is checked for every entry before any is instantiated: each
//! file's `sha256` pin and trust record (against the hash of the bytes that
//! are compiled), its imports against its grants, and linking.
//!
//! Then `describe` runs. Two entries that run the same component with the
//! same settings (config, grants, limits) give it the same inputs, so they
//! describe the same tools: such twins are described once, and if that one
//! exports any tool the clash is reported at once, before the other plugins
//! run. Everything else is described once per entry, the tool names checked
//! as each answers.

use super::{CacheOutcome, Kind, LoadError, Plugin, Plugins, Runtime, import_names};
use crate::manifest::{Manifest, Origin, PluginDecl, Source};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use wasmtime::component::Component;

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
    linked: HashMap<String, Kind>,
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
    ) -> Result<Kind, LoadError> {
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
        let kind = Kind::of(pre).map_err(|e| {
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
        plugins.push(rt.prepare(decl, manifest, &mut components)?);
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
/// file was named do not. The name does reach a guest inside the host's
/// `process` errors, so entries that may run programs are never twins.
fn twins(a: &Plugin, b: &Plugin) -> bool {
    a.sha256 == b.sha256
        && a.decl.exec.is_empty()
        && b.decl.exec.is_empty()
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
