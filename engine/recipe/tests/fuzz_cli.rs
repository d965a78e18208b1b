//! CLI-level fuzzing of recipe loading (issue #18): a structured mutator over the shipped
//! recipes (`recipes/`) and the test fixtures (`tests/fixtures/`), each case run through the
//! real binary, `aorta sweep run --recipe CASE --dry-run`, under a wall-clock bound and an
//! address-space bound (`prlimit --as`). A case fails on a panic (exit 101), a signal (an
//! allocation refused under the bound aborts), any exit code other than 0 or 2, a run over the
//! time bound, or a diagnostic that quotes a file it should not.
//!
//! Ignored by default (it needs the binary); `tests/fuzz-recipes.sh` builds it and runs this.
//! Settings, all optional but `AORTA_BIN`:
//!
//! | variable | default | |
//! |---|---|---|
//! | `AORTA_BIN` | required | the `aorta` binary |
//! | `AORTA_FUZZ_CASES` | 2000 | mutated cases (the fixed regression cases run in addition) |
//! | `AORTA_FUZZ_SEED` | 18 | cases are a pure function of (seed, index) |
//! | `AORTA_FUZZ_CASE` | | run only this case index, and keep its files |
//! | `AORTA_FUZZ_JOBS` | 2 | cases run at once |
//! | `AORTA_FUZZ_TIMEOUT_S` | 10 | per run |
//! | `AORTA_FUZZ_MEM_MIB` | 512 | address-space bound per run (RLIMIT_AS) |
//! | `AORTA_FUZZ_DIR` | `target/fuzz-recipes` | case files; failing cases are kept there |

use aorta_source::{parse_document, Node, SourceFile, Syntax, Value};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

// ------------------------------------------------------------------ randomness

/// splitmix64: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, index: u64) -> Rng {
        let mut r = Rng(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next();
        r
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

// ------------------------------------------------------------------ seeds

struct Seed {
    name: String,
    text: String,
    json: bool,
    /// The parsed tree when the seed is valid YAML/JSON: structured edits need its spans.
    tree: Option<Node>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn seeds(dir: &Path) -> Vec<Seed> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.sort();
    paths
        .into_iter()
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            let json = p.extension().is_some_and(|e| e == "json");
            let syntax = if json { Syntax::Json } else { Syntax::Yaml };
            let tree = parse_document(
                &SourceFile::new(p.display().to_string(), text.clone()),
                syntax,
            )
            .ok();
            Some(Seed {
                name: p.file_name()?.to_string_lossy().into_owned(),
                text,
                json,
                tree,
            })
        })
        .collect()
}

// ------------------------------------------------------------------ structured edits

/// One replacement of a byte range of the seed text.
struct Edit {
    range: std::ops::Range<usize>,
    with: Vec<u8>,
    what: String,
}

/// Every mapping entry and every value in the tree, with its depth.
struct Spots<'a> {
    entries: Vec<(&'a Node, &'a Node)>,
    values: Vec<&'a Node>,
    seqs: Vec<&'a Node>,
}

fn spots(root: &Node) -> Spots<'_> {
    fn walk<'a>(n: &'a Node, s: &mut Spots<'a>) {
        s.values.push(n);
        match &n.value {
            Value::Seq(items) => {
                s.seqs.push(n);
                for i in items {
                    walk(i, s);
                }
            }
            Value::Map(entries) => {
                for (k, v) in entries {
                    s.entries.push((k, v));
                    walk(v, s);
                }
            }
            _ => {}
        }
    }
    let mut s = Spots {
        entries: Vec::new(),
        values: Vec::new(),
        seqs: Vec::new(),
    };
    walk(root, &mut s);
    s
}

