//! The session's usage and cost, folded from its events: the `result`
//! event of `corral run --json` and the UI's status line both read it, so
//! they price a session the same way (from `[agent.models."ID"] price`).

use corral_core::manifest::Manifest;
use corral_core::session::SessionConfig;
use corral_protocol::{Event, RunResult, StopReason, UsageTotals};

/// What the run's `result` event counts, folded from its events.
pub(super) struct Tally {
    manifest: Option<Manifest>,
    provider: Option<String>,
    /// The model of the next request (empty: the provider's configured one).
    model: String,
    usage: UsageTotals,
    /// The cost so far; `None` once a request could not be priced.
    cost: Option<f64>,
    /// Requests counted (the run's and its subagents').
    counted: u32,
    /// The last request's text, kept only for the `result` event (see
    /// [`Tally::keeping_answer`]): an answer can be tens of megabytes.
    answer: corral_protocol::SharedText,
    keep_answer: bool,
    turns: u32,
    requests: u32,
    tool_calls: u32,
    /// The run's output schema: a final answer is reported parsed.
    output_schema: Option<corral_core::AnswerSchema>,
}

impl Tally {
    pub(super) fn new(config: &SessionConfig) -> Self {
        let manifest = config.manifest.clone();
        let agent = manifest
            .as_ref()
            .map(|m| m.agent.clone())
            .unwrap_or_default();
        Self {
            provider: config.provider.clone().or(agent.provider),
            model: config.model.clone().or(agent.model).unwrap_or_default(),
            manifest,
            usage: UsageTotals::default(),
            cost: Some(0.0),
            counted: 0,
            answer: Default::default(),
            keep_answer: false,
            turns: 0,
            requests: 0,
            tool_calls: 0,
            output_schema: config.output_schema.clone(),
        }
    }

    /// Whether to keep the last answer's text for [`Tally::result`];
    /// without it the result's answer is empty.
    pub(super) fn keeping_answer(mut self, keep: bool) -> Self {
        self.keep_answer = keep;
        self
    }

    pub(super) fn see(&mut self, event: &Event) {
        match event {
            Event::SessionStarted {
                provider, model, ..
            } => {
                self.provider = Some(provider.clone());
                self.model = model.clone();
            }
            Event::ProviderChanged { provider } => self.provider = Some(provider.clone()),
            Event::ModelChanged { model } => self.model = model.clone(),
            Event::TurnBegin { .. } => self.turns += 1,
            Event::ToolCallBegin { .. } => self.tool_calls += 1,
            Event::RequestEnd { message, usage, .. } => {
                self.requests += 1;
                if self.keep_answer {
                    self.answer = message.text.clone();
                }
                self.count(*usage);
            }
            Event::Subagent { event, .. } => {
                if let Event::RequestEnd { usage, .. } = event.as_ref() {
                    self.count(*usage);
                }
            }
            _ => {}
        }
    }

    /// Adds a request's tokens, and their cost at the current model's price.
    fn count(&mut self, usage: Option<corral_protocol::Usage>) {
        match usage {
            Some(u) => {
                self.usage.input_tokens += u64::from(u.input_tokens);
                self.usage.output_tokens += u64::from(u.output_tokens);
            }
            None => self.usage.unreported += 1,
        }
        self.counted += 1;
        let price = self.price();
        self.cost = match (self.cost, usage, price) {
            (Some(sum), Some(u), Some(p)) => {
                Some(sum + p.cost(u64::from(u.input_tokens), u64::from(u.output_tokens)))
            }
            _ => None,
        };
    }

    /// The price of the model in use, if the manifest gives one.
    fn price(&self) -> Option<corral_core::manifest::Price> {
        let manifest = self.manifest.as_ref()?;
        let model = if self.model.is_empty() {
            let provider = self.provider.as_deref()?;
            let decl = manifest.plugins.iter().find(|p| p.name == provider)?;
            decl.config.get("model")?.clone()
        } else {
            self.model.clone()
        };
        manifest.agent.models.get(&model)?.price
    }

    pub(super) fn result(
        self,
        session_id: String,
        stop: StopReason,
        took: std::time::Duration,
    ) -> RunResult {
        // Nothing was asked: free if the price is known, unknown otherwise.
        let cost_usd = match self.counted {
            0 => self.price().map(|_| 0.0),
            _ => self.cost,
        };
        let answer = self.answer.into_string();
        let output = match (&self.output_schema, stop) {
            (Some(schema), StopReason::FinalAnswer) => schema.check(&answer).ok(),
            _ => None,
        };
        RunResult {
            session_id,
            stop_reason: stop,
            output,
            answer,
            usage: self.usage,
            cost_usd,
            duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            turns: self.turns,
            requests: self.requests,
            tool_calls: self.tool_calls,
        }
    }
}

impl Tally {
    /// A tally for the UI: the workspace's manifest (for prices), and the
    /// provider and model the session was opened with.
    pub(super) fn for_workspace(workspace: &std::path::Path, config: &SessionConfig) -> Self {
        let manifest = config
            .manifest
            .clone()
            .or_else(|| corral_core::manifest::load(workspace).ok());
        Self::new(&SessionConfig {
            manifest,
            provider: config.provider.clone(),
            model: config.model.clone(),
            ..SessionConfig::default()
        })
    }

    /// The cost so far in US dollars; `None` when a request could not be
    /// priced (or none was made and the price is unknown).
    pub(super) fn cost(&self) -> Option<f64> {
        match self.counted {
            0 => self.price().map(|_| 0.0),
            _ => self.cost,
        }
    }
}
