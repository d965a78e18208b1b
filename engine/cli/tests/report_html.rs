//! report.html in a real browser: headless Chromium (tests/install-chromium.sh fetches Debian's
//! when none is installed) loads a built run's report from disk, with no network, and the test
//! reads the DOM it ends with and every console message it logged.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const RECIPE: &str = "schema_version: 1\nmode: probe\nticket: HTML-1\ntrials: 4\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\nstep_time_regex: 'step_ms=(?P<ms>[0-9.]+)'\n";
/// Fails without CUDA_LAUNCH_BLOCKING; prints step times either way.
const JOB: &str = "for i in 1 2 3 4 5; do echo \"step $i step_ms=1$i.5\"; done\n[ \"${CUDA_LAUNCH_BLOCKING:-0}\" = 1 ] || { echo 'RuntimeError: CUDA error: an illegal memory access was encountered' >&2; exit 1; }\n";

fn chromium() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(root.join("tests/install-chromium.sh"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "tests/install-chromium.sh failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// `(final DOM, console lines)` of `page` loaded by headless Chromium.
fn load(browser: &Path, page: &Path) -> (String, Vec<String>) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let console = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), console)
}

#[test]
fn the_report_renders_in_chromium_with_its_plots_and_no_console_errors() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join(".aorta-root"), "").unwrap();
    std::fs::write(d.join("r.yaml"), RECIPE).unwrap();
    std::fs::write(d.join("job.sh"), JOB).unwrap();
    let build = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(d)
        .env("AORTA_STORE", d.join("store"))
        .args([
            "sweep", "run", "--recipe", "r.yaml", "--output", "out", "--", "bash", "job.sh",
        ])
        .output()
        .unwrap();
    let run = d.join("out/HTML-1");
    assert!(run.join("report.html").is_file(), "{build:?}");
    assert!(std::fs::read_to_string(run.join("matrix.md"))
        .unwrap()
        .contains("[report.html](report.html)"));

    let (dom, console) = load(&browser, &run.join("report.html"));
    assert!(console.is_empty(), "console messages: {console:#?}");
    assert!(dom.contains("id=\"plot-failure-rate\"") && dom.contains("id=\"plot-step-times\""));
    assert_eq!(dom.matches("class=\"bar\"").count(), 2, "one bar per cell");
    assert_eq!(dom.matches("class=\"box\"").count(), 2, "one box per cell");
    assert_eq!(
        dom.matches("class=\"ci\"").count(),
        2,
        "one interval per cell"
    );
    // 4/4 against 0/4 is decided at 95% (two-sided Fisher p = 0.029): the page leads with
    // the answer, and the fix's row and bar carry the call in colour and in text.
    let answer = &dom[dom.find("<div id=\"answer\"").expect("the answer box")..];
    assert!(
        answer[..answer.find("</div>").unwrap()]
            .contains("cuda_launch_blocking (cell cuda_launch_blocking-none) fixes it at 95% confidence: 0/4 failed vs 4/4"),
        "{answer}"
    );
    assert!(
        dom.find("id=\"answer\"") < dom.find("id=\"matrix\""),
        "the answer comes first"
    );
    assert!(
        dom.contains(
            "<tr class=\"call-fixes\"><td>cuda_launch_blocking-none</td><td>fixes · pass</td>"
        ),
        "{dom}"
    );
    assert!(dom.contains("✓ fixes</text>"), "{dom}");
    // The failing cell shows its detectors' first matching lines, linked to the log.
    assert!(
        dom.contains("<a href=\"none-none/trial_0/stderr.log\">none-none/trial_0/stderr.log</a>:1: <b>tier4:illegal_memory_access</b>"),
        "{dom}"
    );
    // Where the cells differ, `aorta env diff` between them: the baseline's trials ran
    // without CUDA_LAUNCH_BLOCKING, the mitigated cell's with it.
    let diff = &dom[dom
        .find("<details class=\"env-diff\"><summary>baseline cell none-none → cell cuda_launch_blocking-none: 1 difference(s)")
        .unwrap_or_else(|| panic!("no env diff: {dom}"))..];
    let diff = &diff[..diff.find("</details>").unwrap()];
    assert!(
        diff.contains("env_vars.CUDA_LAUNCH_BLOCKING") && diff.contains("\"1\""),
        "{diff}"
    );
    assert_eq!(
        dom.matches("class=\"env-diff\"").count(),
        1,
        "one cell differs"
    );
    // Every link points at a file of the run directory.
    for href in dom
        .split("href=\"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
    {
        assert!(run.join(href).is_file(), "dangling link {href}");
    }

    // `aorta report RUN_DIR` renders the same page from the run directory alone.
    let built = std::fs::read_to_string(run.join("report.html")).unwrap();
    let again = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(d)
        .args(["report", "out/HTML-1"])
        .output()
        .unwrap();
    assert!(again.status.success(), "{again:?}");
    let rerendered = std::fs::read_to_string(run.join("report.html")).unwrap();
    let no_time = |s: &str| {
        let i = s.find("<td>Rendered</td><td>").unwrap() + 21;
        format!("{}{}", &s[..i], &s[i + 19..])
    };
    assert_eq!(no_time(&built), no_time(&rerendered));

    // A run directory whose recorded environments differ (another machine's driver): the
    // page shows `aorta env diff` between them.
    let envs = run.join("environments");
    let first = std::fs::read_dir(&envs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut other: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(first.join("env.json")).unwrap()).unwrap();
    other["gpu"]["driver_version"] = "999.1".into();
    std::fs::create_dir_all(envs.join("zz-other")).unwrap();
    std::fs::write(envs.join("zz-other/env.json"), other.to_string()).unwrap();
    let again = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(d)
        .args(["report", "out/HTML-1"])
        .output()
        .unwrap();
    assert!(again.status.success(), "{again:?}");
    let page = std::fs::read_to_string(run.join("report.html")).unwrap();
    let name = first.file_name().unwrap().to_string_lossy().into_owned();
    let at = page
        .find(&format!(
            "<summary>environment {name} → environment zz-other: 1 difference(s)"
        ))
        .unwrap_or_else(|| panic!("no environment diff: {page}"));
    let block = &page[at..at + page[at..].find("</details>").unwrap()];
    assert!(
        block.contains("gpu.driver_version") && block.contains("&quot;999.1&quot;"),
        "{block}"
    );

    // The console check can fail: a page that throws is caught.
    let bad = d.join("bad.html");
    std::fs::write(
        &bad,
        "<html><body><script>undefinedFunction()</script></body></html>",
    )
    .unwrap();
    let (_, console) = load(&browser, &bad);
    assert!(
        console.iter().any(|l| l.contains("ReferenceError")),
        "{console:?}"
    );
}