const TYPE_SWAPS: &[&str] = &[
    "[]",
    "{}",
    "null",
    "~",
    "true",
    "no",
    "off",
    "'text'",
    "\"\"",
    "1.5",
    "-1",
    "0",
    "[1, [2, {a: b}]]",
    "{x: 1}",
    "'1'",
    "1e3",
    "2024-01-01",
];
const HUGE_NUMBERS: &[&str] = &[
    "4294967295",
    "4294967296",
    "18446744073709551616",
    "99999999999999999999999999999",
    "-9223372036854775808",
    "9223372036854775807",
    "1.0e+309",
    "-1.0e+309",
    ".inf",
    "-.inf",
    ".nan",
    "100000",
    "100001",
    "50000",
    "10000",
    "10001",
    "0x7fffffff",
    "0b11111111111111111111111111111111",
    "1_000_000_000",
    "190:20:30",
    "0777777777777",
];
const TAGS: &[&str] = &[
    "!!python/object:os.system x",
    "!!binary aGVsbG8=",
    "!custom {a: 1}",
    "!!set {a, b}",
    "!!omap [a: 1]",
    "!!timestamp 2024-01-01",
    "!!python/tuple [a, b]",
    "!!int 'x'",
    "!!float '1'",
];
const INVALID_UTF8: &[&[u8]] = &[
    b"\xff",
    b"\xc3\x28",
    b"\xe2\x82",
    b"\xf0\x9f\x98",
    b"\xed\xa0\x80",
    b"\x00",
];

fn nested(depth: usize, map: bool) -> String {
    if map {
        format!("{}1{}", "{a: ".repeat(depth), "}".repeat(depth))
    } else {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }
}

/// A "billion laughs" list: `levels` of anchors, each aliasing the previous one `width` times.
fn laughs(levels: usize, width: usize) -> String {
    let mut parts = vec![format!("&l0 [{}]", vec!["lol"; width].join(", "))];
    for i in 1..levels {
        parts.push(format!(
            "&l{i} [{}]",
            vec![format!("*l{}", i - 1); width].join(", ")
        ));
    }
    format!("[{}]", parts.join(", "))
}

fn long_string(rng: &mut Rng) -> String {
    let len = *rng.pick(&[
        65_535usize,
        65_536,
        65_540,
        70_000,
        200_000,
        900_000,
        1_100_000,
    ]);
    let c = *rng.pick(&['x', 'é', '"', '\'', ' ']);
    let body: String = std::iter::repeat_n(c, len).collect();
    match rng.below(3) {
        0 => format!("'{}'", body.replace('\'', "''")),
        1 => format!("\"{}\"", body.replace('"', "\\\"")),
        _ => body.replace([' ', '"', '\''], "y"),
    }
}

/// One structured edit of a parsed seed.
fn structured_edit(rng: &mut Rng, seed: &Seed, tree: &Node) -> Option<Edit> {
    let s = spots(tree);
    let value = *rng.pick(&s.values);
    let vr = value.span.clone();
    let edit = |range: std::ops::Range<usize>, with: String, what: String| {
        Some(Edit {
            range,
            with: with.into_bytes(),
            what,
        })
    };
    match rng.below(12) {
        0 if !s.entries.is_empty() => {
            let (k, v) = *rng.pick(&s.entries);
            edit(
                k.span.start..v.span.end.max(k.span.end),
                String::new(),
                format!("delete entry {:?}", k.repr()),
            )
        }
        1 => edit(vr, rng.pick(TYPE_SWAPS).to_string(), "type swap".into()),
        2 => {
            let n = rng.pick(HUGE_NUMBERS).to_string();
            edit(vr, n.clone(), format!("number {n}"))
        }
        3 => {
            let depth = *rng.pick(&[50usize, 199, 200, 201, 1_000, 100_000]);
            let map = rng.chance(50);
            edit(
                vr,
                nested(depth, map),
                format!("nesting {depth} ({})", if map { "maps" } else { "lists" }),
            )
        }
        4 => {
            let (text, what) = match rng.below(7) {
                0 => (laughs(9, 9), "billion laughs 9x9".to_string()),
                1 => (laughs(4, 30), "laughs 4x30".into()),
                2 => ("*nope".into(), "alias to an undefined anchor".into()),
                3 => ("{<<: 1}".into(), "merge key onto a number".into()),
                4 => (
                    "[&m {a: 1, b: 2}, {<<: *m, b: 3}, {<<: [*m, 2]}]".into(),
                    "merge keys".into(),
                ),
                5 => (
                    format!(
                        "[&s '{}', {}]",
                        "s".repeat(1 << 16),
                        vec!["*s"; 2000].join(", ")
                    ),
                    "aliases of a 64 KiB string".into(),
                ),
                _ => ("&a {*a: 1}".into(), "self alias".into()),
            };
            edit(vr, text, what)
        }
        5 => {
            let long = long_string(rng);
            let what = format!("long scalar ({} bytes)", long.len());
            edit(vr, long, what)
        }
        6 => edit(vr, rng.pick(TAGS).to_string(), "tag".into()),
        7 if !s.seqs.is_empty() => {
            let seq = *rng.pick(&s.seqs);
            let items = seq.as_seq().unwrap_or_default();
            let item = items
                .first()
                .map(|n| {
                    String::from_utf8_lossy(&seed.text.as_bytes()[n.span.clone()]).into_owned()
                })
                .unwrap_or_else(|| "none".into());
            let n = *rng.pick(&[2usize, 100, 101, 1_000, 10_001, 20_000]);
            edit(
                seq.span.clone(),
                format!("[{}]", vec![item.as_str(); n].join(", ")),
                format!("list of {n} copies"),
            )
        }
        8 if !s.entries.is_empty() => {
            // A copy of an entry right after it: a duplicate key (last one wins) in block style.
            let (k, v) = *rng.pick(&s.entries);
            let line_start = seed.text[..k.span.start].rfind('\n').map_or(0, |i| i + 1);
            let indent = &seed.text[line_start..k.span.start];
            let entry = &seed.text[k.span.start..v.span.end.max(k.span.end)];
            if indent.trim().is_empty() && !entry.contains('\n') {
                let end = v.span.end.max(k.span.end);
                edit(
                    end..end,
                    format!("\n{indent}{entry}"),
                    format!("duplicate entry {:?}", k.repr()),
                )
            } else {
                None
            }
        }
        9 => {
            let key = if rng.chance(50) {
                "x".repeat(*rng.pick(&[65_540usize, 300_000]))
            } else {
                (*rng.pick(&["bogus", "<<", "trials", "mode", "cells", "'1'", "? [a]"])).to_string()
            };
            edit(
                0..0,
                format!("{key}: y\n"),
                format!("top-level key of {} bytes", key.len()),
            )
        }
        10 => edit(vr, "\"a\\u0000b\\ud800\"".into(), "escapes".into()),
        _ => edit(vr.start..vr.start, String::new(), "no-op".into()),
    }
}

