//! The smallest useful tool: returns its input. Used to measure the cost of
//! a sandboxed call and to check the host stays healthy after other calls.
use corral_sdk::{Effect, Output, Result, Tool, tools};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Text to send back.
    text: String,
}

struct Echo;

impl Tool for Echo {
    type Args = Args;
    const NAME: &'static str = "echo";
    const DESCRIPTION: &'static str = "Returns `text` unchanged.";
    const EFFECTS: &'static [Effect] = &[Effect::Read];

    fn run(args: Args) -> Result<Output> {
        Ok(Output::text(args.text))
    }
}

#[derive(Deserialize, JsonSchema)]
struct ConfigArgs {
    key: String,
}

struct ConfigGet;

impl Tool for ConfigGet {
    type Args = ConfigArgs;
    const NAME: &'static str = "config_get";
    const DESCRIPTION: &'static str = "Returns a setting of this plugin from the manifest.";
    const EFFECTS: &'static [Effect] = &[Effect::Read];

    fn run(args: ConfigArgs) -> Result<Output> {
        corral_sdk::log(
            corral_sdk::Level::Info,
            &format!("config lookup {}", args.key),
        );
        Ok(Output::text(
            corral_sdk::config(&args.key).unwrap_or_else(|| "<unset>".into()),
        ))
    }
}

tools!(Echo, ConfigGet);
