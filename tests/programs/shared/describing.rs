//! `describing_plugin!`: a test guest written against the raw bindings whose
//! point is only what its tools describe. Included by the guests that use
//! it with `#[path = "../../shared/describing.rs"] #[macro_use] mod describing;`.

/// Declares `$ty` and exports it as a tool plugin whose tools are those
/// `$describe()` returns: every call answers `NAME ran`, and no tool has a
/// preview.
macro_rules! describing_plugin {
    ($ty:ident, $describe:path) => {
        struct $ty;

        impl corral_sdk::__private::Guest for $ty {
            fn describe() -> Vec<corral_sdk::__private::ToolSpec> {
                $describe()
            }

            fn invoke(
                call: corral_sdk::__private::ToolCall,
            ) -> Result<corral_sdk::__private::ToolOutput, corral_sdk::__private::ToolError> {
                Ok(corral_sdk::__private::ToolOutput {
                    content: format!("{} ran", call.name),
                    is_error: false,
                    data: None,
                })
            }

            fn preview(
                _: corral_sdk::__private::ToolCall,
            ) -> Result<Option<String>, corral_sdk::__private::ToolError> {
                Ok(None)
            }
        }

        corral_sdk::__bindings::__export_tool_plugin!($ty with_types_in corral_sdk::__bindings);
    };
}
