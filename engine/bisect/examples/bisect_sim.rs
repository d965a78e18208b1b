//! bench/bisect: the three searches on simulated flaky trials against the naive searches, over
//! many seeded runs (`bench/bisect/run.sh`). Pure algorithm: no engine, no subprocesses.
//!
//! Rows: `bisect env` (40 differences, the failure needs two of them, at p = 1.0 and 0.3),
//! `bisect range` (64 points, first bad 37, bad points failing at 0.4; and a good side that
//! fails at 0.05 against bad at 0.6), `reduce` (6 mitigations, two needed, unmitigated rate
//! 0.5). Naive: leave-one-out for sets (each difference or mitigation alone removed from the
//! failing or fixing end, n probes) and a linear scan for ranges (each point from the first
//! until one fails), every probe called by the same sequential judge.

use aorta_bisect::ddmin::{ddmin, worst_case_probes, Outcome};
use aorta_bisect::judge::{Call, Judge, Trials};
use aorta_bisect::range::first_bad;
use aorta_bisect::sim::Sim;

struct Row {
    name: String,
    runs: u64,
    right: u64,
    probes: Vec<usize>,
    trials: Vec<u64>,
}

impl Row {
    fn new(name: String) -> Row {
        Row {
            name,
            runs: 0,
            right: 0,
            probes: Vec::new(),
            trials: Vec::new(),
        }
    }

    fn add(&mut self, right: bool, probes: usize, trials: u64) {
        self.runs += 1;
        self.right += u64::from(right);
        self.probes.push(probes);
        self.trials.push(trials);
    }

    fn print(&mut self, bound: &str) {
        self.probes.sort_unstable();
        self.trials.sort_unstable();
        let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
        let p95 = |n: usize| (n * 95).div_ceil(100).saturating_sub(1);
        let probes: Vec<u64> = self.probes.iter().map(|&p| p as u64).collect();
        println!(
            "| {} | {} | {:.2}% | {:.1} | {} | {} | {} | {:.0} | {} |",
            self.name,
            self.runs,
            100.0 * (self.runs - self.right) as f64 / self.runs as f64,
            mean(&probes),
            probes[p95(probes.len())],
            probes[probes.len() - 1],
            bound,
            mean(&self.trials),
            self.trials[p95(self.trials.len())],
        );
    }
}

fn call<T: Trials>(judge: &mut Judge<T::Config>, sim: &mut T, c: &T::Config, hit: Call) -> Outcome
where
    T::Error: std::fmt::Debug,
{
    match judge.call(sim, c).unwrap().call {
        Call::Undecided => Outcome::Undecided,
        x if x == hit => Outcome::Hit,
        _ => Outcome::Miss,
    }
}

/// ddmin, one-at-a-time and leave-one-out over `n` changes; `rate` of an applied subset; `hit`
/// the call the property is; `want` the planted answers (any one is right).
fn sets(
    label: &str,
    seeds: u64,
    n: usize,
    want: &[&[usize]],
    hit: Call,
    rate: &dyn Fn(&Vec<usize>) -> f64,
) {
    let all: Vec<usize> = (0..n).collect();
    let (good, bad) = match hit {
        Call::Fails => (Vec::new(), all.clone()),
        _ => (all.clone(), Vec::new()),
    };
    let mut dd = Row::new(format!("{label}: ddmin"));
    let mut naive = Row::new(format!("{label}: leave-one-out"));
    let mut alone = Row::new(format!("{label}: one at a time"));
    for seed in 0..seeds {
        let mut sim = Sim::new(seed, rate);
        let mut judge = Judge::new(0.95, 64, good.clone(), bad.clone());
        if judge.check_endpoints(&mut sim).unwrap().is_err() {
            dd.add(false, 0, sim.total_trials());
            continue;
        }
        let m = ddmin(n, |s| {
            Ok::<_, ()>(call(&mut judge, &mut sim, &s.to_vec(), hit))
        })
        .unwrap();
        dd.add(
            want.contains(&m.subset.as_slice()),
            m.probes,
            sim.total_trials(),
        );
        // One at a time: each change alone applied to the end without the property.
        let mut sim = Sim::new(seed, rate);
        let mut judge = Judge::new(0.95, 64, good.clone(), bad.clone());
        let _ = judge.check_endpoints(&mut sim).unwrap();
        let empty = if hit == Call::Fails {
            good.clone()
        } else {
            bad.clone()
        };
        let shows: Vec<usize> = (0..n)
            .filter(|i| {
                let mut one = empty.clone();
                one.push(*i);
                one.sort_unstable();
                call(&mut judge, &mut sim, &one, hit) == Outcome::Hit
            })
            .collect();
        alone.add(want.contains(&shows.as_slice()), n, sim.total_trials());
        // Leave-one-out from the end that shows the property, on a fresh simulation.
        let mut sim = Sim::new(seed, rate);
        let mut judge = Judge::new(0.95, 64, good.clone(), bad.clone());
        let _ = judge.check_endpoints(&mut sim).unwrap();
        let full = if hit == Call::Fails {
            bad.clone()
        } else {
            good.clone()
        };
        let needed: Vec<usize> = (0..n)
            .filter(|i| {
                let less: Vec<usize> = full.iter().copied().filter(|j| j != i).collect();
                call(&mut judge, &mut sim, &less, hit) == Outcome::Miss
            })
            .collect();
        naive.add(want.contains(&needed.as_slice()), n, sim.total_trials());
    }
    let bound = worst_case_probes(n).to_string();
    dd.print(&bound);
    alone.print(&n.to_string());
    naive.print(&n.to_string());
}

