//! Golden matrix.md, matrix.json and summary for a small probe run and a small triage run,
//! and the cached-rerun invariant: the same records (in any order) render the same matrix,
//! but for the time it was rendered.

mod common;
use aorta_recipe::{Recipe, RecipeSource};
use aorta_report::{CellStats, Matrix, RunInfo, SummaryOptions};
use aorta_trial::{ExitStatus, TrialRecord};
use common::*;
use serde_json::json;

fn probe_recipe() -> Recipe {
    recipe(
        "schema_version: 1\nmode: probe\nticket: PROBE-7\ntrials: 3\nmitigation_axis: [none, tf32_off]\ndiagnostic_axis: [none, xnack]\nconfound: {baseline_cell: none-none}\n",
    )
}

fn probe_trials(cell: &str) -> Vec<TrialRecord> {
    let t = |i: u32, v, wall: f64| {
        let mut t = rec(i, v);
        t.workload = "_subprocess".into();
        t.cell_name = cell.into();
        t.walltime_sec = wall;
        t
    };
    match cell {
        "none-none" => {
            let mut f = t(1, F, 31.0);
            f.failure_detectors_fired = vec!["tier1:exit_nonzero".into(), "tier4:hip_error".into()];
            f.result.failure_details = vec![serde_json::from_value(
                json!({"type": "subprocess_nonzero_exit", "hint": "HIP error: illegal address"}),
            )
            .unwrap()];
            vec![t(0, P, 30.0), f, t(2, P, 29.5)]
        }
        "none-xnack" => {
            let mut w = t(0, P, 33.0);
            w.warn_detectors_fired = vec!["tier3:vram_growth".into()];
            vec![w, t(1, P, 34.0), t(2, P, 32.0)]
        }
        "tf32_off-none" => {
            let mut e = t(2, E, 1800.0);
            e.exit_status = ExitStatus::Ok;
            e.timed_out = true;
            e.result.elapsed_sec = 1800.0;
            vec![t(0, P, 41.0), t(1, P, 40.0), e]
        }
        _ => Vec::new(),
    }
}

/// `rerun`: the records arrive in reverse order (as from the cache) and later.
fn probe_matrix(recipe: &Recipe, rerun: bool) -> Matrix<'_> {
    let cells = recipe
        .cells
        .iter()
        .map(|c| {
            if c.name == "tf32_off-xnack" {
                return CellStats::aggregate(c, recipe, &[], Some("OSError: [Errno 28] No space left on device\n  while creating tf32_off-xnack/".into()));
            }
            let mut ts = probe_trials(&c.name);
            if rerun {
                ts.reverse();
            }
            CellStats::aggregate(c, recipe, &ts, None)
        })
        .collect();
    let ts = if rerun {
        "2026-01-02T04-00-00"
    } else {
        "2026-01-02T03-04-05"
    };
    Matrix::new(
        recipe,
        cells,
        RunInfo {
            run_timestamp: ts.into(),
            warnings: vec!["host_env.json: amd-smi not found".into()],
            doctor: None,
        },
    )
}

fn triage_recipe() -> Recipe {
    let mut r = recipe(
        "schema_version: 1\nworkload: training\nticket: TRI-3\ntrials: 3\nsteps: 4\nworkload_config: {model: mlp, lr: 0.001}\nconfound: {threshold: 1.15}\ncells:\n  - {name: baseline-local, mitigations: [none], environment: local}\n  - {name: tf32-local, mitigations: [tf32_off], environment: local, workload_config: {lr: 0.002}}\n  - {name: stacked-local, mitigations: [tf32_off, xnack], environment: local}\n  - {name: queues-local, mitigations: [gpu_max_hw_queues_2], environment: local}\n",
    );
    r.source = Some(RecipeSource {
        path: "recipes/tri-3.yaml".into(),
        blake3: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into(),
    });
    r
}

