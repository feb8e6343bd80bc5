//! `corral:plugin/host`: logging and the plugin's own settings.

use super::bindings::host::{self, Host, LogLevel};
use super::store::CallState;
use wasmtime::component::{HasSelf, Linker};

/// Longest log line kept from a plugin.
const MAX_LINE: usize = 4096;

/// Adds `corral:plugin/host`.
pub(super) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    host::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)
}

impl Host for CallState {
    fn log(&mut self, level: LogLevel, message: String) {
        let plugin = &*self.plugin.name;
        if !self.budget.take_log(message.len()) {
            return;
        }
        let mut message = crate::terminal::inert(&message).into_owned();
        if message.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push_str(" […]");
        }
        match level {
            LogLevel::Trace => tracing::trace!(target: "corral::plugin", plugin, "{message}"),
            LogLevel::Debug => tracing::debug!(target: "corral::plugin", plugin, "{message}"),
            LogLevel::Info => tracing::info!(target: "corral::plugin", plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(target: "corral::plugin", plugin, "{message}"),
            LogLevel::Error => tracing::error!(target: "corral::plugin", plugin, "{message}"),
        }
    }

    fn config(&mut self, key: String) -> Option<String> {
        self.plugin.config.get(&key).cloned()
    }
}
