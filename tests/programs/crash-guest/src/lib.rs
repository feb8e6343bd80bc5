//! A plugin that panics amid other output on stderr, as a real one does when
//! it logs chatter before failing or a panic hook writes more after it. The
//! host must still show the panic message, not just the last lines.
#[path = "../../shared/tool.rs"]
#[macro_use]
mod tool;

use corral_sdk::tools;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Lines written to stderr before the panic.
    before: u32,
    /// Lines written to stderr after the panic message, by a panic hook.
    after: u32,
    /// The panic message (may span lines).
    message: String,
}

tool! {
    Crash, "crash", Args, [Read],
    "Writes lines to stderr and panics with `message`.",
    |args| {
        for i in 0..args.before {
            eprintln!("working on step {i}");
        }
        let after = args.after;
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default_hook(info);
            for i in 0..after {
                eprintln!("cleanup step {i}");
            }
        }));
        panic!("{}", args.message);
    }
}

tools!(Crash);