/// Edits of the raw bytes, for any seed.
fn byte_edit(rng: &mut Rng, text: &[u8]) -> Edit {
    let at = rng.below(text.len() + 1);
    let line_start = text[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line_end = text[at..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |i| at + i);
    match rng.below(8) {
        0 => Edit {
            range: at..at,
            with: rng.pick(INVALID_UTF8).to_vec(),
            what: "invalid UTF-8".into(),
        },
        1 => Edit {
            range: at..text.len(),
            with: Vec::new(),
            what: format!("truncated at {at}"),
        },
        2 => Edit {
            range: line_start..line_end,
            with: Vec::new(),
            what: "line deleted".into(),
        },
        3 => {
            let line = text[line_start..line_end].to_vec();
            // At most ~3 MB of result: a long line repeated 10,000 times would be gigabytes.
            let n = (*rng.pick(&[2usize, 50, 10_000]))
                .min((3 << 20) / (line.len() + 1))
                .max(1);
            let mut with = Vec::new();
            for _ in 0..n {
                with.extend_from_slice(&line);
                with.push(b'\n');
            }
            Edit {
                range: line_start..line_end.min(text.len()),
                with,
                what: format!("line repeated {n} times"),
            }
        }
        4 => Edit {
            range: at..at,
            with: vec![*rng.pick(b":{}[],&*!|>-#'\"\t\r%@`?")],
            what: "special character".into(),
        },
        5 => Edit {
            range: line_start..line_start,
            with: rng.pick(&[&b" "[..], b"\t", b"    ", b"- "]).to_vec(),
            what: "indentation".into(),
        },
        6 => Edit {
            range: text.len()..text.len(),
            with: rng
                .pick(&[&b"\n---\nx: 1\n"[..], b"\n...\n", b"\n--- |\n  text\n"])
                .to_vec(),
            what: "second document".into(),
        },
        _ => {
            let pad = *rng.pick(&[(1usize << 20) - 200, (1 << 20) + 1, 3 << 20]);
            Edit {
                range: text.len()..text.len(),
                with: format!("\n# {}\n", "p".repeat(pad)).into_bytes(),
                what: format!("padding to {pad} bytes"),
            }
        }
    }
}

fn apply(text: &[u8], mut edits: Vec<Edit>) -> (Vec<u8>, Vec<String>) {
    // Last first, skipping any that overlap one already applied.
    edits.sort_by_key(|e| std::cmp::Reverse((e.range.start, e.range.end)));
    let mut out = text.to_vec();
    let mut floor = usize::MAX;
    let mut done = Vec::new();
    for e in edits {
        if e.range.end > floor || e.range.end > out.len() {
            continue;
        }
        floor = e.range.start;
        out.splice(e.range.clone(), e.with);
        done.push(e.what);
    }
    (out, done)
}

/// A recipe as one line of JSON (from a parsed seed), mutated the JSON way.
fn json_case(rng: &mut Rng, tree: &Node) -> (Vec<u8>, Vec<String>) {
    let mut v = tree.to_json();
    let mut what = vec!["as one-line JSON".to_string()];
    if let Some(obj) = v.as_object_mut() {
        match rng.below(6) {
            0 => {
                obj.insert(
                    "ticket".into(),
                    serde_json::Value::String("J".repeat(*rng.pick(&[
                        65_540usize,
                        70_000,
                        500_000,
                    ]))),
                );
                obj.insert("bogus".into(), serde_json::json!(1));
                what.push("long ticket and an unknown key".into());
            }
            1 => {
                let keys: Vec<String> = obj.keys().cloned().collect();
                if !keys.is_empty() {
                    let k = rng.pick(&keys).clone();
                    obj.remove(&k);
                    what.push(format!("deleted {k}"));
                }
            }
            2 => {
                obj.insert("trials".into(), serde_json::Value::String("__NUM__".into()));
                what.push("huge trials".into());
            }
            3 => {
                let keys: Vec<String> = obj.keys().cloned().collect();
                if !keys.is_empty() {
                    let k = rng.pick(&keys).clone();
                    obj.insert(k.clone(), serde_json::json!([[{"a": [null, true, 1.5]}]]));
                    what.push(format!("type swap of {k}"));
                }
            }
            4 => {
                obj.insert("x".repeat(70_000), serde_json::json!(1));
                what.push("a 70,000-character key".into());
            }
            _ => {}
        }
    }
    let mut text = serde_json::to_string(&v).unwrap_or_default();
    if text.contains("\"__NUM__\"") {
        const NUMBERS: &[&str] = &[
            "4294967295",
            "1e400",
            "18446744073709551616",
            "-0",
            "100000",
        ];
        let n = NUMBERS[rng.below(NUMBERS.len())];
        text = text.replace("\"__NUM__\"", n);
    }
    if rng.chance(20) {
        text = format!("{}{}{}", "[".repeat(150), text, "]".repeat(150));
        what.push("wrapped in 150 lists".into());
    }
    let mut bytes = text.into_bytes();
    if rng.chance(30) {
        let e = byte_edit(rng, &bytes);
        let (b, w) = apply(&bytes, vec![e]);
        bytes = b;
        what.extend(w);
    }
    (bytes, what)
}

/// One case: the recipe bytes, its extension, an optional sidecar and project registry.
struct Case {
    recipe: Vec<u8>,
    json: bool,
    sidecar: Option<Vec<u8>>,
    project_registry: Option<Vec<u8>>,
    what: String,
}

fn make_case(rng: &mut Rng, shipped: &[Seed], fixtures: &[Seed], sidecars: &[Seed]) -> Case {
    // Mostly the shipped recipes (valid, so a single edit reaches deep into validation).
    let seed = if rng.chance(70) {
        rng.pick(shipped)
    } else {
        rng.pick(fixtures)
    };
    let mut what = vec![format!("seed {}", seed.name)];
    let (recipe, json) = match &seed.tree {
        Some(tree) if rng.chance(15) => {
            let (b, w) = json_case(rng, tree);
            what.extend(w);
            (b, true)
        }
        tree => {
            let mut edits = Vec::new();
            let n = *rng.pick(&[1usize, 1, 1, 1, 1, 1, 2, 2, 2, 3]);
            for _ in 0..n {
                match tree {
                    Some(t) if rng.chance(75) => edits.extend(structured_edit(rng, seed, t)),
                    _ => edits.push(byte_edit(rng, seed.text.as_bytes())),
                }
            }
            let (b, w) = apply(seed.text.as_bytes(), edits);
            what.extend(w);
            (b, seed.json)
        }
    };
    let mut mutated_registry = |rng: &mut Rng| -> Vec<u8> {
        let s = rng.pick(sidecars);
        let edits = match &s.tree {
            Some(t) if rng.chance(60) => structured_edit(rng, s, t).into_iter().collect(),
            _ => vec![byte_edit(rng, s.text.as_bytes())],
        };
        let (b, w) = apply(s.text.as_bytes(), edits);
        what.push(format!("registry {} ({})", s.name, w.join(", ")));
        b
    };
    let sidecar = rng.chance(10).then(|| mutated_registry(rng));
    let project_registry = rng.chance(5).then(|| mutated_registry(rng));
    Case {
        recipe,
        json,
        sidecar,
        project_registry,
        what: what.join("; "),
    }
}

// ------------------------------------------------------------------ running

#[derive(Debug)]
struct Outcome {
    code: Option<i32>,
    wall: Duration,
    /// Peak RSS sampled every 5 ms while it ran (a lower bound: the last 5 ms are not seen).
    rss_kib: u64,
    timed_out: bool,
    stderr: String,
}

struct Settings {
    bin: PathBuf,
    timeout: Duration,
    mem_bytes: u64,
}

/// Runs the binary on `dir/recipe.*`, under the bounds; retries with `-- true` when the recipe
/// turns out to be a probe recipe (they need a command) and without it for a triage one.
fn run_case(
    s: &Settings,
    dir: &Path,
    recipe: &Path,
    sidecar: Option<&Path>,
    probe_first: bool,
) -> Outcome {
    let first = run_once(s, dir, recipe, sidecar, probe_first);
    let retry = if probe_first {
        first.stderr.contains("is a triage (workload) recipe")
    } else {
        first.stderr.contains("a probe recipe needs the command")
    };
    if retry && !first.timed_out {
        let second = run_once(s, dir, recipe, sidecar, !probe_first);
        return Outcome {
            wall: first.wall.max(second.wall),
            rss_kib: first.rss_kib.max(second.rss_kib),
            ..second
        };
    }
    first
}

fn run_once(
    s: &Settings,
    dir: &Path,
    recipe: &Path,
    sidecar: Option<&Path>,
    with_command: bool,
) -> Outcome {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--as={}", s.mem_bytes))
        .arg("--")
        .arg(&s.bin)
        .args(["sweep", "run", "--dry-run", "--recipe"])
        .arg(recipe);
    if let Some(sc) = sidecar {
        cmd.arg("--mitigations-file").arg(sc);
    }
    if with_command {
        cmd.args(["--", "true"]);
    }
    cmd.current_dir(dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .expect("cannot run prlimit (util-linux) and the aorta binary");
    let mut err_pipe = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err_pipe.by_ref().take(1 << 20).read_to_end(&mut buf);
        let _ = std::io::copy(&mut err_pipe, &mut std::io::sink());
        buf
    });
    let mut timed_out = false;
    let mut rss_kib = 0;
    let status = loop {
        // Sampled before try_wait: a process that has exited has no VmHWM left to read.
        if let Some(kib) = peak_rss_kib(child.id()) {
            rss_kib = rss_kib.max(kib);
        }
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if t0.elapsed() > s.timeout {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall = t0.elapsed();
    let stderr = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
    use std::os::unix::process::ExitStatusExt;
    let code = status.code().or_else(|| status.signal().map(|s| 128 + s));
    Outcome {
        code,
        wall,
        rss_kib,
        timed_out,
        stderr,
    }
}

/// What is wrong with an outcome, if anything.
fn verdict(o: &Outcome, timeout: Duration) -> Option<String> {
    if o.timed_out || o.wall > timeout {
        return Some(format!("ran past {timeout:?} (killed)"));
    }
    if o.stderr.contains("panicked") || o.code == Some(101) {
        return Some("panicked (exit 101)".into());
    }
    if o.stderr.contains("memory allocation of") {
        return Some("ran out of the memory bound".into());
    }
    match o.code {
        Some(0 | 2) => None,
        Some(c) if c > 128 => Some(format!("killed by signal {}", c - 128)),
        other => Some(format!("unexpected exit {other:?}")),
    }
}

/// The process's peak resident set so far (VmHWM), in KiB; `None` once it has exited.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The reproductions, each with what must hold besides "no panic, in time".
fn regression_cases() -> Vec<(&'static str, Vec<u8>, bool, Option<&'static str>)> {
    let probe = "schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n";
    let json = format!(
        "{{\"schema_version\": 1, \"workload\": \"training\", \"trials\": 1, \"steps\": 1, \"ticket\": \"{}\", \"cells\": [{{\"name\": \"b\", \"mitigations\": [\"none\"], \"environment\": \"local\"}}], \"bogus\": 1}}",
        "J".repeat(70_000)
    );
    vec![
        (
            "a 65,540-character ticket line, then x: y",
            format!("{probe}ticket: {} x: y\n", "T".repeat(65_540)).into_bytes(),
            false,
            Some(":6:65551]"),
        ),
        (
            "a 65,540-character ticket line, then x: y on the next line",
            format!("{probe}ticket: {}\nx: y\n", "T".repeat(65_540)).into_bytes(),
            false,
            Some("unknown key 'x'"),
        ),
        (
            "a one-line JSON recipe over 64 KiB with an unknown key",
            json.into_bytes(),
            true,
            Some("unknown key 'bogus'"),
        ),
        (
            "trials: 4294967295",
            format!("{}trials: 4294967295\n", probe.replace("trials: 1\n", "")).into_bytes(),
            false,
            Some("at most 100000"),
        ),
        (
            "confound: {<<: 1}",
            format!("{probe}confound: {{<<: 1}}\n").into_bytes(),
            false,
            Some(":6:"),
        ),
        (
            "a Latin-1 byte in a comment: refused at its line and column, not read as empty",
            [probe.as_bytes(), b"# caf\xe9\n"].concat(),
            false,
            Some(":6:6]"),
        ),
        (
            "a 20 MB line",
            format!("{probe}ticket: '{}'\n", "z".repeat(20 << 20)).into_bytes(),
            false,
            Some("the limit for a recipe"),
        ),
    ]
}

#[test]
#[ignore = "needs the aorta binary: run tests/fuzz-recipes.sh"]
fn fuzz_recipes_through_the_cli() {
    let bin = PathBuf::from(
        std::env::var("AORTA_BIN")
            .expect("set AORTA_BIN to the aorta binary (tests/fuzz-recipes.sh does)"),
    );
    let settings = Settings {
        bin,
        timeout: Duration::from_secs(env_or("AORTA_FUZZ_TIMEOUT_S", 10)),
        mem_bytes: env_or::<u64>("AORTA_FUZZ_MEM_MIB", 512) << 20,
    };
    let cases: usize = env_or("AORTA_FUZZ_CASES", 2000);
    let seed: u64 = env_or("AORTA_FUZZ_SEED", 18);
    let only: Option<usize> = std::env::var("AORTA_FUZZ_CASE")
        .ok()
        .and_then(|v| v.parse().ok());
    let jobs: usize = env_or("AORTA_FUZZ_JOBS", 2usize).max(1);
    let work = std::env::var_os("AORTA_FUZZ_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/fuzz-recipes"));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();

    let root = repo_root();
    let shipped = seeds(&root.join("recipes"));
    let fixtures = seeds(&root.join("tests/fixtures/bad-recipes"));
    let sidecars = seeds(&root.join("tests/fixtures/sidecars"));
    assert!(
        shipped.len() > 20 && fixtures.len() > 20 && !sidecars.is_empty(),
        "seeds not found under {}",
        root.display()
    );

    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let codes: Mutex<std::collections::BTreeMap<String, usize>> = Mutex::default();
    let slowest: Mutex<(Duration, String)> = Mutex::new((Duration::ZERO, String::new()));
    let biggest: Mutex<(u64, String)> = Mutex::new((0, "none".into()));
    let record = |name: &str, what: &str, dir: &Path, o: &Outcome, extra: Option<String>| {
        {
            let mut b = biggest.lock().unwrap();
            if o.rss_kib > b.0 {
                *b = (o.rss_kib, format!("{name} ({what})"));
            }
        }
        *codes
            .lock()
            .unwrap()
            .entry(o.code.map_or("none".into(), |c| c.to_string()))
            .or_default() += 1;
        {
            let mut s = slowest.lock().unwrap();
            if o.wall > s.0 {
                *s = (o.wall, format!("{name} ({what})"));
            }
        }
        let problem = verdict(o, settings.timeout).or(extra);
        match problem {
            Some(p) => {
                let _ = std::fs::write(dir.join("stderr.txt"), &o.stderr);
                let tail: String = o
                    .stderr
                    .lines()
                    .rev()
                    .take(6)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n    ");
                failures.lock().unwrap().push(format!(
                    "{name}: {p} after {:.2?}; {what}\n  kept in {}\n    {tail}",
                    o.wall,
                    dir.display()
                ));
                true
            }
            None => false,
        }
    };

    // 1. The reproductions, and a project registry linked to a system file.
    if only.is_none() {
        for (i, (what, bytes, json, must)) in regression_cases().into_iter().enumerate() {
            let dir = work.join(format!("regression-{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            let recipe = dir.join(if json { "recipe.json" } else { "recipe.yaml" });
            std::fs::write(&recipe, &bytes).unwrap();
            let o = run_case(&settings, &dir, &recipe, None, !json);
            let extra = match must {
                _ if o.code != Some(2) => Some(format!("expected exit 2, got {:?}", o.code)),
                Some(m) if !o.stderr.contains(m) => Some(format!("the error does not say {m:?}")),
                _ => None,
            };
            if !record(&format!("regression {i}"), what, &dir, &o, extra) {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        let dir = work.join("regression-symlink");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(".aorta-root"), "").unwrap();
        let secret = work.join("outside-secret.txt");
        std::fs::write(&secret, "root:x:0:0:SECRET-LINE-FROM-OUTSIDE\n").unwrap();
        std::os::unix::fs::symlink(&secret, dir.join("aorta-registry.json")).unwrap();
        std::fs::write(dir.join("recipe.yaml"), "schema_version: 1\nworkload: training\ntrials: 1\nsteps: 1\ncells:\n  - {name: b, mitigations: [none], environment: local}\n").unwrap();
        let o = run_case(&settings, &dir, &dir.join("recipe.yaml"), None, false);
        let extra = if o.code != Some(2) || o.stderr.contains("SECRET-LINE") {
            Some(format!(
                "exit {:?}; the linked file must be refused unquoted",
                o.code
            ))
        } else {
            None
        };
        if !record(
            "regression symlink",
            "aorta-registry.json -> a file outside the project",
            &dir,
            &o,
            extra,
        ) {
            let _ = std::fs::remove_dir_all(&dir);
            let _ = std::fs::remove_file(&secret);
        }
    }

    // 2. Mutated cases, `jobs` at a time.
    let next = AtomicUsize::new(only.unwrap_or(0));
    let end = only.map_or(cases, |i| i + 1);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= end {
                    break;
                }
                let mut rng = Rng::new(seed, i as u64);
                let case = make_case(&mut rng, &shipped, &fixtures, &sidecars);
                let dir = work.join(format!("case-{i:05}"));
                std::fs::create_dir_all(&dir).unwrap();
                let recipe = dir.join(if case.json {
                    "recipe.json"
                } else {
                    "recipe.yaml"
                });
                std::fs::write(&recipe, &case.recipe).unwrap();
                let sidecar = case.sidecar.as_ref().map(|b| {
                    let p = dir.join("sidecar.json");
                    std::fs::write(&p, b).unwrap();
                    p
                });
                if let Some(b) = &case.project_registry {
                    std::fs::write(dir.join("aorta-registry.json"), b).unwrap();
                }
                let probe = String::from_utf8_lossy(&case.recipe).contains("mode: probe");
                let o = run_case(&settings, &dir, &recipe, sidecar.as_deref(), probe);
                std::fs::write(dir.join("what.txt"), &case.what).unwrap();
                if !record(&format!("case {i}"), &case.what, &dir, &o, None) && only.is_none() {
                    let _ = std::fs::remove_dir_all(&dir);
                }
            });
        }
    });

    let failures = failures.into_inner().unwrap();
    let slowest = slowest.into_inner().unwrap();
    let biggest = biggest.into_inner().unwrap();
    let codes = codes.into_inner().unwrap();
    let runs: usize = codes.values().sum();
    println!(
        "fuzz-recipes: {runs} runs (seed {seed}, {cases} mutated cases + regressions), exit codes {codes:?}, {} failures; slowest {:.2?}: {}; peak RSS (sampled) {} KiB: {}; bounds {:?} and {} MiB of address space",
        failures.len(),
        slowest.0,
        slowest.1,
        biggest.0,
        biggest.1,
        settings.timeout,
        settings.mem_bytes >> 20
    );
    assert!(failures.is_empty(), "{} failing case(s):\n{}\nreproduce one with AORTA_FUZZ_SEED={seed} AORTA_FUZZ_CASE=<index> tests/fuzz-recipes.sh", failures.len(), failures.join("\n"));
}
