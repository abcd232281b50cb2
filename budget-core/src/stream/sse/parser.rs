//! The event stream's parser, by the WHATWG HTML spec's event stream
//! interpretation rules: lines ended by CRLF, LF or CR; comments; the
//! fields `id`, `event`, `data` and `retry`; an event dispatched at a
//! blank line. Invalid UTF-8 and an overlong line are typed errors (the
//! spec would replace or buffer them).

use std::collections::VecDeque;
use std::time::Duration;

use super::Event;
use crate::stream::StreamError;

/// What the parser read: an event to deliver, or a `retry:` field (`None`
/// for digits too many to fit in a `u64` of milliseconds).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    Event(Event),
    Retry(Option<Duration>),
}

/// The parser's state across chunks of one connection, and the last event
/// id across connections.
#[derive(Debug)]
pub(crate) struct Parser {
    line: Vec<u8>,
    /// The previous chunk ended with CR: a LF first in this one ends
    /// nothing.
    after_cr: bool,
    /// The connection's first line is still to come (a BOM is stripped
    /// from it).
    first_line: bool,
    data: String,
    event: String,
    /// The spec's "last event ID buffer" (set by `id:`).
    id_buffer: String,
    /// The spec's "last event ID string" (set when an event is
    /// dispatched): what a reconnect sends as `Last-Event-ID`.
    last_id: String,
    max_line: usize,
    out: VecDeque<Parsed>,
}

