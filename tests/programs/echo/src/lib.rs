//! The smallest useful tool: returns its input. Used to measure the cost of
//! a sandboxed call and to check the host stays healthy after other calls.
#[path = "../../shared/tool.rs"]
#[macro_use]
mod tool;

use corral_sdk::{Output, tools};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Text to send back.
    text: String,
}

tool! {
    Echo, "echo", Args, [Read],
    "Returns `text` unchanged.",
    |args| Ok(Output::text(args.text))
}

#[derive(Deserialize, JsonSchema)]
struct ConfigArgs {
    key: String,
}

tool! {
    ConfigGet, "config_get", ConfigArgs, [Read],
    "Returns a setting of this plugin from the manifest.",
    |args| {
        corral_sdk::log(
            corral_sdk::Level::Info,
            &format!("config lookup {}", args.key),
        );
        Ok(Output::text(
            corral_sdk::config(&args.key).unwrap_or_else(|| "<unset>".into()),
        ))
    }
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

tool! {
    Clock, "clock", NoArgs, [Read],
    "Returns the wall clock, in nanoseconds since the Unix epoch, read as the tool's first act (the bench's probe of when a call reaches the plugin).",
    |_args| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Ok(Output::text(now.to_string()))
    }
}

tools!(Echo, ConfigGet, Clock);
