//! Text on its way to the screen: made inert, tabs expanded, and wrapped to
//! a width span by span.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar as _;

/// `text` with escape sequences and invisible characters made visible
/// ([`crate::terminal::inert`]) and tabs turned into spaces, since a tab's
/// width depends on where the terminal thinks the cursor is.
pub(crate) fn clean(text: &str) -> String {
    crate::terminal::inert(text).replace('\t', "    ")
}

/// The display width of `s`.
pub(crate) fn width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// `s` cut to `max` columns, with an ellipsis when cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_owned();
    }
    let mut out = String::new();
    let mut w = 0;
    for c in s.chars() {
        let cw = c.width().unwrap_or(0);
        if w + cw + 1 > max {
            break;
        }
        out.push(c);
        w += cw;
    }
    out.push('…');
    out
}

/// Wraps one line to `width` columns, breaking at spaces where it can and
/// inside words where it must. Continuation lines start with `indent`.
pub(crate) fn wrap(line: Line<'static>, width: usize, indent: &str) -> Vec<Line<'static>> {
    let width = width.max(indent.len() + 4);
    let total: usize = line.spans.iter().map(|s| self::width(&s.content)).sum();
    if total <= width {
        return vec![line];
    }
    // Words keep their style: (text, style) pieces split at spaces.
    let mut pieces: Vec<(String, Style)> = Vec::new();
    for span in &line.spans {
        let mut cur = String::new();
        for c in span.content.chars() {
            cur.push(c);
            if c == ' ' {
                pieces.push((std::mem::take(&mut cur), span.style));
            }
        }
        if !cur.is_empty() {
            pieces.push((cur, span.style));
        }
    }
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut cur: Vec<Span<'static>> = Vec::new();
    let mut used = 0;
    let push_line = |out: &mut Vec<Line<'static>>, cur: &mut Vec<Span<'static>>| {
        let mut l = Line::from(std::mem::take(cur));
        l.style = line.style;
        out.push(l);
    };
    for (piece, style) in pieces {
        let w = self::width(&piece);
        let trimmed = self::width(piece.trim_end());
        if used + trimmed > width && used > 0 {
            push_line(&mut out, &mut cur);
            cur.push(Span::raw(indent.to_owned()));
            used = indent.len();
        }
        if used + trimmed <= width {
            cur.push(Span::styled(piece, style));
            used += w;
            continue;
        }
        // A word longer than the line: cut it.
        let mut chunk = String::new();
        for c in piece.chars() {
            let cw = c.width().unwrap_or(0);
            if used + cw > width {
                cur.push(Span::styled(std::mem::take(&mut chunk), style));
                push_line(&mut out, &mut cur);
                cur.push(Span::raw(indent.to_owned()));
                used = indent.len();
            }
            chunk.push(c);
            used += cw;
        }
        if !chunk.is_empty() {
            cur.push(Span::styled(chunk, style));
        }
    }
    if !cur.is_empty() {
        push_line(&mut out, &mut cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'static>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn wraps_at_spaces_and_cuts_long_words() {
        let lines = wrap(Line::from("one two three four"), 9, "");
        assert_eq!(plain(&lines), ["one two ", "three ", "four"]);
        let lines = wrap(Line::from("abcdefghijkl"), 5, "");
        assert_eq!(plain(&lines), ["abcde", "fghij", "kl"]);
    }

    #[test]
    fn clean_makes_escapes_visible() {
        assert_eq!(clean("a\x1b[2Jb\tc"), "a\\x1b[2Jb    c");
        assert_eq!(truncate("abcdef", 4), "abc…");
    }
}
