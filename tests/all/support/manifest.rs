//! Manifest text for the built-in providers pointed at a mock model on
//! loopback (see [`crate::support::mock`]), with the API key taken from the
//! environment (`TEST_OPENAI_KEY`, `TEST_ANTHROPIC_KEY`) as the host adds it
//! on egress.

/// The `[plugins.openai]` table for the mock on `port`: `config` holds more
/// entries of its `config` table (after `base_url`), `rest` more lines of
/// the table (e.g. `limits = { timeout_ms = 60000 }`).
pub fn openai_plugin(port: u16, config: &str, rest: &str) -> String {
    plugin(
        "openai",
        port,
        "authorization",
        "Bearer ${env:TEST_OPENAI_KEY}",
        config,
        rest,
    )
}

/// The `[plugins.anthropic]` table for the mock on `port`, as
/// [`openai_plugin`] is for OpenAI.
pub fn anthropic_plugin(port: u16, config: &str, rest: &str) -> String {
    plugin(
        "anthropic",
        port,
        "x-api-key",
        "${env:TEST_ANTHROPIC_KEY}",
        config,
        rest,
    )
}

fn plugin(name: &str, port: u16, header: &str, value: &str, config: &str, rest: &str) -> String {
    let origin = format!("http://127.0.0.1:{port}");
    let config = if config.is_empty() {
        String::new()
    } else {
        format!(", {config}")
    };
    let mut table = format!(
        "[plugins.{name}]\n\
         source = \"builtin:{name}\"\n\
         grants.net = [\"{origin}\"]\n\
         grants.secrets = [{{ origin = \"{origin}\", header = \"{header}\", value = \"{value}\" }}]\n\
         config = {{ base_url = \"{origin}/v1\"{config} }}\n"
    );
    if !rest.is_empty() {
        table.push_str(rest);
        table.push('\n');
    }
    table
}

/// A project with both providers against the mocks on the given ports, in
/// `auto-edit` mode with at most `max_iterations` model turns; `openai`
/// and `anthropic` are their extra `config` entries, `rest` more lines of
/// each table and `extra` more manifest after them.
pub struct Providers<'a> {
    /// The OpenAI mock's port.
    pub openai_port: u16,
    /// The Anthropic mock's port.
    pub anthropic_port: u16,
    /// `[agent] max_iterations`.
    pub max_iterations: u32,
    /// More entries of the OpenAI provider's `config`.
    pub openai: &'a str,
    /// More entries of the Anthropic provider's `config`.
    pub anthropic: &'a str,
    /// More lines of each provider's table.
    pub rest: &'a str,
    /// More manifest after the providers.
    pub extra: &'a str,
}

impl Providers<'_> {
    /// What [`both_providers`] declares: the models `mock-gpt` and
    /// `mock-claude` stalling after 2 s, calls of at most 60 s, 8 turns.
    pub fn mocks(openai_port: u16, anthropic_port: u16) -> Self {
        Providers {
            openai_port,
            anthropic_port,
            max_iterations: 8,
            openai: r#"model = "mock-gpt", stall_timeout_ms = 2000"#,
            anthropic: r#"model = "mock-claude", stall_timeout_ms = 2000"#,
            rest: "limits = { timeout_ms = 60000 }",
            extra: "",
        }
    }

    /// The manifest's text.
    pub fn toml(&self) -> String {
        format!(
            "\n[agent]\nmax_iterations = {}\n\n[policy]\nmode = \"auto-edit\"\n\n{}\n{}{}\n",
            self.max_iterations,
            openai_plugin(self.openai_port, self.openai, self.rest),
            anthropic_plugin(self.anthropic_port, self.anthropic, self.rest),
            self.extra,
        )
    }
}

/// A manifest whose `openai` provider talks to the mock on `port`, with
/// `extra` lines.
pub fn openai_project(port: u16, extra: &str) -> String {
    format!(
        "\n{}{extra}\n",
        openai_plugin(port, r#"model = "mock""#, "")
    )
}

/// The OpenAI key [`KEYS`] hands the provider.
pub const OPENAI_KEY: &str = "sk-test-openai-0123456789";

/// The Anthropic key [`KEYS`] hands the provider.
pub const ANTHROPIC_KEY: &str = "sk-ant-test-9876543210";

/// A project manifest declaring both providers against the given mocks.
pub fn both_providers(openai_port: u16, anthropic_port: u16, extra: &str) -> String {
    Providers {
        extra,
        ..Providers::mocks(openai_port, anthropic_port)
    }
    .toml()
}

/// The environment [`both_providers`] takes its keys from.
pub const KEYS: [(&str, &str); 2] = [
    ("TEST_OPENAI_KEY", OPENAI_KEY),
    ("TEST_ANTHROPIC_KEY", ANTHROPIC_KEY),
];