impl Parser {
    /// A parser refusing lines over `max_line` bytes, resuming after
    /// `last_id` (empty: none).
    pub(crate) fn new(max_line: usize, last_id: String) -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            data: String::new(),
            event: String::new(),
            id_buffer: last_id.clone(),
            last_id,
            max_line,
            out: VecDeque::new(),
        }
    }

    /// Reads `chunk`; what it completes is queued for [`pop`](Self::pop).
    /// After an error the connection's state is unusable: call
    /// [`reconnected`](Self::reconnected) before the next connection's
    /// bytes.
    pub(crate) fn feed(&mut self, mut chunk: &[u8]) -> Result<(), StreamError> {
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while !chunk.is_empty() {
            let Some(end) = chunk.iter().position(|b| *b == b'\n' || *b == b'\r') else {
                self.extend(chunk)?;
                return Ok(());
            };
            self.extend(&chunk[..end])?;
            let cr = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
            if cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            self.line_done()?;
        }
        Ok(())
    }

    /// The next event or `retry:` read.
    pub(crate) fn pop(&mut self) -> Option<Parsed> {
        self.out.pop_front()
    }

    /// A new connection: the half-read line and event are dropped (the
    /// spec's rule), the last event id and the events read kept.
    pub(crate) fn reconnected(&mut self) {
        self.line.clear();
        self.after_cr = false;
        self.first_line = true;
        self.data.clear();
        self.event.clear();
        self.id_buffer.clone_from(&self.last_id);
        // What was read before stays queued: its ids are already the last.
    }

    /// The id a reconnect resumes after (empty: none).
    pub(crate) fn last_id(&self) -> &str {
        &self.last_id
    }

    fn extend(&mut self, bytes: &[u8]) -> Result<(), StreamError> {
        if self.line.len().saturating_add(bytes.len()) > self.max_line {
            self.line.clear();
            return Err(StreamError::LineTooLong {
                limit: self.max_line,
            });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line_done(&mut self) -> Result<(), StreamError> {
        let bytes = std::mem::take(&mut self.line);
        let line = String::from_utf8(bytes).map_err(|_| StreamError::InvalidUtf8)?;
        let line = if std::mem::take(&mut self.first_line) {
            line.strip_prefix('\u{feff}').unwrap_or(&line).to_owned()
        } else {
            line
        };
        self.process(&line);
        Ok(())
    }

    fn process(&mut self, line: &str) {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => value.clone_into(&mut self.id_buffer),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                let ms = value.parse::<u64>().ok().map(Duration::from_millis);
                self.out.push_back(Parsed::Retry(ms));
            }
            _ => {}
        }
    }

    fn dispatch(&mut self) {
        self.last_id.clone_from(&self.id_buffer);
        if self.data.is_empty() {
            self.event.clear();
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the last LF
        let event = match std::mem::take(&mut self.event) {
            e if e.is_empty() => "message".to_owned(),
            e => e,
        };
        let id = (!self.last_id.is_empty()).then(|| self.last_id.clone());
        self.out.push_back(Parsed::Event(Event { id, event, data }));
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn parse(chunks: &[&[u8]]) -> Vec<Parsed> {
        let mut p = Parser::new(1024, String::new());
        for c in chunks {
            p.feed(c).unwrap();
        }
        std::iter::from_fn(|| p.pop()).collect()
    }

    fn ev(id: Option<&str>, event: &str, data: &str) -> Parsed {
        Parsed::Event(Event {
            id: id.map(str::to_owned),
            event: event.to_owned(),
            data: data.to_owned(),
        })
    }

    #[test]
    fn fields_comments_and_multi_line_data() {
        let got = parse(&[b": hello\nid: 7\nevent: tick\ndata: a\ndata:b\ndata\n\n"]);
        assert_eq!(got, [ev(Some("7"), "tick", "a\nb\n")]);
        // No data: nothing dispatched, but the id is the last one now.
        let got = parse(&[b"id: 1\ndata: x\n\nid: 2\n\ndata: y\n\n"]);
        assert_eq!(
            got,
            [ev(Some("1"), "message", "x"), ev(Some("2"), "message", "y")]
        );
        // An unknown field and a line without a colon are ignored.
        assert_eq!(
            parse(&[b"foo: bar\ndata: z\n\n"]),
            [ev(None, "message", "z")]
        );
    }

    #[test]
    fn crlf_lf_and_cr_end_lines_even_split_across_chunks() {
        let want = [ev(Some("1"), "message", "a"), ev(Some("2"), "message", "b")];
        assert_eq!(
            parse(&[b"id: 1\r\ndata: a\r\n\r\nid: 2\rdata: b\r\r"]),
            want
        );
        assert_eq!(
            parse(&[b"id: 1\r", b"\ndata: a\r", b"\n\r", b"\nid: 2\ndata: b\n\n"]),
            want
        );
        assert_eq!(
            parse(&[b"\xef\xbb\xbfdata: bom\n\n"]),
            [ev(None, "message", "bom")]
        );
    }

    #[test]
    fn an_id_with_nul_and_a_retry_not_digits_are_ignored() {
        let got = parse(&[b"id: 5\n\nid: a\0b\ndata: x\n\nretry: 12a\nretry: -1\nretry:\n"]);
        assert_eq!(got, [ev(Some("5"), "message", "x")]);
        let got = parse(&[b"retry: 2500\nretry: 99999999999999999999999\n"]);
        assert_eq!(
            got,
            [
                Parsed::Retry(Some(Duration::from_millis(2500))),
                Parsed::Retry(None)
            ]
        );
    }

    #[test]
    fn a_long_line_and_invalid_utf8_are_typed_errors() {
        let mut p = Parser::new(8, String::new());
        assert!(matches!(
            p.feed(b"data: 0123456789"),
            Err(StreamError::LineTooLong { limit: 8 })
        ));
        p.reconnected();
        assert!(matches!(
            p.feed(b"data: \xff\n"),
            Err(StreamError::InvalidUtf8)
        ));
    }

    #[test]
    fn a_reconnect_drops_the_half_event_and_keeps_the_last_id() {
        let mut p = Parser::new(1024, "3".into());
        p.feed(b"id: 4\ndata: x\n\nid: 5\ndata: half").unwrap();
        assert_eq!(p.pop(), Some(ev(Some("4"), "message", "x")));
        p.reconnected();
        assert_eq!(p.last_id(), "4");
        p.feed(b"\n\ndata: y\n\n").unwrap();
        assert_eq!(p.pop(), Some(ev(Some("4"), "message", "y")));
        assert_eq!(p.pop(), None);
    }

    proptest! {
        #[test]
        fn any_bytes_in_any_chunks_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
            cut in 0usize..512,
            max_line in 1usize..64,
        ) {
            let mut p = Parser::new(max_line, String::new());
            let cut = cut.min(bytes.len());
            for chunk in [&bytes[..cut], &bytes[cut..]] {
                if p.feed(chunk).is_err() {
                    p.reconnected();
                }
                while let Some(parsed) = p.pop() {
                    if let Parsed::Event(e) = parsed {
                        prop_assert!(!e.id.unwrap_or_default().contains('\0'));
                        prop_assert!(e.data.len() <= bytes.len());
                    }
                }
            }
        }

        #[test]
        fn events_survive_any_chunking(
            datas in proptest::collection::vec("[a-z ]{0,12}", 1..6),
            cut in 0usize..200,
        ) {
            let mut text = String::new();
            for (i, d) in datas.iter().enumerate() {
                text.push_str(&format!("id: {i}\r\ndata: {d}\r\n\r\n"));
            }
            let bytes = text.as_bytes();
            let cut = cut.min(bytes.len());
            let got = parse(&[&bytes[..cut], &bytes[cut..]]);
            let want: Vec<Parsed> = datas
                .iter()
                .enumerate()
                .map(|(i, d)| ev(Some(&i.to_string()), "message", d))
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
