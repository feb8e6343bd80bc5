//! The token budget of a request: the model's limits (what the provider
//! plugin reports, under the manifest's `[agent.models."ID"]` override) and
//! an estimate of what a request takes before it is sent.
//!
//! The estimate counts the request's bytes as JSON (messages and tool
//! schemas) and divides by bytes per token. Until the provider reports a
//! request's usage, a fixed ratio is used ([`BYTES_PER_TOKEN`]); after, the
//! ratio of the last reported request (its `input_tokens` over its bytes),
//! so the estimate follows the model's own tokenizer. No tokenizer runs in
//! the host: none fits every provider, and the calibrated ratio is within a
//! few percent of the reported count on the next request, which only differs
//! by the newest messages.

use crate::manifest::ModelOverride;
use crate::protocol::{ChatRequest, ModelInfo};
use std::collections::BTreeMap;

/// Bytes per token before any usage is reported. BPE tokenizers give about
/// four bytes per token on English and code; three is on the safe side, so an
/// uncalibrated estimate is larger than the real count and compaction comes
/// early rather than late.
pub const BYTES_PER_TOKEN: f64 = 3.0;

/// The context window assumed for a model whose window nobody reports:
/// the smallest window among the current models the built-in providers
/// know (gpt-4o's 128k). Compacting against it keeps every request far
/// below what a provider plugin's memory limit holds; a model with a
/// smaller window says so by refusing a request, which compacts again.
pub const DEFAULT_WINDOW: u32 = 128_000;

/// Default share of the window past which the history is compacted.
pub const DEFAULT_COMPACT_AT: f64 = 0.8;

/// Share of the window one tool output may take at most, so one call cannot
/// fill the context on its own.
pub const TOOL_OUTPUT_SHARE: f64 = 0.15;

/// The limits of the model in use and the running calibration.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// The model's limits, when known.
    pub info: Option<ModelInfo>,
    /// Compact when a request would take more than this share of the window.
    pub compact_at: f64,
    /// Tokens per byte measured on the last reported request.
    tokens_per_byte: Option<f64>,
}

impl Budget {
    /// A budget for `info`, compacting at `compact_at` of its window.
    pub fn new(info: Option<ModelInfo>, compact_at: f64) -> Self {
        Self {
            info,
            compact_at,
            tokens_per_byte: None,
        }
    }

    /// The model's context window, when known.
    pub fn window(&self) -> Option<u32> {
        self.info.as_ref().and_then(|i| i.context_window)
    }

    /// The estimated tokens of `bytes` of request.
    pub fn estimate(&self, bytes: usize) -> u32 {
        let per_byte = self.tokens_per_byte.unwrap_or(1.0 / BYTES_PER_TOKEN);
        let t = (bytes as f64 * per_byte).ceil();
        if t >= f64::from(u32::MAX) {
            u32::MAX
        } else {
            t as u32
        }
    }

    /// Bytes that make `tokens` at the current ratio.
    pub fn bytes_for(&self, tokens: u32) -> usize {
        let per_byte = self.tokens_per_byte.unwrap_or(1.0 / BYTES_PER_TOKEN);
        (f64::from(tokens) / per_byte) as usize
    }

    /// Learns the ratio from a request of `bytes` the provider counted as
    /// `input_tokens`. Ratios no tokenizer gives (a provider that reports
    /// nothing useful) are ignored.
    pub fn calibrate(&mut self, bytes: usize, input_tokens: u32) {
        if plausible(bytes, input_tokens) {
            self.tokens_per_byte = Some(f64::from(input_tokens) / bytes as f64);
        }
    }

    /// The most tokens a request may take before the history is compacted.
    pub fn threshold(&self) -> Option<u32> {
        self.window()
            .map(|w| (f64::from(w) * self.compact_at).floor() as u32)
    }

    /// Tokens as a share of the window.
    pub fn share(&self, tokens: u32) -> Option<f32> {
        self.window()
            .filter(|w| *w > 0)
            .map(|w| (f64::from(tokens) / f64::from(w)) as f32)
    }

