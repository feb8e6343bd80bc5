//! The transcript: its entries (prompts, answers, tool cards, notices and
//! diffs), the answer streaming into one, where each call's card is, and
//! the conversation's prompts, which going back cuts it at.

use super::cards::{ToolCard, ToolState};
use crate::protocol::ToolCall;
use ratatui::text::Line;
use std::collections::{HashMap, HashSet};

#[derive(Debug)]
pub(crate) enum Body {
    User(String),
    Assistant(String),
    Tools(Vec<ToolCard>),
    Notice { text: String, error: bool },
    Diff(String),
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) body: Body,
    /// Bumped on every change, so cached lines can tell they are stale.
    pub(crate) version: u64,
    /// Rendered lines: (width, version, expanded, lines).
    pub(crate) cache: Option<(u16, u64, bool, Vec<Line<'static>>)>,
    /// For an answer still streaming: its lines, rendered a block at a
    /// time, so a frame's work does not grow with the answer.
    pub(crate) live: Option<super::markdown::Streaming>,
}

impl Entry {
    fn new(body: Body) -> Self {
        Self {
            body,
            version: 0,
            cache: None,
            live: None,
        }
    }
}

/// A prompt of the conversation as it stands: its turn, its text, and the
/// transcript entry that shows it.
#[derive(Debug, Clone)]
pub(crate) struct Prompt {
    pub(crate) turn: u32,
    pub(crate) text: String,
    pub(crate) entry: usize,
}

/// The transcript's entries and what finds its way around them.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    pub(crate) entries: Vec<Entry>,
    /// The assistant entry text deltas go to in this request.
    pub(crate) streaming: Option<usize>,
    /// Where each call's card is: (entry, card).
    pub(crate) cards: HashMap<String, (usize, usize)>,
    /// The conversation's prompts as it stands, oldest first.
    pub(crate) prompts: Vec<Prompt>,
    /// Calls of the last assistant message, by id.
    pub(crate) pending_calls: HashMap<String, ToolCall>,
    /// Tools whose only effect is reading (their calls are grouped).
    read_only: HashSet<String>,
    /// Which plugin provides each tool.
    plugins: HashMap<String, String>,
    /// The request the last tool group belongs to.
    request_seq: u64,
    group_seq: u64,
}

impl Transcript {
    /// Learns the tools: `(name, plugin, read_only)`.
    pub(crate) fn set_tools(&mut self, tools: impl IntoIterator<Item = (String, String, bool)>) {
        for (name, plugin, read_only) in tools {
            if read_only {
                self.read_only.insert(name.clone());
            }
            self.plugins.insert(name, plugin);
        }
        // Cards drawn before the list arrived (a resumed transcript) get
        // their plugin now.
        for entry in &mut self.entries {
            if let Body::Tools(cards) = &mut entry.body {
                for card in cards.iter_mut().filter(|c| c.plugin.is_none()) {
                    card.plugin = self.plugins.get(&card.call.name).cloned();
                }
                entry.version += 1;
            }
        }
    }

    pub(crate) fn push(&mut self, body: Body) -> usize {
        self.entries.push(Entry::new(body));
        self.entries.len() - 1
    }

    /// Whether the last entry is the notice `text`.
    pub(crate) fn ends_with_notice(&self, text: &str) -> bool {
        matches!(self.entries.last().map(|e| &e.body),
            Some(Body::Notice { text: t, .. }) if t == text)
    }

    /// The user's prompt `text`, of `turn`.
    pub(crate) fn prompt(&mut self, turn: u32, text: &str) {
        let entry = self.push(Body::User(text.to_owned()));
        self.prompts.push(Prompt {
            turn,
            text: text.to_owned(),
            entry,
        });
    }

    /// The prompt of `turn`, if the conversation holds it.
    pub(crate) fn prompt_of(&self, turn: u32) -> Option<&str> {
        self.prompts
            .iter()
            .find(|p| p.turn == turn)
            .map(|p| p.text.as_str())
    }

    /// A new request to the model: the answer before it is over.
    pub(crate) fn request_begin(&mut self) {
        self.end_stream();
        self.request_seq += 1;
    }

