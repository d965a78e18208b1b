//! Streaming a log through regexes in overlapping windows, with bounded memory.
//!
//! AORTA read each log whole and kept only its first 10 MiB (§12.2.5), so the crash at the end
//! of a long log — where crashes usually are — was never seen. Here the whole stream is scanned:
//!
//! * bytes are read in chunks of [`WindowParams::chunk`] and decoded as UTF-8 with replacement
//!   (U+FFFD per invalid sequence, like Python's `errors="replace"`); an incomplete sequence at
//!   the end of a read is held back until the next read, so no character is ever split;
//! * a window ends at the last newline of the text read so far, so `$`, `\b` and look-aheads see
//!   whole lines; only a line longer than a chunk is cut mid-line;
//! * the next window starts at least [`WindowParams::overlap`] bytes before the previous one
//!   ended, moved back to a line start when one is near, and keeps the character before its
//!   start as context: searches begin *at* the window start with that context visible, so
//!   `(?m)^` matches exactly at real line starts and never at a cut.
//!
//! **Guarantee:** a match of at most `overlap` bytes lies wholly inside at least one window, so
//! chunking never hides it. A longer match (or a look-around reaching further than that) may
//! be missed when it straddles a window boundary. Memory is about `2 × chunk + 2 × overlap`.

use std::io::{self, Read};
use std::ops::ControlFlow;

/// Window geometry. Tests use tiny values to exercise boundaries densely.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WindowParams {
    /// Bytes read per `read` call, and the least new text a window adds.
    pub chunk: usize,
    /// Bytes every window shares with the previous one.
    pub overlap: usize,
}

/// 1 MiB chunks, 64 KiB overlap: any plausible log line or traceback header fits the overlap.
pub(crate) const DEFAULT_WINDOWS: WindowParams = WindowParams {
    chunk: 1 << 20,
    overlap: 64 << 10,
};

/// Incremental UTF-8 decoding with replacement that never splits a character across reads.
#[derive(Default)]
struct Utf8Decoder {
    pending: Vec<u8>,
}

impl Utf8Decoder {
    fn push(&mut self, bytes: &[u8], out: &mut String) {
        self.pending.extend_from_slice(bytes);
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // `valid` is valid UTF-8 by construction; lossy never allocates a change.
                    out.push_str(&String::from_utf8_lossy(valid));
                    match e.error_len() {
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = after.get(n..).unwrap_or(&[]);
                        }
                        // Incomplete sequence at the end: wait for the next read.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let start = self.pending.len() - keep;
        self.pending.drain(..start);
    }

    /// End of stream: a held-back incomplete sequence becomes one replacement character.
    fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            out.push_str(&String::from_utf8_lossy(&self.pending));
            self.pending.clear();
        }
    }
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Feeds `reader` to `visit(window, start)` window by window: `window[..start]` is context
/// already scanned, the search must begin at byte `start`. `visit` returns `Break` to stop
/// early (every detector has fired). Always visits at least once, even for an empty stream.
pub(crate) fn scan_windows<R: Read>(
    reader: R,
    params: WindowParams,
    mut visit: impl FnMut(&str, usize) -> ControlFlow<()>,
) -> io::Result<()> {
    scan_numbered(reader, params, |w| visit(w.text, w.start))
}

/// One window of [`scan_numbered`]: `text[..start]` is context, the search begins at `start`.
pub(crate) struct Window<'a> {
    pub text: &'a str,
    pub start: usize,
    /// Newlines in the stream before `text[0]`: the 0-based line number of `text[0]`.
    pub first_line: u64,
}

impl Window<'_> {
    /// The 1-based line number of byte `pos` of the window.
    pub fn line_of(&self, pos: usize) -> u64 {
        self.first_line
            + memchr::memchr_iter(b'\n', &self.text.as_bytes()[..pos]).count() as u64
            + 1
    }

    /// The line holding byte `pos`, without its line terminator.
    pub fn line_at(&self, pos: usize) -> &str {
        let b = self.text.as_bytes();
        let start = memchr::memrchr(b'\n', &b[..pos]).map_or(0, |i| i + 1);
        let end = memchr::memchr(b'\n', &b[pos..]).map_or(b.len(), |i| pos + i);
        self.text[start..end].trim_end_matches('\r')
    }
}

