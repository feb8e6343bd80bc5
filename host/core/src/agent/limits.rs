//! What a run may spend and what its answer must be, for scripts: a
//! ceiling in US dollars (`corral run --max-cost-usd X`), counted from the
//! usage each request reports at the model's price, and a JSON Schema the
//! final answer must fit (`--output-schema FILE`), the model asked again
//! with what did not fit a bounded number of times.

use super::Agent;
use crate::protocol::{Event, Usage};
use tokio::sync::mpsc::UnboundedSender;

/// How often a final answer that does not fit the schema is asked for
/// again before the run stops (so at most this many answers plus one).
pub const ANSWER_RETRIES: u32 = 2;

/// A spending ceiling (`--max-cost-usd`).
#[derive(Debug, Clone)]
pub struct SpendLimit {
    /// US dollars the run may spend.
    pub limit_usd: f64,
    /// The model's price, when the manifest gives one (without it nothing
    /// can be counted, and the run does not start).
    pub price: Option<crate::manifest::Price>,
    /// The model, to name it.
    pub model: String,
}

/// What the loop does with a final answer.
pub(super) enum Fit {
    /// It fits (or the run has no schema).
    Yes,
    /// It does not: the model is asked again with this text.
    Again(String),
    /// It did not fit, as often as the model was asked: why the run stops.
    GiveUp(String),
}

/// What a budget has counted so far.
#[derive(Debug, Default)]
pub(super) struct Spent {
    /// Dollars of the requests counted.
    usd: f64,
    /// A request reported no usage: nothing more can be counted.
    uncounted: bool,
}

impl Agent {
    /// Counts one request's `usage` against the budget, if the run has one.
    pub(super) fn spend(&mut self, usage: Option<Usage>) {
        let Some(budget) = &self.options.spend_limit else {
            return;
        };
        match (usage, &budget.price) {
            (Some(u), Some(price)) => {
                self.spent.usd += price.cost(u64::from(u.input_tokens), u64::from(u.output_tokens));
            }
            _ => self.spent.uncounted = true,
        }
    }

    /// Why the next request must not be sent: the budget is spent, or can
    /// no longer be counted; `None` without a budget.
    pub(super) fn over_budget(&self) -> Option<String> {
        let budget = self.options.spend_limit.as_ref()?;
        let limit = budget.limit_usd;
        if budget.price.is_none() {
            let model = if budget.model.is_empty() {
                "the provider's default model".to_owned()
            } else {
                format!("`{}`", budget.model)
            };
            return Some(format!(
                "--max-cost-usd needs the price of {model}, which the manifest does not give: set \
                 [agent.models.\"NAME\"] price = {{ input_per_mtok = …, output_per_mtok = … }} \
                 and name the model"
            ));
        }
        if self.spent.uncounted {
            return Some(format!(
                "the provider reported no usage for a request, so what the run spends can no \
                 longer be counted against --max-cost-usd {limit}"
            ));
        }
        (self.spent.usd >= limit).then(|| {
            format!(
                "the run spent ${:.4} of its --max-cost-usd {limit}",
                self.spent.usd
            )
        })
    }

    /// Judges a final answer `text` against the run's output schema:
    /// logs a rejection (which a resumed history replays as the retry) and
    /// says what the loop does next.
    pub(super) fn fit(&mut self, text: &str, ui: &UnboundedSender<Event>) -> anyhow::Result<Fit> {
        let Some(schema) = &self.options.output_schema else {
            return Ok(Fit::Yes);
        };
        let reason = match schema.check(text) {
            Ok(_) => {
                self.rejected = 0;
                return Ok(Fit::Yes);
            }
            Err(reason) => reason.to_string(),
        };
        self.rejected += 1;
        if self.rejected > ANSWER_RETRIES {
            let n = self.rejected;
            self.rejected = 0;
            return Ok(Fit::GiveUp(format!(
                "the final answer did not fit --output-schema after {n} answers: {reason}"
            )));
        }
        let retry = format!(
            "Your final answer does not fit the required JSON Schema: {reason}. Answer again with \
             only a JSON value that fits this schema:\n{}",
            schema.source()
        );
        self.emit(
            ui,
            Event::AnswerRejected {
                attempt: self.rejected,
                reason,
                retry: retry.clone(),
            },
        )?;
        Ok(Fit::Again(retry))
    }

    /// The system prompt's section on the answer's form, with a schema.
    pub(super) fn answer_section(&self) -> Option<String> {
        let schema = self.options.output_schema.as_ref()?;
        Some(format!(
            "\n\n# Final answer\nYour final answer (the message without tool calls that ends \
             your work) must be only a JSON value that fits this JSON Schema, with no other \
             text:\n{}\n",
            schema.source()
        ))
    }
}