fn range(label: &str, seeds: u64, n: usize, first: usize, p_bad: f64, p_good: f64) {
    let rate = move |&i: &usize| if i >= first { p_bad } else { p_good };
    let mut bisect = Row::new(format!("{label}: bisect"));
    let mut linear = Row::new(format!("{label}: linear scan"));
    for seed in 0..seeds {
        let mut sim = Sim::new(seed, rate);
        let mut judge = Judge::new(0.95, 64, 0usize, n - 1);
        if judge.check_endpoints(&mut sim).unwrap().is_err() {
            bisect.add(false, 2, sim.total_trials());
            continue;
        }
        let b = first_bad(&mut judge, &mut sim, n, |i| i).unwrap();
        bisect.add(
            b.first_bad == Some(first),
            b.points_probed,
            sim.total_trials(),
        );
        let mut sim = Sim::new(seed, rate);
        let mut judge = Judge::new(0.95, 64, 0usize, n - 1);
        let _ = judge.check_endpoints(&mut sim).unwrap();
        let found = (1..n - 1).find(|i| judge.call(&mut sim, i).unwrap().call == Call::Fails);
        let points = found.map_or(n, |i| i + 2);
        linear.add(found.unwrap_or(n - 1) == first, points, sim.total_trials());
    }
    let bound = ((n as f64).log2().ceil() as usize + 3).to_string();
    bisect.print(&bound);
    linear.print(&n.to_string());
}

fn main() {
    let mut seeds = 10_000u64;
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--seeds") {
        seeds = args
            .get(i + 1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(seeds);
    }
    println!("| search | runs | wrong answer | probes (mean) | p95 | max | bound | trials (mean) | p95 |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for p in [1.0, 0.3] {
        let rate = move |s: &Vec<usize>| {
            if s.contains(&0) && s.contains(&20) {
                p
            } else {
                0.0
            }
        };
        sets(
            &format!("env, 40 diffs, A and B, p={p}"),
            seeds,
            40,
            &[&[0, 20]],
            Call::Fails,
            &rate,
        );
    }
    let either = |s: &Vec<usize>| {
        if s.contains(&0) || s.contains(&20) {
            0.3
        } else {
            0.0
        }
    };
    // Either alone is a right answer; one at a time finding both is right too.
    sets(
        "env, 40 diffs, A or B, p=0.3",
        seeds,
        40,
        &[&[0], &[20], &[0, 20]],
        Call::Fails,
        &either,
    );
    range(
        "range, 64 points, first bad 37, 0.4 vs 0",
        seeds,
        64,
        37,
        0.4,
        0.0,
    );
    range(
        "range, 64 points, first bad 37, 0.6 vs 0.05",
        seeds,
        64,
        37,
        0.6,
        0.05,
    );
    let rate = |s: &Vec<usize>| {
        if s.contains(&1) && s.contains(&4) {
            0.0
        } else {
            0.5
        }
    };
    sets(
        "reduce, 6 mitigations, 2 needed, p=0.5",
        seeds,
        6,
        &[&[1, 4]],
        Call::Passes,
        &rate,
    );
}
