//! `trials: auto` end to end: a planted flaky command (fails at rate p unless
//! CUDA_LAUNCH_BLOCKING=1) through the real `aorta build`, for p ∈ {1.0, 0.5, 0.2}. The fix is
//! found, the duds stop early as no different, a rerun continues from the store (nothing runs),
//! and matrix.json states each cell's call, outcome and why it stopped.

mod common;

use common::{counts, text, Ws};

/// Fails every `period`-th run of its cell (period 1: always; 2: p = 0.5; 5: p = 0.2), counted
/// per cell in a file, unless CUDA_LAUNCH_BLOCKING=1. Deterministic with `--jobs 1`.
const FLAKY: &str = r#"set -eu
period="$1"
[ "${CUDA_LAUNCH_BLOCKING:-0}" = 1 ] && { echo ok; exit 0; }
f="$COUNTERS/${CUDA_DEVICE_MAX_CONNECTIONS:-none}"
n=$(cat "$f" 2>/dev/null || echo 0)
echo $((n + 1)) > "$f"
if [ $((n % period)) -eq 0 ]; then
  echo "RuntimeError: CUDA error: an illegal memory access was encountered" >&2
  exit 1
fi
echo ok
"#;

const RECIPE: &str = "schema_version: 1
mode: probe
ticket: AUTO-1
trials: auto
max_trials_per_cell: 64
mitigation_axis: [none, cuda_launch_blocking, cuda_device_max_connections_1, cuda_device_max_connections_32]
diagnostic_axis: [none]
timeout_per_trial: 30
confound:
  threshold: 100
  baseline_cell: none-none
";

#[derive(serde::Deserialize)]
struct MatrixJson {
    answer: aorta_report::Answer,
}

fn run(ws: &Ws, period: &str) -> std::process::Output {
    let counters = ws.path().join(format!("counters-{period}"));
    std::fs::create_dir_all(&counters).unwrap();
    ws.aorta_env(
        &[
            "build", "r.yaml", "--store", "s", "--output", "o", "--jobs", "1", "--", "bash",
            "flaky.sh", period,
        ],
        &[("COUNTERS", counters.to_str().unwrap())],
    )
}

fn answer(ws: &Ws) -> aorta_report::Answer {
    let m: MatrixJson = serde_json::from_str(
        &std::fs::read_to_string(ws.path().join("o/AUTO-1/matrix.json")).unwrap(),
    )
    .unwrap();
    m.answer
}

#[test]
fn auto_finds_the_fix_and_drops_the_duds_at_every_failure_rate() {
    use aorta_report::sequential::Stop;
    use aorta_report::{Call, Stability};
    // (period, the trials the fix needs: 0/n against the baseline's rate decides it at n).
    for (period, fix_trials) in [("1", 8), ("2", 32), ("5", 64)] {
        let ws = Ws::new();
        ws.write("r.yaml", RECIPE);
        ws.write("flaky.sh", FLAKY);
        let out = run(&ws, period);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let a = answer(&ws);
        assert!(a.sequential, "{}", text(&out));
        let fix = a.call_of("cuda_launch_blocking-none").unwrap();
        assert_eq!(
            fix.call,
            Call::Fixes,
            "p=1/{period}: {fix:?}\n{}",
            text(&out)
        );
        let auto = fix.auto.unwrap();
        assert_eq!(
            (auto.stop, auto.trials),
            (Stop::Decided, fix_trials),
            "{fix:?}"
        );
        assert_eq!(fix.stability, Stability::Pass);
        for dud in [
            "cuda_device_max_connections_1-none",
            "cuda_device_max_connections_32-none",
        ] {
            let d = a.call_of(dud).unwrap();
            assert_eq!(d.call, Call::NoDifferent, "p=1/{period}: {d:?}");
            let auto = d.auto.unwrap();
            assert_eq!((auto.stop, auto.trials), (Stop::Futile, 4), "{d:?}");
        }
        let base = a.baseline.as_ref().unwrap();
        assert_eq!(
            base.trials, fix_trials,
            "the baseline runs as far as the fix"
        );
        let flaky = if period == "1" {
            Stability::Fail
        } else {
            Stability::Flaky
        };
        assert_eq!(base.stability, flaky);
        // Executed: the baseline and the fix to the deciding look, the duds to the first.
        assert_eq!(counts(&out), (2 * fix_trials + 2 * 4, 0), "{}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("cuda_launch_blocking") && stdout.contains("fixes it"),
            "{}",
            text(&out)
        );
        // A rerun continues from the store: every trial reused, the same answer.
        let again = run(&ws, period);
        assert_eq!(
            counts(&again),
            (0, 2 * fix_trials + 2 * 4),
            "{}",
            text(&again)
        );
        assert_eq!(answer(&ws), a);
    }
}

