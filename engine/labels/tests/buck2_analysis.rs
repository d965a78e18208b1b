//! rules/aorta.bzl and every BUCK file of the repository through the stub of Buck2's analysis
//! phase (`aorta_labels::analysis`): every target's impl runs and returns valid providers, and
//! each trial target is one `aorta trial exec` action with the right inputs.
use aorta_labels::analysis::analyse_package;
use std::path::PathBuf;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

#[test]
fn every_buck_file_analyses() {
    let root = repo_root();
    for package in ["", "rules", "recipes"] {
        let targets = analyse_package(&root, package).unwrap_or_else(|e| panic!("//{package}: {e}"));
        assert!(!targets.is_empty(), "//{package} declares targets");
    }
}

#[test]
fn ticket_1234_expands_to_one_action_per_trial() {
    let root = repo_root();
    let targets = analyse_package(&root, "recipes").unwrap();
    let trials: Vec<_> = targets.iter().filter(|t| t.rule == "_aorta_trial" && t.name.starts_with("ticket-1234.")).collect();
    assert_eq!(trials.len(), 10 * 5);
    let t = trials.iter().find(|t| t.name == "ticket-1234.cuda_launch_blocking-nccl_debug_info.3").expect("trial target");
    let actions = t.result["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 1, "{}", t.result);
    let argv: Vec<&str> = actions[0]["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(
        argv,
        [
            "$(exe //rules:aorta)", "trial", "exec", "--recipe", "ticket-1234.yaml", "--cell", "cuda_launch_blocking-nccl_debug_info", "--trial", "3",
            "--out", "$(output ticket-1234.cuda_launch_blocking-nccl_debug_info.3)", "--", "bash", "recipes/quickstart.sh",
        ]
    );
    assert_eq!(actions[0]["hidden"], serde_json::json!(["quickstart.sh"]));
    assert_eq!(actions[0]["category"], "aorta_trial");

    // The recipe target: its default outputs carry every trial's directory; RunInfo runs the matrix.
    let recipe = targets.iter().find(|t| t.name == "ticket-1234").unwrap();
    assert_eq!(recipe.rule, "_aorta_recipe");
    let providers = recipe.result["providers"].as_array().unwrap();
    let default = providers.iter().find(|p| p["provider"] == "DefaultInfo").unwrap();
    assert_eq!(default["fields"]["other_outputs"].as_array().unwrap().len(), 1 + 50);
    let run = providers.iter().find(|p| p["provider"] == "RunInfo").unwrap();
    assert_eq!(run["fields"]["args"], serde_json::json!(["$(exe //rules:aorta)", "build", "ticket-1234.yaml", "--", "bash", "recipes/quickstart.sh"]));
}

#[test]
fn buck_cells_and_trials_match_the_recipes() {
    let root = repo_root();
    let bf = aorta_labels::evaluate_package(&root, "recipes").unwrap().unwrap();
    for t in bf.targets.iter().filter(|t| t.rule == "_aorta_trial") {
        let recipe_file = root.join("recipes").join(t.attrs["recipe"].as_str().unwrap());
        let recipe = aorta_recipe::load_recipe(&recipe_file, &[]).unwrap().recipe;
        let cell = t.attrs["cell"].as_str().unwrap();
        assert!(recipe.cells.iter().any(|c| c.name == cell), "{}: the recipe has no cell {cell}", t.name);
        let index = t.attrs["trial"].as_i64().unwrap();
        assert!((index as u64) < recipe.trials as u64, "{}: the recipe has {} trials", t.name, recipe.trials);
    }
    // And every cell × trial of ticket-1234 has its target.
    let recipe = aorta_recipe::load_recipe(&root.join("recipes/ticket-1234.yaml"), &[]).unwrap().recipe;
    for c in &recipe.cells {
        for i in 0..recipe.trials as u64 {
            let name = format!("ticket-1234.{}.{i}", c.name);
            assert!(bf.targets.iter().any(|t| t.name == name), "{name} missing from recipes/BUCK");
        }
    }
}
