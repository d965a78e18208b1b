//! Saturation and false-dependency detection on the H200 shape from issue 6 (fixture:
//! tests/fixtures/h200-issue-sweep.json, the issue's CuPy figures where it gives them, the
//! queue model elsewhere), the JSON round trip, plots and compare.

use std::path::PathBuf;

use aorta_hw_queue::analysis::analyze;
use aorta_hw_queue::compare::{compare, Verdict};
use aorta_hw_queue::plot::plot_result;
use aorta_hw_queue::results::ResultFile;
use aorta_hw_queue::table;

fn fixture() -> ResultFile {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200-issue-sweep.json");
    ResultFile::read(&p).unwrap()
}

#[test]
fn false_dependencies_start_where_the_issue_says() {
    let f = fixture();
    let a = analyze(&f.runs, Some(2), 0.1);
    let depth = a.groups.iter().find(|g| g.label == "depth").unwrap();
    let starts: Vec<(u32, Option<u32>)> = depth
        .false_dependencies
        .iter()
        .map(|fd| (fd.streams, fd.starts_at))
        .collect();
    // 32 streams: 21.0 at 16 connections < 0.9 × 32; 16 streams: 10.6 at 8; 1 stream: never;
    // 64 streams: more streams than the 32 queues, at every count.
    assert!(starts.contains(&(32, Some(16))), "{starts:?}");
    assert!(starts.contains(&(16, Some(8))), "{starts:?}");
    assert!(starts.contains(&(8, Some(4))), "{starts:?}");
    assert!(starts.contains(&(1, None)), "{starts:?}");
    assert!(starts.contains(&(64, Some(32))), "{starts:?}");
    let fd32 = depth
        .false_dependencies
        .iter()
        .find(|f| f.streams == 32)
        .unwrap();
    assert_eq!(
        fd32.summary,
        "from 16 connections down (concurrency 21.0 of 32.0)"
    );
    // The model column tracks the measurement within 10% where the issue measured.
    for p in &fd32.by_connections {
        let m = p.model.unwrap();
        assert!(
            (p.concurrency - m).abs() / m < 0.1,
            "c={} {} vs model {m}",
            p.connections,
            p.concurrency
        );
    }
    // The probe on stream n shares a queue exactly when n ≥ connections.
    for p in &fd32.by_connections {
        assert_eq!(p.probe_blocked, p.connections <= 32, "c={}", p.connections);
    }
    let fd4 = depth
        .false_dependencies
        .iter()
        .find(|f| f.streams == 4)
        .unwrap();
    for p in &fd4.by_connections {
        assert_eq!(
            p.probe_blocked,
            p.connections <= 4,
            "n=4 c={}",
            p.connections
        );
    }
    // Breadth-first: no blocked queue head, no false dependency at any stream count.
    let breadth = a.groups.iter().find(|g| g.label == "breadth").unwrap();
    assert!(breadth
        .false_dependencies
        .iter()
        .all(|f| f.starts_at.is_none()));
}

#[test]
fn saturation_per_connection_count() {
    let a = analyze(&fixture().runs, Some(2), 0.1);
    let depth = a.groups.iter().find(|g| g.label == "depth").unwrap();
    let at = |c: u32| {
        depth
            .saturation
            .iter()
            .find(|s| s.connections == c)
            .unwrap()
            .clone()
    };
    assert_eq!(at(8).linear_until, Some(8));
    assert_eq!(at(8).plateau_from, Some(16));
    assert_eq!(at(32).linear_until, Some(32));
    assert_eq!(at(1).linear_until, Some(1));
    assert_eq!(at(1).plateau_from, Some(2));
    let text = table::analysis_text(&a);
    assert!(
        text.contains(" 8 connections: within 10% of ideal up to 8 streams; flat from 16 streams"),
        "{text}"
    );
}

fn approx_eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value::*;
    match (a, b) {
        (Number(x), Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-12 * x.abs().max(1.0)
        }
        (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| approx_eq(x, y)),
        (Object(x), Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| approx_eq(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn json_round_trip_and_version_check() {
    let mut f = fixture();
    f.analysis = Some(analyze(&f.runs, Some(2), 0.1));
    let back = ResultFile::from_json(&f.to_json()).unwrap();
    // serde_json's default float parser may differ in the last bit: compare within 1e-12.
    let (a, b) = (
        serde_json::to_value(&f).unwrap(),
        serde_json::to_value(&back).unwrap(),
    );
    assert!(approx_eq(&a, &b), "round trip changed the file");
    assert_eq!(back.runs.len(), 6);
    assert_eq!(back.analysis.as_ref().unwrap().groups.len(), 2);
    let newer = f
        .to_json()
        .replace("\"schema_version\": 1", "\"schema_version\": 2");
    assert!(ResultFile::from_json(&newer)
        .unwrap_err()
        .contains("schema version 2"));
    assert!(ResultFile::from_json("{\"schema\": \"other\"}").is_err());
    assert!(ResultFile::from_json("not json").is_err());
}

#[test]
fn plots_render_to_svg() {
    let dir = tempfile::tempdir().unwrap();
    let files = plot_result(&fixture(), dir.path()).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in [
        "concurrency-depth.svg",
        "tiny-latency-depth.svg",
        "concurrency-breadth.svg",
    ] {
        assert!(names.iter().any(|n| n == want), "{names:?}");
    }
    let svg = std::fs::read_to_string(dir.path().join("concurrency-depth.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("polyline"),
        "{}",
        &svg[..200.min(svg.len())]
    );
    assert!(svg.contains("16 connections") && svg.contains("ideal"));
}

#[test]
fn compare_flags_regressions_in_the_right_direction() {
    let base = fixture();
    assert!(!compare(&base, &base, 0.1).has_regressions());
    let mut worse = base.clone();
    let p = worse.runs[3]
        .points
        .iter_mut()
        .find(|p| p.label == "depth" && p.streams == 32)
        .unwrap();
    p.metrics.concurrency = Some(p.metrics.concurrency.unwrap() * 0.8);
    let lat = p.metrics.tiny_latency_us.as_mut().unwrap();
    lat.p50 *= 0.5; // faster probe: an improvement, not a regression
    let c = compare(&base, &worse, 0.1);
    let regs: Vec<_> = c
        .deltas
        .iter()
        .filter(|d| d.verdict == Verdict::Regression)
        .collect();
    assert_eq!(regs.len(), 1, "{regs:?}");
    assert_eq!(regs[0].metric, "concurrency");
    assert_eq!(regs[0].point, "connections=8 depth streams=32");
    assert!(c
        .deltas
        .iter()
        .any(|d| d.verdict == Verdict::Improvement && d.metric == "tiny_latency_us.p50"));
    assert!(
        !compare(&base, &worse, 0.25).has_regressions(),
        "20% is within a 25% threshold"
    );
}

#[test]
fn sweep_table_shows_measured_model_and_analysis() {
    let mut f = fixture();
    f.kind = aorta_hw_queue::results::Kind::Sweep;
    f.analysis = Some(analyze(&f.runs, Some(2), 0.1));
    let t = table::render(&f);
    println!("{t}");
    assert!(t.contains("depth: concurrency (model); columns = CUDA_DEVICE_MAX_CONNECTIONS"));
    assert!(
        t.contains("12.70 (12.8)"),
        "measured (model) at 32 streams, 8 connections"
    );
    assert!(t.contains("32 streams: from 16 connections down (concurrency 21.0 of 32.0)"));
}
