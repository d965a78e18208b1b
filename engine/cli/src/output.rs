//! What several commands print the same way: plans and deprecation notices.

use crate::exit::CliResult;
use aorta_plan::Plan;
use std::process::ExitCode;

/// AORTA's exact one-line notice, so scripts that grep for it keep working.
pub fn deprecation(old: &str, new: &str) {
    eprintln!("warning: '{old}' is deprecated and will be removed in a future release; use '{new}' instead.");
}

pub fn print_plans(plans: &[Plan], json: bool) -> CliResult {
    if json {
        let text = if plans.len() == 1 {
            serde_json::to_string_pretty(&plans[0])
        } else {
            serde_json::to_string_pretty(plans)
        };
        println!(
            "{}",
            text.map_err(|e| crate::exit::infra(format!("cannot serialise the plan: {e}")))?
        );
    } else {
        for (i, p) in plans.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print!("{}", p.render_text());
        }
    }
    Ok(ExitCode::SUCCESS)
}