/// `rerun`: as for [`probe_matrix`].
fn triage_matrix(recipe: &Recipe, rerun: bool) -> Matrix<'_> {
    let started = |i: u32, v, ms: &[f64], exec: u64| {
        let mut t = steps(i, v, ms);
        t.result.main_work_started = Some(true);
        t.result.executed_iterations = Some(exec);
        t.result.configured_iterations = Some(4);
        t
    };
    let mut hinted = started(1, F, &[101.0, 99.0], 2);
    hinted.result.failure_details =
        vec![serde_json::from_value(json!({"hint": "NaN at layer 3"})).unwrap()];
    let trials: Vec<(&str, Vec<TrialRecord>)> = vec![
        (
            "baseline-local",
            vec![
                started(0, P, &[100.0, 102.0, 98.0, 100.0], 4),
                hinted,
                started(2, F, &[100.0, 101.0], 2),
            ],
        ),
        (
            "tf32-local",
            vec![
                started(0, P, &[210.0, 205.0, 195.0, 190.0], 4),
                started(1, P, &[200.0, 202.0, 198.0, 200.0], 4),
                started(2, P, &[199.0, 201.0, 200.0, 200.0], 4),
            ],
        ),
        (
            "stacked-local",
            vec![
                started(0, P, &[80.0, 82.0, 78.0, 80.0], 4),
                started(1, P, &[160.0, 158.0, 162.0, 160.0], 4),
                started(2, F, &[120.0, 118.0, 122.0, 120.0], 3),
            ],
        ),
        (
            "queues-local",
            vec![
                started(0, F, &[101.0, 100.0, 99.0, 100.0], 4),
                started(1, P, &[100.0, 100.0, 100.0, 100.0], 4),
                rec(2, E),
            ],
        ),
    ];
    let cells = recipe
        .cells
        .iter()
        .zip(trials)
        .map(|(c, (_, mut ts))| {
            if rerun {
                ts.reverse();
            }
            CellStats::aggregate(c, recipe, &ts, None)
        })
        .collect();
    Matrix::new(
        recipe,
        cells,
        run(if rerun {
            "2026-01-02T04-00-00"
        } else {
            "2026-01-02T03-04-05"
        }),
    )
}

#[test]
fn probe_matrix_md() {
    let r = probe_recipe();
    let m = probe_matrix(&r, false);
    insta::assert_snapshot!("probe_matrix_md", m.to_markdown());
    insta::assert_snapshot!(
        "probe_summary",
        m.summary(SummaryOptions {
            unrecorded: &[],
            run_dir: "out/PROBE-7",
            executed: 9,
            reused: 0,
        })
    );
}

#[test]
fn triage_matrix_md() {
    let r = triage_recipe();
    let m = triage_matrix(&r, false);
    insta::assert_snapshot!("triage_matrix_md", m.to_markdown());
    insta::assert_snapshot!(
        "triage_summary",
        m.summary(SummaryOptions {
            unrecorded: &[],
            run_dir: "out/TRI-3/training/2026-01-02T03-04-05",
            executed: 8,
            reused: 4,
        })
    );
    insta::assert_snapshot!("triage_matrix_json", json_text(&m));
}

/// The probe recipe with a stop rule, one trial's logits checksum differing from the others'.
#[test]
fn probe_matrix_json() {
    let r = recipe(
        "schema_version: 1\nmode: probe\nticket: PROBE-7\ntrials: 3\nmitigation_axis: [none, tf32_off]\ndiagnostic_axis: [none, xnack]\nconfound: {baseline_cell: none-none}\nstop_after: {events: 1, max_trials: 3}\n",
    );
    let cells = r
        .cells
        .iter()
        .map(|c| {
            if c.name == "tf32_off-xnack" {
                return CellStats::aggregate(
                    c,
                    &r,
                    &[],
                    Some("OSError: [Errno 28] No space left on device".into()),
                );
            }
            let mut ts = probe_trials(&c.name);
            if c.name == "none-xnack" {
                for (i, t) in ts.iter_mut().enumerate() {
                    t.result.metrics.insert(
                        "logits_checksum".into(),
                        (if i == 2 { "0xbb" } else { "0xaa" }).into(),
                    );
                }
            }
            CellStats::aggregate(c, &r, &ts, None)
        })
        .collect();
    let m = Matrix::new(
        &r,
        cells,
        RunInfo {
            run_timestamp: "2026-01-02T03-04-05".into(),
            warnings: vec!["host_env.json: amd-smi not found".into()],
            doctor: None,
        },
    );
    insta::assert_snapshot!("probe_matrix_json", json_text(&m));
}

/// Non-finite numbers (a workload reporting NaN step times) are written as null, not as an
/// error or as invalid JSON.
#[test]
fn non_finite_numbers_are_null() {
    let r = triage();
    let cells = vec![
        agg(&r, "baseline-local", &trials(&[P], &[1.0, f64::NAN])),
        agg(&r, "tf32-local", &trials(&[P], &[f64::INFINITY])),
    ];
    let text = json_text(&matrix(&r, cells));
    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
    let c = &j["cells"][0];
    assert_eq!(c["step_times_ms"], json!([1.0, null]));
    assert_eq!(c["mean_step_time_ms"], json!(null));
    assert_eq!(j["cells"][1]["max_step_time_ms"], json!(null));
}

