//! Tier 4's scan: a multi-literal prefilter picks candidate lines, regexes run only there.
//!
//! Running thirteen backtracking-capable regexes over every byte of a log costs ~21 MB/s; a
//! gigabyte-sized trial log took most of a minute. Every built-in pattern is line-local and
//! lists [`Trigger`]s (literals each of its matches contains), so the scan instead:
//!
//! 1. finds each occurrence of a trigger of a still-unfired pattern with one Aho-Corasick
//!    automaton (SIMD "Teddy" search), resuming one byte after each hit;
//! 2. skips a hit whose word condition fails (`INF` inside `INFO`);
//! 3. otherwise runs the hit's pattern's regex on the hit's line (with the window before it
//!    visible to look-behinds), once per pattern and line;
//! 4. rebuilds the automaton without a pattern once it fired, and stops when all have.
//!
//! A pattern's regex is compiled the first time one of its triggers is hit (and then kept for
//! the process): compiling all thirteen took 11–14 ms, most of a one-trial build's schedule, and
//! a clean log hits no trigger at all.
//!
//! Resuming one byte on visits every occurrence: two triggers can only start at the same byte
//! if one is a prefix of the other, which the catalogue forbids. So this finds exactly what
//! running each regex over the whole window finds, provided no match contains a newline and
//! every match contains one of its pattern's triggers (both checked by catalogue and corpus
//! tests, and the equivalence by a property test here).

use std::ops::ControlFlow;
use std::sync::{LazyLock, OnceLock};

use aho_corasick::{AhoCorasick, Input, MatchKind};

use crate::catalogue::{Pattern, Trigger, TIER4_PATTERNS};

/// A pattern library compiled for scanning.
pub(crate) struct Library {
    patterns: Vec<Pattern>,
    ids: Vec<&'static str>,
    /// Compiled on first use (see the module docs). `Err` holds a compile error; such a pattern
    /// never fires and its triggers are dropped once found.
    regexes: Vec<OnceLock<Result<fancy_regex::Regex, Box<fancy_regex::Error>>>>,
    /// Every trigger with its pattern's index, in catalogue order.
    triggers: Vec<(usize, Trigger)>,
    /// Leftmost search over the triggers of every compiled pattern (the start of each scan).
    initial: Finder,
}

/// A leftmost-first automaton over some triggers; `map[i]` is pattern `i`'s index in
/// `Library::triggers`.
#[derive(Clone)]
struct Finder {
    ac: AhoCorasick,
    map: Vec<usize>,
}

impl Finder {
    /// The leftmost-first automaton over the triggers of the patterns marked `live`.
    fn new(triggers: &[(usize, Trigger)], live: &[bool]) -> Finder {
        let map: Vec<usize> = (0..triggers.len())
            .filter(|&i| live[triggers[i].0])
            .collect();
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(map.iter().map(|&i| triggers[i].1.literal))
            .expect("trigger literals build an automaton");
        Finder { ac, map }
    }
}

/// The built-in Tier-4 library, compiled once per process.
pub(crate) static TIER4: LazyLock<Library> = LazyLock::new(|| Library::new(TIER4_PATTERNS));

impl Library {
    pub(crate) fn new(patterns: &[Pattern]) -> Library {
        assert!(patterns.len() <= 64, "candidate sets are u64 masks");
        let triggers: Vec<(usize, Trigger)> = patterns
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.triggers.iter().map(move |t| (i, *t)))
            .collect();
        let initial = Finder::new(&triggers, &vec![true; patterns.len()]);
        Library {
            patterns: patterns.to_vec(),
            ids: patterns.iter().map(|p| p.id).collect(),
            regexes: patterns.iter().map(|_| OnceLock::new()).collect(),
            triggers,
            initial,
        }
    }

    pub(crate) fn ids(&self) -> &[&'static str] {
        &self.ids
    }

    /// Pattern `i`'s regex, compiled on first use.
    fn regex(&self, i: usize) -> &Result<fancy_regex::Regex, Box<fancy_regex::Error>> {
        self.regexes[i].get_or_init(|| self.patterns[i].compile())
    }

    /// `(id, message)` for each pattern that does not compile (compiling every one).
    #[cfg(test)]
    pub(crate) fn errors(&self) -> impl Iterator<Item = (&'static str, &fancy_regex::Error)> {
        (0..self.ids.len())
            .filter_map(|i| self.regex(i).as_ref().err().map(|e| (self.ids[i], &**e)))
    }

    /// A fresh scan: nothing fired yet.
    pub(crate) fn scan(&self) -> Scan<'_> {
        // A pattern known not to compile is not looked for.
        let live: Vec<bool> = self
            .regexes
            .iter()
            .map(|r| !matches!(r.get(), Some(Err(_))))
            .collect();
        let done = !live.contains(&true);
        Scan {
            lib: self,
            fired: vec![false; self.ids.len()],
            finder: (!done).then(|| {
                if live.iter().all(|l| *l) {
                    self.initial.clone()
                } else {
                    Finder::new(&self.triggers, &live)
                }
            }),
            live,
            hits: Vec::new(),
            broken: Vec::new(),
        }
    }
}