/// [`scan_windows`] that also says where each window lies in the stream's lines.
pub(crate) fn scan_numbered<R: Read>(
    mut reader: R,
    params: WindowParams,
    mut visit: impl FnMut(&Window<'_>) -> ControlFlow<()>,
) -> io::Result<()> {
    let chunk = params.chunk.max(1);
    let overlap = params.overlap;
    // Read in small pieces and gather them into the window: a chunk-sized (1 MiB) read buffer
    // costs more to zero than reading a short trial's whole log, and a short log is read
    // without a heap buffer at all (`ReadBuf`).
    let mut bufs = aorta_fsutil::ReadBuf::new(chunk.min(64 << 10));
    let mut total = 0u64;
    let mut decoder = Utf8Decoder::default();
    let mut buf = String::new();
    let mut from = 0usize; // where the next window's search starts
    let mut scanned_to = 0usize; // end of the last window; new text lies after it
    let mut first_line = 0u64; // newlines drained before buf[0]
    loop {
        let raw = bufs.next(total);
        let n = match reader.read(raw) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        let eof = n == 0;
        if eof {
            decoder.finish(&mut buf);
        } else {
            decoder.push(&raw[..n], &mut buf);
        }
        if !eof && buf.len() - scanned_to < chunk {
            continue;
        }
        let end = if eof {
            buf.len()
        } else {
            buf[scanned_to..]
                .rfind('\n')
                .map_or(buf.len(), |i| scanned_to + i + 1)
        };
        let window = Window {
            text: &buf[..end],
            start: from,
            first_line,
        };
        if visit(&window).is_break() || eof {
            return Ok(());
        }
        // The next window starts `overlap` bytes back, preferably at a line start.
        let mut keep = floor_boundary(&buf, end.saturating_sub(overlap));
        let look_from = floor_boundary(&buf, keep.saturating_sub(overlap));
        if let Some(i) = buf[look_from..keep].rfind('\n') {
            keep = look_from + i + 1;
        }
        // Keep the one character before `keep` as context for `^`, `\b` and look-behinds.
        let ctx = buf[..keep].char_indices().next_back().map_or(0, |(i, _)| i);
        first_line += memchr::memchr_iter(b'\n', &buf.as_bytes()[..ctx]).count() as u64;
        buf.drain(..ctx);
        from = keep - ctx;
        scanned_to = end - ctx;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn windows(text: &[u8], params: WindowParams) -> Vec<(String, usize)> {
        let mut out = Vec::new();
        scan_windows(text, params, |w, s| {
            out.push((w.to_string(), s));
            ControlFlow::Continue(())
        })
        .unwrap();
        out
    }

    /// A reader that hands out one byte per read, the worst case for the decoder.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            match (self.0.split_first(), out.first_mut()) {
                (Some((b, rest)), Some(o)) => {
                    *o = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn decoder_never_splits_a_character_and_replaces_invalid_bytes() {
        let text = "héllo wörld ✓ 🚀\n".repeat(3);
        let mut bytes = text.clone().into_bytes();
        bytes.extend_from_slice(b"bad \xff\xfe end \xe2\x9c"); // invalid, then a truncated ✓
        let mut out = String::new();
        let mut dec = Utf8Decoder::default();
        for b in &bytes {
            dec.push(std::slice::from_ref(b), &mut out);
        }
        dec.finish(&mut out);
        assert_eq!(out, String::from_utf8_lossy(&bytes));
        assert!(out.starts_with(&text));
    }

    #[test]
    fn windows_end_at_line_boundaries_and_cover_the_whole_text() {
        let text = (0..200).map(|i| format!("line {i}\n")).collect::<String>();
        let ws = windows(
            text.as_bytes(),
            WindowParams {
                chunk: 64,
                overlap: 16,
            },
        );
        assert!(ws.len() > 5);
        for (w, _) in &ws[..ws.len() - 1] {
            assert!(w.ends_with('\n'), "{w:?}");
        }
        assert!(ws.last().unwrap().0.ends_with("line 199\n"));
        // Each window's search start is a line start, with the previous char as context.
        for (w, s) in &ws[1..] {
            assert_eq!(&w[..*s], "\n");
        }
    }

    #[test]
    fn line_numbers_survive_tiny_overlapping_windows() {
        let text = (0..300)
            .map(|i| format!("line {i} é\n"))
            .collect::<String>();
        let mut seen = 0;
        let params = WindowParams {
            chunk: 37,
            overlap: 20,
        };
        scan_numbered(text.as_bytes(), params, |w| {
            for (pos, _) in w.text.match_indices("line ").filter(|(p, _)| *p >= w.start) {
                let n: u64 = w.line_at(pos)[5..].trim_end_matches(" é").parse().unwrap();
                assert_eq!(w.line_of(pos), n + 1, "window at line {}", w.first_line);
                seen += 1;
            }
            ControlFlow::Continue(())
        })
        .unwrap();
        assert!(seen >= 300);
    }

    #[test]
    fn empty_stream_is_visited_once() {
        assert_eq!(windows(b"", DEFAULT_WINDOWS), vec![(String::new(), 0)]);
    }

    #[test]
    fn one_byte_reads_still_decode_correctly() {
        let text = "ünïcödé line\n".repeat(50);
        let mut seen = String::new();
        scan_windows(
            Trickle(text.as_bytes()),
            WindowParams {
                chunk: 7,
                overlap: 5,
            },
            |w, _| {
                seen.push_str(w);
                ControlFlow::Continue(())
            },
        )
        .unwrap();
        assert!(!seen.contains('\u{FFFD}'));
    }

    fn fires_windowed(re: &fancy_regex::Regex, text: &[u8], params: WindowParams) -> bool {
        let mut hit = false;
        scan_windows(text, params, |w, s| {
            hit = re.find_from_pos(w, s).unwrap().is_some();
            if hit {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
        hit
    }

    proptest! {
        /// Windowing is invisible to matches no longer than the overlap, including `^` anchors.
        #[test]
        fn windowed_scan_agrees_with_whole_text(
            text in "[abé\n]{0,300}",
            chunk in 1usize..40,
            overlap in 12usize..40,
        ) {
            for pat in [r"a[bé]{0,3}a", r"(?m)^b\n?a", r"(?m)^ab", r"éé", r"(?<=b)a"] {
                let re = fancy_regex::Regex::new(pat).unwrap();
                let whole = re.is_match(&text).unwrap();
                let windowed = fires_windowed(&re, text.as_bytes(), WindowParams { chunk, overlap });
                prop_assert_eq!(whole, windowed, "pattern {} chunk {} overlap {}", pat, chunk, overlap);
            }
        }

        /// Arbitrary bytes (multi-byte and invalid sequences cut anywhere by reads): every
        /// window is a piece of the whole lossy decoding, the last one ends it, and matches
        /// agree with the whole text.
        #[test]
        fn windows_are_pieces_of_the_lossy_decoding(
            bytes in proptest::collection::vec(
                proptest::sample::select(vec![b'a', b'b', b'\n', 0xC3, 0xA9, 0xF0, 0x9F, 0x9A, 0x80, 0xFF]), 0..300),
            chunk in 1usize..40,
            overlap in 16usize..40,
        ) {
            let whole = String::from_utf8_lossy(&bytes).into_owned();
            let ws = windows(&bytes, WindowParams { chunk, overlap });
            for (w, s) in &ws {
                prop_assert!(whole.contains(w.as_str()));
                prop_assert!(w.is_char_boundary(*s));
            }
            prop_assert!(whole.ends_with(ws.last().unwrap().0.as_str()));
            for pat in [r"a[^\n]{0,2}a", "\u{FFFD}a", r"(?m)^\u{FFFD}"] {
                let re = fancy_regex::Regex::new(pat).unwrap();
                prop_assert_eq!(re.is_match(&whole).unwrap(), fires_windowed(&re, &bytes, WindowParams { chunk, overlap }));
            }
        }
    }
}