#[test]
fn a_budget_stops_the_run_undecided_and_says_so() {
    use aorta_report::sequential::Stop;
    let ws = Ws::new();
    // Each trial sleeps; the budget allows about one look.
    ws.write(
        "r.yaml",
        &RECIPE.replace("trials: auto\n", "trials: auto\nmax_walltime: 1s\n"),
    );
    ws.write("flaky.sh", &format!("sleep 0.2\n{FLAKY}"));
    let out = run(&ws, "5");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let a = answer(&ws);
    let fix = a.call_of("cuda_launch_blocking-none").unwrap();
    assert_eq!(
        fix.auto.unwrap().stop,
        Stop::Budget,
        "{fix:?}\n{}",
        text(&out)
    );
    let (executed, _) = counts(&out);
    assert!(executed < 20, "the budget did not stop it: {}", text(&out));
}

/// Always fails unless one of two fixes is set: CUDA_DEVICE_MAX_CONNECTIONS=1 at the usual
/// pace, or CUDA_LAUNCH_BLOCKING=1, whose steps take twice as long (a speed confound). Prints
/// five step times per run for `step_time_regex`.
const SLOW_FIX: &str = r#"set -eu
ms=100
[ "${CUDA_LAUNCH_BLOCKING:-0}" = 1 ] && ms=200
for i in 1 2 3 4 5; do echo "step $i took $((ms + i)) ms"; done
[ "${CUDA_LAUNCH_BLOCKING:-0}" = 1 ] && exit 0
[ "${CUDA_DEVICE_MAX_CONNECTIONS:-0}" = 1 ] && exit 0
echo "RuntimeError: CUDA error: an illegal memory access was encountered" >&2
exit 1
"#;

#[test]
fn a_fix_that_only_runs_slower_stops_at_the_first_look_as_a_speed_confound() {
    use aorta_report::sequential::Stop;
    use aorta_report::Call;
    let ws = Ws::new();
    ws.write(
        "r.yaml",
        &RECIPE
            .replace("  threshold: 100\n", "  threshold: 1.15\n")
            .replace(
                "timeout_per_trial: 30\n",
                "timeout_per_trial: 30\nstep_time_regex: 'took (?P<ms>[0-9]+) ms'\n",
            ),
    );
    ws.write("slow.sh", SLOW_FIX);
    let build = || {
        ws.aorta(&[
            "build", "r.yaml", "--store", "s", "--output", "o", "--", "bash", "slow.sh",
        ])
    };
    let out = build();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let a = answer(&ws);
    let slow = a.call_of("cuda_launch_blocking-none").unwrap();
    assert_eq!(slow.call, Call::SpeedConfounded, "{slow:?}\n{}", text(&out));
    let auto = slow.auto.unwrap();
    assert_eq!((auto.stop, auto.trials), (Stop::Slower, 4), "{slow:?}");
    let fix = a.call_of("cuda_device_max_connections_1-none").unwrap();
    assert_eq!(fix.call, Call::Fixes, "{fix:?}");
    assert_eq!(fix.auto.unwrap().trials, 8);
    let dud = a.call_of("cuda_device_max_connections_32-none").unwrap();
    assert_eq!(dud.auto.unwrap().stop, Stop::Futile, "{dud:?}");
    // The baseline and the fix to 8, the speed confound and the dud to 4; a rerun reuses all.
    assert_eq!(counts(&out), (8 + 8 + 4 + 4, 0), "{}", text(&out));
    let again = build();
    assert_eq!(counts(&again), (0, 24), "{}", text(&again));
    assert_eq!(answer(&ws), a);
}

#[test]
fn auto_conflicts_and_stray_settings_are_refused_with_the_field() {
    let ws = Ws::new();
    ws.write("flaky.sh", FLAKY);
    for (recipe, needle) in [
        (
            RECIPE.replace("max_trials_per_cell: 64\n", "max_trials_per_cell: 2\n"),
            "first look is at 4 trials",
        ),
        (
            RECIPE.replace("trials: auto\n", "trials: 3\n"),
            "'max_trials_per_cell' applies only to trials: auto",
        ),
        (
            format!("{RECIPE}stop_after: {{events: 1, max_trials: 4}}\n"),
            "stop_after conflicts with trials: auto",
        ),
        (
            RECIPE.replace("trials: auto\n", "trials: auto\nconfidence: 1.5\n"),
            "confidence 1.5 is outside",
        ),
        (
            RECIPE.replace("trials: auto\n", "trials: auto\nmax_walltime: soon\n"),
            "'soon' is not a duration",
        ),
        (
            RECIPE
                .replace("trials: auto\n", "trials: autoo\n")
                .replace("max_trials_per_cell: 64\n", ""),
            "write trials: auto",
        ),
    ] {
        ws.write("r.yaml", &recipe);
        let out = ws.build(&[], &["bash", "flaky.sh", "1"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(needle), "{needle}:\n{}", text(&out));
    }
}
