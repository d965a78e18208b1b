//! Times report.html for a 1,000-cell × 10-trial run (docs/benchmarks.md, "report.html").
//!
//!     cargo run --release -p aorta-report --example html_bench -- [CELLS] [TRIALS] [RUNS]
//!
//! Each cell's trials have 50 step times and a verdict pattern that varies by cell. Prints the
//! median over RUNS of: folding the records into cells and the matrix (shared with matrix.json
//! and matrix.md: aggregation and the bootstrap intervals) and rendering report.html from it.

use aorta_recipe::parse_recipe;
use aorta_registry::Registry;
use aorta_report::{CellStats, HtmlContext, Matrix, RunInfo};
use aorta_source::{SourceFile, Syntax};
use aorta_trial::{ExitStatus, TrialRecord, Verdict, WorkloadResult, TRIAL_RECORD_SCHEMA};
use std::time::Instant;

fn record(cell: usize, i: u32) -> TrialRecord {
    let fail = (cell * 7 + i as usize * 3) % 10 < cell % 10;
    let verdict = if fail { Verdict::Fail } else { Verdict::Pass };
    let step_times_ms = (0..50)
        .map(|s| 100.0 + ((cell * 31 + i as usize * 17 + s * 13) % 97) as f64 * 0.5)
        .collect();
    TrialRecord {
        schema_version: TRIAL_RECORD_SCHEMA.into(),
        key: format!("{:064x}", cell * 1000 + i as usize),
        cell_name: format!("cell-{cell}"),
        trial_index: i,
        workload: "training".into(),
        argv: None,
        verdict,
        exit_status: if fail {
            ExitStatus::WorkloadFailed
        } else {
            ExitStatus::Ok
        },
        exit_code: i32::from(fail),
        timed_out: false,
        walltime_sec: 5.0,
        peak_vram_mib: None,
        failure_detectors_fired: if fail {
            vec!["tier4:cuda_error".into()]
        } else {
            Vec::new()
        },
        error_detectors_fired: Vec::new(),
        warn_detectors_fired: Vec::new(),
        capture: Default::default(),
        tier_durations_ms: Default::default(),
        env: Default::default(),
        env_passthrough_mode: None,
        failure_type: None,
        error_message: None,
        result: WorkloadResult {
            passed: !fail,
            step_times_ms,
            ..Default::default()
        },
        outputs: Vec::new(),
        inputs: None,
        sanitizer: None,
        profiles: Vec::new(),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (cells, trials, runs) = (
        args.first().copied().unwrap_or(1000),
        args.get(1).copied().unwrap_or(10) as u32,
        args.get(2).copied().unwrap_or(7),
    );
    let mut yaml =
        format!("schema_version: 1\nworkload: training\ntrials: {trials}\nsteps: 50\ncells:\n");
    for c in 0..cells {
        yaml.push_str(&format!(
            "  - {{name: cell-{c}, mitigations: [none], environment: local, extra_env: {{BENCH_CELL: '{c}'}}}}\n"
        ));
    }
    let recipe = parse_recipe(
        &SourceFile::new("bench.yaml", &yaml),
        Syntax::Yaml,
        &Registry::builtin(),
    )
    .unwrap_or_else(|d| panic!("{d:?}"));
    let records: Vec<Vec<TrialRecord>> = (0..cells)
        .map(|c| (0..trials).map(|i| record(c, i)).collect())
        .collect();
    let keys: Vec<Vec<aorta_report::TrialRow>> = records
        .iter()
        .map(|r| {
            r.iter()
                .map(|t| aorta_report::TrialRow {
                    index: t.trial_index,
                    key: t.key.clone(),
                    inputs: String::new(),
                    xid: None,
                })
                .collect()
        })
        .collect();
    let (mut fold, mut html_t, mut bytes) = (Vec::new(), Vec::new(), 0);
    for _ in 0..runs {
        let t = Instant::now();
        let stats: Vec<CellStats> = recipe
            .cells
            .iter()
            .zip(&records)
            .map(|(cell, r)| CellStats::aggregate(cell, &recipe, r.iter(), None))
            .collect();
        let m = Matrix::new(&recipe, stats, RunInfo::default());
        fold.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let html = m.to_html(&HtmlContext {
            environment: Some("bench"),
            reproduce: &["aorta build bench.yaml".to_string()],
            trial_keys: &keys,
            detector_lines: &[],
            env_diffs: &[],
            ..Default::default()
        });
        html_t.push(t.elapsed().as_secs_f64());
        bytes = html.len();
    }
    println!(
        "{cells} cells x {trials} trials, median of {runs}: fold + matrix {:.3} s, report.html {:.3} s ({bytes} bytes)",
        median(fold),
        median(html_t)
    );
}