/// The state of one log scan (one trial's stdout and stderr).
pub(crate) struct Scan<'a> {
    lib: &'a Library,
    fired: Vec<bool>,
    /// Compiled and not yet fired.
    live: Vec<bool>,
    /// `None` once nothing is left to look for.
    finder: Option<Finder>,
    /// `(pattern, line start, line end)` in the current window for each pattern that fired in
    /// it, for callers that report where (`aorta classify`); cleared by [`Scan::take_hits`].
    hits: Vec<(usize, usize, usize)>,
    /// `(id, message)` of each pattern found not to compile during this scan.
    broken: Vec<(&'static str, Box<fancy_regex::Error>)>,
}

impl Scan<'_> {
    /// Scans `w[s..]` (`w[..s]` is context already scanned). `Break` once every pattern fired.
    pub(crate) fn window(&mut self, w: &str, s: usize) -> ControlFlow<()> {
        let bytes = w.as_bytes();
        let mut pos = s;
        // The line of the last counted trigger, and the patterns already tried on it.
        let mut line = (usize::MAX, usize::MAX);
        let mut tried = 0u64;
        while let Some(finder) = &self.finder {
            let Some(m) = finder.ac.find(Input::new(bytes).span(pos..bytes.len())) else {
                return ControlFlow::Continue(());
            };
            // One byte on, not past the match: another trigger may start inside this one.
            pos = m.start() + 1;
            let (pattern, trigger) = self.lib.triggers[finder.map[m.pattern().as_usize()]];
            if !trigger.holds_at(bytes, m.start(), m.end()) {
                continue;
            }
            if line.0 == usize::MAX || m.start() > line.1 {
                let start = memchr::memrchr(b'\n', &bytes[s..m.start()]).map_or(s, |i| s + i + 1);
                let end =
                    memchr::memchr(b'\n', &bytes[m.end()..]).map_or(bytes.len(), |i| m.end() + i);
                line = (start, end);
                tried = 0;
            }
            if tried & (1 << pattern) != 0 {
                continue;
            }
            tried |= 1 << pattern;
            let re = match self.lib.regex(pattern) {
                Ok(re) => re,
                Err(e) => {
                    self.broken.push((self.lib.ids[pattern], e.clone()));
                    self.retire(pattern);
                    continue;
                }
            };
            // A runtime error (backtrack limit) is a no-match; built-ins do not backtrack.
            if matches!(re.find_from_pos(&w[..line.1], line.0), Ok(Some(_))) {
                self.fired[pattern] = true;
                self.hits.push((pattern, line.0, line.1));
                self.retire(pattern);
            }
        }
        ControlFlow::Break(())
    }

    /// Stops looking for `pattern` (it fired, or it does not compile): the automaton is rebuilt
    /// without its triggers, and dropped once nothing is left.
    fn retire(&mut self, pattern: usize) {
        self.live[pattern] = false;
        self.finder = self
            .live
            .contains(&true)
            .then(|| Finder::new(&self.lib.triggers, &self.live));
    }

    /// The patterns that fired in the last window, with their line's byte range in it.
    pub(crate) fn take_hits(&mut self) -> std::vec::Drain<'_, (usize, usize, usize)> {
        self.hits.drain(..)
    }

    /// The compiled regex of pattern `i` (only called for patterns that fired, so compiled).
    pub(crate) fn regex(&self, i: usize) -> Option<&fancy_regex::Regex> {
        self.lib.regex(i).as_ref().ok()
    }

    /// `(id, message)` of each pattern whose trigger was hit but whose regex does not compile.
    pub(crate) fn broken(&self) -> &[(&'static str, Box<fancy_regex::Error>)] {
        &self.broken
    }

    /// Which patterns fired, by catalogue index.
    pub(crate) fn fired(&self) -> &[bool] {
        &self.fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{scan_windows, WindowParams};
    use proptest::prelude::*;

    fn fast(lib: &Library, text: &str, params: WindowParams) -> Vec<&'static str> {
        let mut scan = lib.scan();
        scan_windows(text.as_bytes(), params, |w, s| scan.window(w, s)).unwrap();
        lib.ids()
            .iter()
            .zip(scan.fired())
            .filter(|(_, f)| **f)
            .map(|(id, _)| *id)
            .collect()
    }

    /// What the scan must equal: every regex over the whole text.
    fn reference(lib: &Library, text: &str) -> Vec<&'static str> {
        (0..lib.ids().len())
            .filter(|&i| lib.regex(i).as_ref().unwrap().is_match(text).unwrap())
            .map(|i| lib.ids()[i])
            .collect()
    }

    const BIG: WindowParams = crate::stream::DEFAULT_WINDOWS;

    #[test]
    fn samples_fire_and_negatives_do_not() {
        for (i, p) in TIER4_PATTERNS.iter().enumerate() {
            let text = format!("step 1 ok\n{}\nstep 2 ok\n", p.sample);
            assert!(fast(&TIER4, &text, BIG).contains(&p.id), "{}", p.id);
            let text = format!("{}\n", p.negative);
            assert!(
                !fast(&TIER4, &text, BIG).contains(&p.id),
                "{} on its negative",
                p.id
            );
            assert_eq!(TIER4.ids()[i], p.id);
        }
    }

    #[test]
    fn a_failed_word_check_does_not_hide_a_later_trigger_on_the_line() {
        // `INF` in INFO and `nan` in nanoseconds are skipped; the `nan` later still counts.
        let text = "INFO step 3 took 120 nanoseconds, loss: nan\n";
        assert_eq!(fast(&TIER4, text, BIG), ["tier4:nan_signature"]);
        assert!(fast(&TIER4, "INFO INFO nanoseconds Infinitely\n", BIG).is_empty());
    }

    #[test]
    fn one_line_can_fire_several_patterns_and_fired_ones_stop_being_searched() {
        let text = "RuntimeError: CUDA error: out of memory\nRuntimeError: CUDA error: an illegal memory access was encountered\n";
        assert_eq!(
            fast(&TIER4, text, BIG),
            [
                "tier4:cuda_error",
                "tier4:cuda_oom",
                "tier4:illegal_memory_access"
            ]
        );
    }

    #[test]
    fn look_behind_sees_the_text_before_the_line() {
        // The key's look-behind is at the line start: the previous line's end must count.
        assert_eq!(fast(&TIER4, "x\nloss=nan\n", BIG), ["tier4:nan_signature"]);
        assert!(fast(&TIER4, "best_loss=inf\n", BIG).is_empty());
    }

    #[test]
    fn a_pattern_that_does_not_compile_is_reported_and_never_fires() {
        const BROKEN: &[Pattern] = &[
            Pattern {
                regex: "(unclosed",
                ..TIER4_PATTERNS[0]
            },
            TIER4_PATTERNS[1],
        ];
        let lib = Library::new(BROKEN);
        let text = "Traceback (most recent call last):\nhipErrorNoBinaryForGpu\n";
        // Compiled lazily: the scan that hits its trigger reports it.
        let mut scan = lib.scan();
        scan_windows(text.as_bytes(), BIG, |w, s| scan.window(w, s)).unwrap();
        assert_eq!(scan.broken().len(), 1, "{:?}", scan.broken());
        assert_eq!(scan.broken()[0].0, BROKEN[0].id);
        assert_eq!(fast(&lib, text, BIG), ["tier4:hip_error"]);
        assert_eq!(lib.errors().count(), 1);
    }

    /// Log fragments: trigger look-alikes, prefixes, separators, values, newlines.
    fn fragment() -> impl Strategy<Value = String> {
        let mut pieces: Vec<String> = TIER4_PATTERNS
            .iter()
            .flat_map(|p| [p.sample.to_string(), p.negative.to_string()])
            .collect();
        pieces.extend(
            TIER4_PATTERNS
                .iter()
                .flat_map(|p| p.triggers.iter().map(|t| t.literal.to_string())),
        );
        for piece in [
            "\n",
            "\n",
            "\n",
            "\r",
            " ",
            "\t",
            ":",
            "=",
            "'",
            "\"",
            "|",
            "│",
            "-",
            "_",
            "/",
            "(",
            "[rank0]:",
            "[default3]:",
            "ERROR",
            "01-02 12:00:00",
            "[engine.py:160]",
            " 45%|███▌ | 45/100 [00:10<00:12, 4.5it/s]",
            "loss",
            "Loss",
            "lm loss",
            "train/loss",
            "eval_loss",
            "best_loss",
            "loss_scale",
            "nan",
            "NaN",
            "NAN",
            "inf",
            "-inf",
            "Infinity",
            "INFO",
            "nanoseconds",
            "tensor(",
            "is",
            "é",
            "x",
            "0",
            "Traceback (most recent call last):",
            "hipErrorOutOfMemory",
            "cudaError_t",
            "CUDA error: ",
            "out of memory",
            "Cuda failure 'out of memory'",
        ] {
            pieces.push(piece.to_string());
        }
        proptest::sample::select(pieces)
    }

    /// Lines built like trainer output, so that non-finite losses and their look-alikes
    /// appear often (random fragments alone rarely line a key, separator and value up).
    fn metric_line() -> impl Strategy<Value = String> {
        let pick = |v: &[&str]| {
            proptest::sample::select(v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        (
            pick(&[
                "",
                "[rank0]: ",
                "{",
                "| ",
                "wandb:   ",
                "INFO 01-02 12:00:00 [x.py:1] ",
                " 45%|█ | 45/100 [00:10<00:12, loss=",
            ]),
            pick(&[
                "loss",
                "Loss",
                "LOSS",
                "lm loss",
                "train/loss",
                "'loss'",
                "\"eval_loss\"",
                "best_loss",
                "loss_scale",
                "val",
                "Detected",
            ]),
            pick(&[
                ": ", "=", " ", " is ", ": \"", " | ", " │ ", " = ", "", " became ", " NaN ",
            ]),
            pick(&[
                "nan",
                "NaN",
                "NAN",
                "Nan",
                "inf",
                "-inf",
                "Inf",
                "INF",
                "Infinity",
                "-Infinity",
                "INFINITY",
                "infinity",
                "tensor(nan",
                "np.float32(nan)",
                "1.23",
                "nanx",
                "INFO",
                "loss detected",
                "+nan",
            ]),
            pick(&["", ",", "}", " ", "\n", "-", "x", ")", "]", "\r\n"]),
        )
            .prop_map(|(a, b, c, d, e)| format!("{a}{b}{c}{d}{e}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        /// The prefiltered scan finds exactly what every regex over the whole text finds,
        /// at any window geometry that keeps whole lines within the overlap.
        #[test]
        fn prefiltered_scan_equals_whole_text_regexes(
            parts in proptest::collection::vec(prop_oneof![fragment(), metric_line()], 0..40),
            chunk in 64usize..3000,
        ) {
            let text: String = parts.concat();
            let want = reference(&TIER4, &text);
            prop_assert_eq!(&fast(&TIER4, &text, BIG), &want, "text {:?}", text);
            // Windows end at line ends unless a line is longer than a chunk (then `$` and `\b`
            // see the cut as an end, with or without the prefilter).
            let longest = text.split('\n').map(str::len).max().unwrap_or(0);
            if longest < chunk {
                prop_assert_eq!(&fast(&TIER4, &text, WindowParams { chunk, overlap: chunk }), &want, "text {:?}", text);
            }
        }
    }
}