/// matrix.md without its `**Run timestamp**` line.
fn without_timestamp_md(md: &str) -> String {
    let kept: Vec<&str> = md
        .lines()
        .filter(|l| !l.starts_with("**Run timestamp**"))
        .collect();
    kept.join("\n")
}

/// matrix.json without `run_timestamp`.
fn without_timestamp_json(text: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
    v.as_object_mut().unwrap().remove("run_timestamp").unwrap();
    v
}

/// A fully cached rerun has the same records (perhaps in another order) and nothing that
/// says how they were obtained, so matrix.md and matrix.json differ from the first run's
/// only in when they were rendered: there is nothing to re-render.
#[test]
fn a_fully_cached_rerun_renders_the_same_matrix() {
    let (t, p) = (triage_recipe(), probe_recipe());
    for (first, again) in [
        (triage_matrix(&t, false), triage_matrix(&t, true)),
        (probe_matrix(&p, false), probe_matrix(&p, true)),
    ] {
        assert_ne!(first.run_timestamp, again.run_timestamp);
        let (md1, md2) = (first.to_markdown(), again.to_markdown());
        assert_ne!(md1, md2);
        assert_eq!(without_timestamp_md(&md1), without_timestamp_md(&md2));
        let (j1, j2) = (json_text(&first), json_text(&again));
        assert_eq!(without_timestamp_json(&j1), without_timestamp_json(&j2));
        // Rendered at the same time, the bytes are the same.
        let same_time = Matrix {
            run_timestamp: first.run_timestamp.clone(),
            ..again
        };
        assert_eq!(same_time.to_markdown(), md1);
        assert_eq!(json_text(&same_time), j1);
    }
}

/// report.html is self-contained (nothing fetched), shows every cell in the table and both
/// plots, escapes what it quotes, and is a pure function of the matrix (reordered records
/// render the same page but for the time).
#[test]
fn report_html_is_self_contained_and_complete() {
    let r = probe_recipe();
    let m = probe_matrix(&r, false);
    let keys = vec![
        vec![aorta_report::TrialRow {
            index: 0,
            key: "k0".into(),
            inputs: "23 traced".into(),
            xid: None,
        }];
        m.rows.len()
    ];
    let lines = vec![vec![aorta_report::DetectorLine {
        detector: "tier4:hip_error".into(),
        log: "none-none/trial_1/stderr.log".into(),
        line: 7,
        text: "HIP error: <illegal address>".into(),
    }]];
    let reproduce = vec!["aorta build r.yaml -- bash 'a b.sh'".to_string()];
    let cx = aorta_report::HtmlContext {
        environment: Some("GPU: <none>"),
        reproduce: &reproduce,
        trial_keys: &keys,
        detector_lines: &lines,
        env_diffs: &[aorta_report::EnvDiff {
            between: "baseline none-none → cell tf32_off-none".into(),
            differences: 1,
            key_relevant: 1,
            text: "  + env_vars.NVIDIA_TF32_OVERRIDE  → \"0\"  [key]".into(),
        }],
        ..Default::default()
    };
    let html = m.to_html(&cx);
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    for needle in [
        "id=\"plot-failure-rate\"",
        "id=\"plot-step-times\"",
        "<table id=\"matrix\" class=\"sortable\">",
        "GPU: &lt;none&gt;",
        "aorta build r.yaml -- bash &#39;a b.sh&#39;",
        "href=\"none-none/trial_1/stdout.log\"",
        "<td><code>k0</code></td><td>23 traced</td>",
        "<summary>baseline none-none → cell tf32_off-none: 1 difference(s), 1 key-relevant</summary><pre>  + env_vars.NVIDIA_TF32_OVERRIDE  → &quot;0&quot;  [key]</pre>",
        "none-none/trial_1/stderr.log</a>:7: <b>tier4:hip_error</b>  HIP error: &lt;illegal address&gt;",
    ] {
        assert!(html.contains(needle), "{needle} missing");
    }
    for row in &m.rows {
        assert!(html.contains(&format!("<td>{}</td>", row.stats.name)));
    }
    // Nothing to fetch: no src= or href= leaves the run directory, no stylesheet link.
    assert!(!html.contains("src="));
    assert!(!html.contains("<link"));
    assert!(
        !html.contains("Workload metrics"),
        "a probe run reports no workload metrics"
    );
    assert_eq!(
        html.matches("http").count(),
        html.matches("http://www.w3.org/2000/svg").count()
    );
    let rerun = probe_matrix(&r, true).to_html(&cx);
    assert_eq!(
        html.replace("2026-01-02T03-04-05", "T"),
        rerun.replace("2026-01-02T04-00-00", "T")
    );
}

