//! The prompt editor: multi-line text with a cursor, history, and long
//! pastes kept out of sight until sent.

/// Pastes with more lines than this are shown as one placeholder.
const PASTE_LINES: usize = 5;

/// The text being typed.
#[derive(Debug, Default)]
pub(crate) struct Input {
    /// The text, with placeholders for long pastes.
    pub(crate) text: String,
    /// Byte offset of the cursor in `text`.
    pub(crate) cursor: usize,
    /// Long pastes, by placeholder number.
    pastes: Vec<String>,
    history: Vec<String>,
    /// Position while walking the history (`history.len()` = not walking).
    walk: usize,
}

impl Input {
    pub(crate) fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    pub(crate) fn insert(&mut self, c: char) {
        self.text.insert(self.cursor, c);
        self.cursor += c.len_utf8();
    }

    pub(crate) fn insert_str(&mut self, s: &str) {
        self.text.insert_str(self.cursor, s);
        self.cursor += s.len();
    }

    /// A paste: short ones go in as typed, long ones as a placeholder.
    pub(crate) fn paste(&mut self, s: &str) {
        let s = s.replace("\r\n", "\n").replace('\r', "\n");
        let lines = s.lines().count();
        if lines > PASTE_LINES {
            self.pastes.push(s);
            let tag = format!("[paste #{}: {lines} lines]", self.pastes.len());
            self.insert_str(&tag);
        } else {
            self.insert_str(&s);
        }
    }

    pub(crate) fn backspace(&mut self) {
        if let Some(c) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= c.len_utf8();
            self.text.remove(self.cursor);
        }
    }

    pub(crate) fn delete(&mut self) {
        if self.cursor < self.text.len() {
            self.text.remove(self.cursor);
        }
    }

    pub(crate) fn left(&mut self) {
        if let Some(c) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= c.len_utf8();
        }
    }

    pub(crate) fn right(&mut self) {
        if let Some(c) = self.text[self.cursor..].chars().next() {
            self.cursor += c.len_utf8();
        }
    }

    pub(crate) fn home(&mut self) {
        self.cursor = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
    }

    pub(crate) fn end(&mut self) {
        self.cursor += self.text[self.cursor..]
            .find('\n')
            .unwrap_or(self.text.len() - self.cursor);
    }

    /// Deletes the word before the cursor.
    pub(crate) fn delete_word(&mut self) {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end();
        let start = trimmed.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    pub(crate) fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
        self.pastes.clear();
        self.walk = self.history.len();
    }

    /// Whether the cursor is on the first line (Up walks the history there).
    pub(crate) fn on_first_line(&self) -> bool {
        !self.text[..self.cursor].contains('\n')
    }

    /// Whether the cursor is on the last line.
    pub(crate) fn on_last_line(&self) -> bool {
        !self.text[self.cursor..].contains('\n')
    }

    /// Starts the history with `prompts` (oldest first), as a new session
    /// of the same workspace remembers them.
    pub(crate) fn set_history(&mut self, prompts: Vec<String>) {
        self.history = prompts;
        self.walk = self.history.len();
    }

    pub(crate) fn history_up(&mut self) {
        if self.walk > 0 {
            self.walk -= 1;
            self.text = self.history[self.walk].clone();
            self.cursor = self.text.len();
        }
    }

    pub(crate) fn history_down(&mut self) {
        if self.walk < self.history.len() {
            self.walk += 1;
            self.text = self.history.get(self.walk).cloned().unwrap_or_default();
            self.cursor = self.text.len();
        }
    }

    /// Takes the text to send, with pastes put back, and remembers it.
    pub(crate) fn take(&mut self) -> String {
        let mut text = std::mem::take(&mut self.text);
        self.history.push(text.clone());
        for (i, paste) in self.pastes.iter().enumerate() {
            let lines = paste.lines().count();
            text = text.replace(&format!("[paste #{}: {lines} lines]", i + 1), paste);
        }
        self.clear();
        text
    }

    /// The word the cursor is in, and where it starts.
    pub(crate) fn current_word(&self) -> (usize, &str) {
        let before = &self.text[..self.cursor];
        let start = before.rfind(char::is_whitespace).map_or(0, |i| {
            i + before[i..].chars().next().map_or(1, char::len_utf8)
        });
        (start, &self.text[start..self.cursor])
    }

    /// Replaces the word the cursor is in with `with`.
    pub(crate) fn replace_word(&mut self, with: &str) {
        let (start, _) = self.current_word();
        self.text.replace_range(start..self.cursor, with);
        self.cursor = start + with.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_pastes_are_collapsed_and_sent_whole() {
        let mut input = Input::default();
        input.insert_str("see ");
        let paste = "1\n2\n3\n4\n5\n6\n7";
        input.paste(paste);
        assert_eq!(input.text, "see [paste #1: 7 lines]");
        assert_eq!(input.take(), format!("see {paste}"));
        input.history_up();
        assert_eq!(input.text, "see [paste #1: 7 lines]");
    }

    #[test]
    fn editing_and_words() {
        let mut input = Input::default();
        input.insert_str("read @src/ma");
        assert_eq!(input.current_word(), (5, "@src/ma"));
        input.replace_word("@src/main.rs ");
        assert_eq!(input.text, "read @src/main.rs ");
        input.delete_word();
        assert_eq!(input.text, "read ");
        input.backspace();
        input.left();
        input.insert('x');
        assert_eq!(input.text, "reaxd");
    }
}
