//! Write a hook plugin: implement [`Hook`] for a type and call
//! [`hook!`](crate::hook!) once.
//!
//! A hook plugin is a component of the `corral:plugin/hook-plugin` world.
//! The host calls [`Hook::handle`] with each event the manifest's `[hooks]`
//! table binds the plugin to; the hook answers with a [`Decision`]. Match
//! the events you care about and answer [`Decision::Continue`] to the rest.
//! Like any plugin, a hook sees only what its manifest entry grants: run
//! programs with [`process`](crate::process) only when it has `grants.exec`.
//!
//! ```no_run
//! use corral_sdk::hook::{Decision, Event, Hook};
//!
//! struct NoForcePush;
//!
//! impl Hook for NoForcePush {
//!     fn handle(event: Event) -> Decision {
//!         match event {
//!             Event::BeforeTool(e) if e.call.arguments.contains("--force") => {
//!                 Decision::Block("force pushes are not allowed here".into())
//!             }
//!             _ => Decision::Continue,
//!         }
//!     }
//! }
//!
//! corral_sdk::hook!(NoForcePush);
//! ```

#[doc(hidden)]
#[allow(
    missing_docs,
    reason = "generated; the public types are re-exported below"
)]
pub mod __bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "hook-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_hook_plugin",
        default_bindings_module: "corral_sdk::hook::__bindings",
        // The imports of the tool world, so `corral_sdk::log`, `config`,
        // `process` and `files` work in hook plugins too.
        with: {
            "corral:plugin/host@0.1.0": crate::__bindings::corral::plugin::host,
            "corral:plugin/types@0.1.0": crate::__bindings::corral::plugin::types,
            "corral:plugin/files@0.1.0": crate::__bindings::corral::plugin::files,
            "corral:plugin/process@0.1.0": crate::__bindings::corral::plugin::process,
        },
    });
}

pub use crate::__bindings::corral::plugin::types::{Effect, ToolCall};
pub use __bindings::exports::corral::plugin::hook::{
    AfterTool, AfterToolFailure, BeforeCompact, BeforeTool, CompactTrigger, Decision, Event,
    SessionEnd, SessionSource, SessionStart, Stop, SubagentStop, UserPrompt,
};

/// A hook: one function for every event it is bound to.
pub trait Hook {
    /// Decides about one event. Each call runs in a fresh instance, so
    /// nothing is kept between calls.
    fn handle(event: Event) -> Decision;
}

/// The arguments of a tool call as JSON (`Null` if they are not JSON).
pub fn arguments(call: &ToolCall) -> serde_json::Value {
    serde_json::from_str(&call.arguments).unwrap_or(serde_json::Value::Null)
}

#[doc(hidden)]
pub mod __private {
    pub use super::__bindings::exports::corral::plugin::hook::Guest;
}

/// Exports a [`Hook`] type as this component's hook. Call it once, at the
/// crate root of a `cdylib` built for `wasm32-wasip2`.
///
/// ```text
/// corral_sdk::hook!(NoForcePush);
/// ```
#[macro_export]
macro_rules! hook {
    ($hook:ty) => {
        #[doc(hidden)]
        #[allow(dead_code, reason = "only exported when built for wasm")]
        struct __CorralHook;

        impl $crate::hook::__private::Guest for __CorralHook {
            fn handle(event: $crate::hook::Event) -> $crate::hook::Decision {
                <$hook as $crate::hook::Hook>::handle(event)
            }
        }

        // Only a component exports the hook interface; a native build (unit
        // tests) must not define the export symbols.
        #[cfg(target_family = "wasm")]
        $crate::hook::__bindings::__export_hook_plugin!(
            __CorralHook with_types_in $crate::hook::__bindings
        );
    };
}