/// The node's doctor verdict (the run's doctor.json) in matrix.md and report.html: a failing,
/// marked node gets the caution before the answer and its flagged checks (figure, threshold,
/// remedy) beside the environment; a passing one a line; none "not checked" (report.html
/// only). A trial's Xid is linked to the doctor's verdict on the GPU at its address.
#[test]
fn the_doctors_verdict_is_shown_and_a_trials_xid_linked_to_it() {
    use aorta_doctor::{Check, GpuSummary, Level, Report};
    let report = |fail: bool| {
        let link = Check::new("pcie.link", Some("0 00000000:00:06.0"), "s")
            .measured("Gen3 x8")
            .threshold("Gen5 x16 (the link's maximum)");
        let link = if fail {
            link.fail("reseat the card / check the riser")
        } else {
            link.pass()
        };
        let checks = vec![
            link,
            Check::new("ecc.mode", Some("0 00000000:00:06.0"), "s").pass(),
            Check::new("nvlink.state", None, "s").not_applicable("PCIe card"),
        ];
        let gpus = vec![GpuSummary {
            label: "0 00000000:00:06.0".into(),
            name: Some("NVIDIA H100 80GB HBM3".into()),
            vendor: "nvidia".into(),
        }];
        Report::new(Level::Quick, None, gpus, checks, 0.4)
    };
    let r = probe_recipe();
    let with = |doctor| {
        let mut m = probe_matrix(&r, false);
        m.doctor = doctor;
        m
    };
    let mut xid_row = aorta_report::TrialRow {
        index: 1,
        key: "k1".into(),
        inputs: String::new(),
        xid: Some(aorta_report::TrialXid {
            xid: "79".into(),
            pci: Some("PCI:0000:00:06".into()),
        }),
    };
    let keys = |row: &aorta_report::TrialRow| vec![vec![row.clone()]];
    let html_of = |m: &Matrix, keys: &[Vec<aorta_report::TrialRow>]| {
        m.to_html(&aorta_report::HtmlContext {
            environment: Some("GPU: H100"),
            trial_keys: keys,
            ..Default::default()
        })
    };

    let sick = with(Some(report(true).verdict(true)));
    let banner = "This run's node failed aorta doctor --level quick and was built anyway (--doctor-mark): do not credit or blame a mitigation for these results.";
    let md = sick.to_markdown();
    let caution = md.find("> [!CAUTION]").expect("caution");
    assert!(caution < md.find("## Answer").unwrap(), "{md}");
    for needle in [
        "**Node health**: doctor quick: fail (1 fail, 0 warn, 1 pass, 1 n/a) ([doctor.json](doctor.json))",
        &format!("> **{banner}**"),
        "> - fail pcie.link [GPU 0 00000000:00:06.0]: Gen3 x8 (expected Gen5 x16 (the link's maximum)); do: reseat the card / check the riser",
        "> 1 check(s) passed, 1 not applicable",
    ] {
        assert!(md.contains(needle), "{needle} missing:\n{md}");
    }
    let html = html_of(&sick, &keys(&xid_row));
    let (top, section, env) = (
        html.find("id=\"doctor-banner\"").unwrap(),
        html.find("<h2 id=\"doctor\">Node health</h2>").unwrap(),
        html.find("<h2>Environment</h2>").unwrap(),
    );
    assert!(top < html.find("id=\"answer\"").unwrap() && section < env);
    for needle in [
        &banner.replace('\'', "&#39;"),
        "<tr><td>fail</td><td><code>pcie.link</code></td><td>0 00000000:00:06.0</td><td>Gen3 x8</td><td>Gen5 x16 (the link&#39;s maximum)</td><td>reseat the card / check the riser</td></tr>",
        "<li class=\"xid\">trial 1: Xid 79 (PCI:0000:00:06): doctor quick said GPU 0 00000000:00:06.0 was fail (fail pcie.link); Xid 79: the GPU fell off the bus",
    ] {
        assert!(html.contains(needle), "{needle} missing");
    }

    let healthy = with(Some(report(false).verdict(false)));
    let md = healthy.to_markdown();
    assert!(md.contains("**Node health**: doctor quick: pass (0 fail, 0 warn, 2 pass, 1 n/a)"));
    assert!(!md.contains("[!CAUTION]"), "{md}");
    let html = html_of(&healthy, &keys(&xid_row));
    assert!(html.contains("<p id=\"doctor\" class=\"doctor pass\">Node health: doctor quick: pass (0 fail, 0 warn, 2 pass, 1 n/a)"));
    assert!(!html.contains("doctor-banner") && !html.contains("do not credit"));
    assert!(html.contains("trial 1: Xid 79 (PCI:0000:00:06): doctor quick said GPU 0 00000000:00:06.0 was pass; Xid 79:"));

    let unchecked = with(None);
    assert!(!unchecked.to_markdown().contains("Node health"));
    xid_row.xid.as_mut().unwrap().pci = Some("PCI:0000:18:00".into());
    let html = html_of(&unchecked, &keys(&xid_row));
    assert!(html.contains("class=\"doctor none\">Node health: not checked"));
    assert!(html.contains("trial 1: Xid 79 (PCI:0000:18:00): the node was not checked"));
    let html = html_of(&sick, &keys(&xid_row));
    assert!(html.contains(
        "trial 1: Xid 79 (PCI:0000:18:00): doctor&#39;s report has no GPU at PCI:0000:18:00"
    ));
}