    /// The streaming answer, if any, is over (a new request, or the turn
    /// ended without one): it is rendered whole from now on.
    pub(crate) fn end_stream(&mut self) {
        if let Some(i) = self.streaming.take()
            && let Some(e) = self.entries.get_mut(i)
        {
            e.live = None;
            e.version += 1;
        }
    }

    /// More of the answer streaming in.
    pub(crate) fn text_delta(&mut self, text: &str) {
        match self.streaming {
            Some(i) => {
                if let Body::Assistant(t) = &mut self.entries[i].body {
                    t.push_str(text);
                }
                self.touch(i);
            }
            None => {
                let i = self.push(Body::Assistant(text.to_owned()));
                self.entries[i].live = Some(Default::default());
                self.streaming = Some(i);
            }
        }
    }

    /// The request's whole answer `text` and its calls: it replaces what
    /// streamed, or is added when nothing did.
    pub(crate) fn answer(&mut self, text: &str, calls: &[ToolCall]) {
        match self.streaming.take() {
            Some(i) => {
                if let Body::Assistant(t) = &mut self.entries[i].body {
                    t.clear();
                    t.push_str(text);
                }
                // Finished: rendered whole, once.
                self.entries[i].live = None;
                self.touch(i);
            }
            None if !text.trim().is_empty() => {
                self.push(Body::Assistant(text.to_owned()));
            }
            None => {}
        }
        for call in calls {
            self.pending_calls.insert(call.id.clone(), call.clone());
        }
    }

    /// An answer interrupted as `text`: what streamed is kept as that.
    pub(crate) fn interrupted(&mut self, text: &str) {
        match self.streaming.take() {
            Some(i) => {
                if let Some(e) = self.entries.get_mut(i) {
                    e.body = Body::Assistant(text.to_owned());
                    e.live = None;
                    e.version += 1;
                }
            }
            None => {
                self.push(Body::Assistant(text.to_owned()));
            }
        }
    }

    /// Cuts the conversation back to before the prompt of `turn`; whether
    /// any entry went.
    pub(crate) fn cut(&mut self, turn: u32) -> bool {
        let first = self
            .prompts
            .iter()
            .find(|p| p.turn >= turn)
            .map(|p| p.entry);
        if let Some(first) = first {
            self.entries.truncate(first);
            self.cards.retain(|_, (e, _)| *e < first);
            self.streaming = None;
        }
        self.prompts.retain(|p| p.turn < turn);
        first.is_some()
    }

    fn touch(&mut self, i: usize) {
        if let Some(e) = self.entries.get_mut(i) {
            e.version += 1;
        }
    }

    /// The card of the call `id`, marked changed.
    pub(crate) fn card(&mut self, id: &str) -> Option<&mut ToolCard> {
        let (e, c) = *self.cards.get(id)?;
        self.entries[e].version += 1;
        match &mut self.entries[e].body {
            Body::Tools(cards) => cards.get_mut(c),
            _ => None,
        }
    }

    /// Whether the call `id` has a card.
    pub(crate) fn has_card(&self, id: &str) -> bool {
        self.cards.contains_key(id)
    }

    /// A card for `call`: read-only calls of one request share an entry.
    pub(crate) fn add_card(&mut self, call: ToolCall, state: ToolState) {
        let read_only = self.read_only.contains(&call.name);
        let plugin = self.plugins.get(&call.name).cloned();
        let id = call.id.clone();
        let card = ToolCard::new(call, plugin, state);
        let last = self.entries.len().wrapping_sub(1);
        let join = read_only
            && self.group_seq == self.request_seq
            && matches!(self.entries.last().map(|e| &e.body), Some(Body::Tools(cards))
                if cards.iter().all(|c| self.read_only.contains(&c.call.name)));
        if join {
            if let Some(Body::Tools(cards)) = self.entries.last_mut().map(|e| &mut e.body) {
                cards.push(card);
                self.cards.insert(id, (last, cards.len() - 1));
            }
            self.touch(last);
        } else {
            let i = self.push(Body::Tools(vec![card]));
            self.cards.insert(id, (i, 0));
            self.group_seq = self.request_seq;
        }
    }
}
