//! The agent's error rates and trial costs against AORTA 0.2.1's one-trial rule, by
//! simulation (docs/benchmarks.md): `cargo run --release -p aorta-agent --example simulate`.

#[path = "../tests/sim/mod.rs"]
mod sim;

use aorta_agent::stats::Design;
use sim::{agent_run, aorta_run, rates, Scenario};

fn main() {
    let seeds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let design = Design::new(0.95, 5, 64, 64);
    println!("{seeds} seeded runs per row; 5 candidates; agent at 95% confidence, caps 64 baseline / 64 per candidate\n");
    println!("| scenario | p | agent: false convergence | agent: found fix | agent: mean trials | AORTA: false convergence | AORTA: found fix | AORTA: mean trials |");
    println!("|---|---|---|---|---|---|---|---|");
    for p in [0.05, 0.2, 0.3, 0.5, 0.8, 1.0] {
        for (name, q, fixes) in [
            ("5 duds", vec![p; 5], vec![false; 5]),
            (
                "fix is 3rd of 5",
                vec![p, p, 0.0, p, p],
                vec![false, false, true, false, false],
            ),
        ] {
            let s = Scenario { p, q: &q };
            let a = rates(seeds, &fixes, |seed| agent_run(&design, &s, seed));
            let o = rates(seeds, &fixes, |seed| aorta_run(&s, seed));
            println!(
                "| {name} | {p} | {:.4} | {:.4} | {:.1} | {:.4} | {:.4} | {:.1} |",
                a.false_convergence,
                a.found_fix,
                a.mean_trials,
                o.false_convergence,
                o.found_fix,
                o.mean_trials
            );
        }
    }
}
