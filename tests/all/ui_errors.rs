//! Errors and warnings in the interactive UI, in a real terminal (tmux): a
//! warning raised while the UI is up is shown in it, and a provider without
//! its key names the variable.

use crate::support::text::{has, lacks, lacks_all};
use crate::support::tui::{Pane, ui_command};
use crate::*;
use corral_test_programs::LOOKALIKE;

/// The replay provider as the session's, so the UI starts with no key.
const REPLAY: &str = "[agent]\nprovider = \"replay\"\n";

fn start(cli: &Cli, sb: &Sandbox) -> Option<Pane> {
    crate::support::tui::trust(cli, sb);
    let pane = Pane::start(&ui_command(cli, &sb.ws(), "sleep 600"))?;
    pane.wait_for("ask anything");
    Some(pane)
}

#[test]
fn provider_without_its_key_names_the_variable_in_the_ui() {
    let sb = Sandbox::with_manifest(REPLAY);
    let cli = Cli::new();
    let Some(pane) = start(&cli, &sb) else {
        return;
    };
    pane.submit("/provider openai");
    let screen = pane.wait_for("OPENAI_API_KEY");
    has(&screen, "provider is unchanged");
    lacks(&screen, "grants.net");
}

#[test]
fn a_warning_raised_while_the_ui_runs_is_shown_in_it() {
    let sb = Sandbox::with_manifest(&format!(
        "{REPLAY}\n[plugins.look]\nsource = {LOOKALIKE:?}\n"
    ));
    let cli = Cli::new();
    let Some(pane) = start(&cli, &sb) else {
        return;
    };
    // The UI lists the tools once it is up; that load warns again.
    let screen = pane.wait_for("looks like tool");
    lacks_all(&screen, &["\\x1b[", "\u{1b}["]);
}
