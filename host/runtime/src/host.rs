//! `corral:plugin/host`: logging and the plugin's own settings.

use super::bindings::host::{self, Host, LogLevel};
use super::budget::CallBudget;
use std::collections::BTreeMap;
use wasmtime::component::{HasData, Linker};

/// Longest log line kept from a plugin.
const MAX_LINE: usize = 4096;

/// What `corral:plugin/host` sees of a call: its plugin's name and
/// settings, and the call's log budget.
pub(crate) struct HostView<'a> {
    /// The plugin's name, for its log lines.
    pub(crate) plugin: &'a str,
    /// The plugin's `config` table from its manifest entry.
    pub(crate) config: &'a BTreeMap<String, String>,
    /// What the call may still log.
    pub(crate) budget: &'a mut CallBudget,
}

/// The data `corral:plugin/host` is served from: a [`HostView`].
struct HostData;

impl HasData for HostData {
    type Data<'a> = HostView<'a>;
}

/// Adds `corral:plugin/host`, served from the view `get` projects from a
/// store's data.
pub(super) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> HostView<'_>,
) -> wasmtime::Result<()> {
    host::add_to_linker::<T, HostData>(linker, get)
}

impl Host for HostView<'_> {
    fn log(&mut self, level: LogLevel, message: String) {
        let plugin = self.plugin;
        if !self.budget.take_log(message.len()) {
            return;
        }
        let mut message = crate::terminal::inert(&message).into_owned();
        crate::budget::cut_marked(&mut message, MAX_LINE);
        match level {
            LogLevel::Trace => tracing::trace!(target: "corral::plugin", plugin, "{message}"),
            LogLevel::Debug => tracing::debug!(target: "corral::plugin", plugin, "{message}"),
            LogLevel::Info => tracing::info!(target: "corral::plugin", plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(target: "corral::plugin", plugin, "{message}"),
            LogLevel::Error => tracing::error!(target: "corral::plugin", plugin, "{message}"),
        }
    }

    fn config(&mut self, key: String) -> Option<String> {
        self.config.get(&key).cloned()
    }
}