/// A triage run whose trials report the torch workloads' metrics (and the race workload's
/// corrupt iterations in one cell): report.html tabulates each metric some trial reports, per
/// cell (mean [min–max] (trials)), and plots it; metrics no trial reports get no column.
#[test]
fn report_html_shows_the_workload_metrics_trials_report() {
    let r = common::triage();
    let with = |i: u32, v, m: serde_json::Value| {
        let mut t = steps(i, v, &[10.0, 11.0]);
        t.result.metrics = serde_json::from_value(m).unwrap();
        t
    };
    let base = vec![
        with(
            0,
            P,
            json!({"tokens_per_sec": 1000.0, "step_time_p50": 10.0, "step_time_p99": 12.0, "mfu": 0.25, "final_loss": 2.5}),
        ),
        with(
            1,
            F,
            json!({"tokens_per_sec": 3000.0, "step_time_p50": 30.0, "step_time_p99": 40.0, "mfu": null, "corrupt_iterations": 4}),
        ),
    ];
    // The mitigated cell's workload said nothing (an older build): its row shows dashes.
    let tf32 = trials(&[P, P], &[20.0]);
    let m = common::matrix(
        &r,
        vec![
            agg(&r, "baseline-local", &base),
            agg(&r, "tf32-local", &tf32),
        ],
    );
    let row = &m.rows[0].stats.workload_metrics;
    assert_eq!(
        row.iter().map(|s| s.metric.key()).collect::<Vec<_>>(),
        [
            "tokens_per_sec",
            "step_time_p50",
            "step_time_p99",
            "mfu",
            "corrupt_iterations"
        ]
    );
    assert_eq!(row[3].values, [0.25], "a null MFU is not a sample");
    assert!(m.rows[1].stats.workload_metrics.is_empty());
    let html = m.to_html(&aorta_report::HtmlContext::default());
    for needle in [
        "<h2>Workload metrics</h2>",
        "<table id=\"metrics\" class=\"sortable\"><thead><tr><th>Cell</th><th>tokens/s</th><th>p50 step (ms)</th><th>p99 step (ms)</th><th>MFU</th><th>corrupt iterations</th></tr>",
        "<tr class=\"baseline\"><td>baseline-local</td><td data-v=\"2000\">2000 [1000–3000] (2)</td><td data-v=\"20\">20.00 [10.00–30.00] (2)</td><td data-v=\"26\">26.00 [12.00–40.00] (2)</td><td data-v=\"0.25\">0.250 [0.250–0.250] (1)</td><td data-v=\"4\">4.00 [4.00–4.00] (1)</td></tr>",
        "<tr><td>tf32-local</td><td data-v=\"-1\">—</td>",
        "id=\"plot-metric-tokens_per_sec\"",
        "id=\"plot-metric-step_time_p50\"",
        "id=\"plot-metric-step_time_p99\"",
        "id=\"plot-metric-mfu\"",
        "id=\"plot-metric-corrupt_iterations\"",
    ] {
        assert!(html.contains(needle), "{needle} missing");
    }
    // One box per cell that reports the metric: the baseline's two tokens/s values.
    let plot = &html[html.find("id=\"plot-metric-tokens_per_sec\"").unwrap()..];
    let plot = &plot[..plot.find("</svg>").unwrap()];
    assert_eq!(plot.matches("class=\"box\"").count(), 1);
    assert_eq!(plot.matches("<circle").count(), 2);
    assert!(
        plot.contains(">3000</text>"),
        "ticks reach the largest value"
    );
    assert!(!html.contains("final_loss"), "only the metrics that matter");
}
