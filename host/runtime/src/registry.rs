//! The loaded set of plugins ([`Plugins`]) and which plugin serves each tool.

use super::error::{LoadError, ToolError};
use super::plugin::{Plugin, ToolOutput};
use super::vetting::Withheld;
use crate::protocol::ToolSpec;
use std::collections::HashMap;
use std::sync::Arc;

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.plugins.iter().map(|p| &p.decl.name))
            .finish()
    }
}

/// Every loaded plugin, and which one serves each tool.
pub struct Plugins {
    plugins: Vec<Arc<Plugin>>,
    by_tool: HashMap<String, usize>,
    /// What finishing the file changes a crash interrupted did, one
    /// sentence per change (see `write-files`).
    pub(super) recovered: Vec<String>,
    withheld: Vec<Withheld>,
}

impl Plugins {
    pub(super) fn new(
        plugins: Vec<Arc<Plugin>>,
        withheld: Vec<Withheld>,
    ) -> Result<Self, LoadError> {
        let mut by_tool: HashMap<String, usize> = HashMap::new();
        for (i, plugin) in plugins.iter().enumerate() {
            for tool in &plugin.tools {
                if let Some(&j) = by_tool.get(&tool.name) {
                    return Err(clash(&tool.name, &plugins[j], plugin));
                }
                by_tool.insert(tool.name.clone(), i);
            }
        }
        Ok(Self {
            plugins,
            by_tool,
            recovered: Vec::new(),
            withheld,
        })
    }

    /// What loading did to file changes a crash had interrupted: completed
    /// or rolled back, one sentence each, for the user and the model.
    pub fn recovered(&self) -> &[String] {
        &self.recovered
    }

    /// Tools the plugins export that are not offered (changed since they
    /// were reviewed, or imitating another plugin's), and why.
    pub fn withheld(&self) -> &[Withheld] {
        &self.withheld
    }

    /// The loaded plugins, by name.
    pub fn plugins(&self) -> &[Arc<Plugin>] {
        &self.plugins
    }

    /// Every tool with the plugin that serves it, sorted by tool name.
    pub fn tools(&self) -> Vec<(&Plugin, &ToolSpec)> {
        let mut all: Vec<(&Plugin, &ToolSpec)> = self
            .plugins
            .iter()
            .flat_map(|p| p.tools.iter().map(move |t| (&**p, t)))
            .collect();
        all.sort_by(|a, b| a.1.name.cmp(&b.1.name));
        all
    }

    /// Has every tool plugin whose code is loaded make the instance of its
    /// next call ([`Plugin::make_ahead`]): a session asks while it waits
    /// for the model.
    pub fn make_ahead(&self) {
        for plugin in &self.plugins {
            plugin.make_ahead();
        }
    }

    /// The plugin serving `tool`.
    pub fn plugin_for(&self, tool: &str) -> Option<&Arc<Plugin>> {
        self.by_tool.get(tool).map(|&i| &self.plugins[i])
    }

    /// Runs one tool call in its plugin's sandbox.
    // The same signature as `Plugin::call`, which it routes to.
    pub async fn call(
        &self,
        tool: &str,
        arguments: &str,
        call_id: &str,
    ) -> Result<ToolOutput, ToolError> {
        let plugin = self.plugin_for(tool).ok_or_else(|| {
            match self.withheld.iter().find(|w| w.tool == tool) {
                Some(w) => ToolError::Failed(format!("tool `{tool}` is not offered: {}", w.reason)),
                None => ToolError::UnknownTool(tool.to_owned()),
            }
        })?;
        plugin.call(tool, arguments, call_id).await
    }
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

/// A `tool_prefix` to suggest for plugin `name`: its name with the
/// characters a prefix may not hold replaced.
pub(super) fn suggested_prefix(name: &str) -> String {
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
