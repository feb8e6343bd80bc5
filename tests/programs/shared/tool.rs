//! `tool!`: a test guest's plain tool — a name, a description, its
//! effects and a `run` — without spelling out the `impl Tool` each time.
//! Included by the guests that use it with
//! `#[path = "../../shared/tool.rs"] #[macro_use] mod tool;`.

/// Declares the unit struct `$ty` and its `impl corral_sdk::Tool`:
/// `NAME`, `DESCRIPTION`, `EFFECTS` (names of `corral_sdk::Effect`) and a
/// `run` binding its `$args` to `$a` and evaluating `$body`.
macro_rules! tool {
    (
        $(#[$meta:meta])*
        $ty:ident, $name:literal, $args:ty, [$($eff:ident),* $(,)?],
        $description:literal,
        |$a:pat_param| $body:expr $(,)?
    ) => {
        $(#[$meta])*
        struct $ty;

        impl corral_sdk::Tool for $ty {
            type Args = $args;
            const NAME: &'static str = $name;
            const DESCRIPTION: &'static str = $description;
            const EFFECTS: &'static [corral_sdk::Effect] = &[$(corral_sdk::Effect::$eff),*];

            fn run($a: $args) -> corral_sdk::Result<corral_sdk::Output> {
                $body
            }
        }
    };
}