    /// The most bytes one tool output may give the model: a share of the
    /// window, never more than `ceiling`.
    pub fn tool_output_limit(&self, ceiling: usize) -> usize {
        match self.window() {
            Some(w) => {
                let share = self.bytes_for((f64::from(w) * TOOL_OUTPUT_SHARE) as u32);
                share.clamp(1024, ceiling.max(1024)).min(ceiling)
            }
            None => ceiling,
        }
    }
}

/// Whether a request of `bytes` counted as `input_tokens` gives a ratio a
/// tokenizer could give (between 1 and 8 bytes per token).
pub fn plausible(bytes: usize, input_tokens: u32) -> bool {
    if bytes < 256 || input_tokens == 0 {
        return false;
    }
    let r = f64::from(input_tokens) / bytes as f64;
    (1.0 / 8.0..=1.0).contains(&r)
}

/// The limits of `model`: the provider's entry for it (its exact id, else
/// the longest entry it starts with followed by `-`, as dated ids extend a
/// family name), with the manifest's override on top.
pub fn resolve(
    models: &[ModelInfo],
    model: &str,
    overrides: &BTreeMap<String, ModelOverride>,
) -> Option<ModelInfo> {
    let found = models.iter().find(|m| m.id == model).or_else(|| {
        models
            .iter()
            .filter(|m| {
                model
                    .strip_prefix(m.id.as_str())
                    .is_some_and(|rest| rest.starts_with('-'))
            })
            .max_by_key(|m| m.id.len())
    });
    let mut info = found.cloned();
    if let Some(o) = overrides.get(model) {
        let i = info.get_or_insert_with(|| ModelInfo {
            id: model.to_owned(),
            ..ModelInfo::default()
        });
        if o.context_window.is_some() {
            i.context_window = o.context_window;
        }
        if o.max_output_tokens.is_some() {
            i.max_output_tokens = o.max_output_tokens;
        }
        if let Some(images) = o.accepts_images {
            i.accepts_images = images;
        }
    }
    info
}

/// The size of `request` as the estimate counts it: its messages and tool
/// schemas as JSON.
pub fn request_bytes(request: &ChatRequest) -> usize {
    json_size(request)
}

/// The size of `value` as JSON, counted without keeping the bytes.
pub fn json_size<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = Counter(0);
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// Counts bytes without keeping them.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn info(id: &str, w: u32) -> ModelInfo {
        ModelInfo {
            id: id.into(),
            context_window: Some(w),
            max_output_tokens: Some(1000),
            accepts_images: false,
        }
    }

    #[test]
    fn dated_ids_take_their_family_and_the_override_wins() {
        let table = [info("claude-sonnet-4", 1), info("claude-sonnet-4-5", 2)];
        let none = BTreeMap::new();
        let got = resolve(&table, "claude-sonnet-4-5-20250929", &none).unwrap();
        assert_eq!(got.context_window, Some(2));
        assert_eq!(resolve(&table, "claude-sonnet-45", &none), None);
        let mut o = BTreeMap::new();
        o.insert(
            "claude-sonnet-4-5-20250929".to_owned(),
            ModelOverride {
                context_window: Some(9000),
                ..ModelOverride::default()
            },
        );
        let got = resolve(&table, "claude-sonnet-4-5-20250929", &o).unwrap();
        assert_eq!(
            (got.context_window, got.max_output_tokens),
            (Some(9000), Some(1000))
        );
        let unknown = resolve(&[], "local", &o);
        assert_eq!(unknown, None);
    }

    #[test]
    fn calibration_follows_reported_usage() {
        let mut b = Budget::new(Some(info("m", 10_000)), 0.8);
        assert_eq!(b.estimate(3000), 1000);
        b.calibrate(4000, 1000);
        assert_eq!(b.estimate(8000), 2000);
        // Nonsense is ignored.
        b.calibrate(4000, 40_000);
        assert_eq!(b.estimate(8000), 2000);
        assert_eq!(b.threshold(), Some(8000));
        assert_eq!(b.tool_output_limit(32 * 1024), 6000);
        assert_eq!(b.tool_output_limit(2048), 2048);
    }
}
