//! rules/aorta.bzl and every BUCK file of the repository through the stub of Buck2's analysis
//! phase (`aorta_labels::analysis`): every target's impl runs and returns valid providers, and
//! a recipe target with `cells` and `trials` declares one `aorta trial exec` action per trial,
//! with the right inputs, and a sub-target per cell and per trial.
use aorta_labels::analysis::{analyse_package, Analysed};
use serde_json::{json, Value};
use std::path::PathBuf;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn provider<'a>(t: &'a Analysed, name: &str) -> &'a Value {
    t.result["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == name)
        .unwrap_or_else(|| panic!("{}: no {name}: {}", t.name, t.result))
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

#[test]
fn every_buck_file_analyses() {
    let root = repo_root();
    for package in ["", "rules", "recipes"] {
        let targets =
            analyse_package(&root, package).unwrap_or_else(|e| panic!("//{package}: {e}"));
        assert!(!targets.is_empty(), "//{package} declares targets");
    }
}

#[test]
fn ticket_1234_runs_one_action_per_trial() {
    let root = repo_root();
    let targets = analyse_package(&root, "recipes").unwrap();
    let t = targets
        .iter()
        .find(|t| t.name == "ticket-1234")
        .expect("ticket-1234");
    assert_eq!(t.rule, "aorta_recipe");
    let actions = t.result["actions"].as_array().unwrap();
    let trials: Vec<&Value> = actions
        .iter()
        .filter(|a| a["category"] == "aorta_trial")
        .collect();
    assert_eq!(trials.len(), 10 * 5, "{}", t.result);
    let a = trials
        .iter()
        .find(|a| a["identifier"] == "cuda_launch_blocking-nccl_debug_info/3")
        .expect("trial action");
    assert_eq!(
        strings(&a["argv"]),
        [
            "$(exe //rules:aorta)",
            "trial",
            "exec",
            "--recipe",
            "ticket-1234.yaml",
            "--cell",
            "cuda_launch_blocking-nccl_debug_info",
            "--trial",
            "3",
            "--out",
            "$(output trials/cuda_launch_blocking-nccl_debug_info/3)",
            "--",
            "bash",
            "recipes/quickstart.sh",
        ]
    );
    assert_eq!(
        a["hidden"],
        json!(["quickstart.sh"]),
        "the launch script is a declared input"
    );

    // Default outputs: the marker plus every trial's directory; RunInfo runs the whole matrix.
    let default = provider(t, "DefaultInfo");
    let outs = strings(&default["fields"]["default_outputs"]);
    assert_eq!(outs.len(), 1 + 50);
    assert!(
        outs.contains(&"trials/none-none/0")
            && outs.contains(&"trials/nccl_proto_simple-nccl_debug_info/4"),
        "{outs:?}"
    );
    let run = provider(t, "RunInfo");
    assert_eq!(
        strings(&run["fields"]["args"]),
        [
            "$(exe //rules:aorta)",
            "build",
            "ticket-1234.yaml",
            "--",
            "bash",
            "recipes/quickstart.sh"
        ]
    );

    // Sub-targets: one per cell (its 5 trials) and one per trial.
    let subs = default["fields"]["sub_targets"].as_object().unwrap();
    assert_eq!(subs.len(), 10 + 50);
    let cell = &subs["none-nccl_debug_info"][0]["fields"]["default_outputs"];
    assert_eq!(
        strings(cell),
        (0..5)
            .map(|i| format!("trials/none-nccl_debug_info/{i}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        subs["none-none/2"][0]["fields"]["default_output"],
        json!(["trials/none-none/2"])
    );
}

#[test]
fn gpus_env_snapshot_and_registries_reach_the_trial_command() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for (path, text) in [
        ("rules/aorta.bzl", std::fs::read_to_string(repo_root().join("rules/aorta.bzl")).unwrap()),
        ("rules/BUCK", std::fs::read_to_string(repo_root().join("rules/BUCK")).unwrap()),
        (
            "p/BUCK",
            "load(\"//rules:aorta.bzl\", \"aorta_recipe\")\naorta_recipe(name = \"g\", recipe = \"g.yaml\", mitigations_files = [\"m.json\"], env_snapshot = \"h200.json\", gpus = 2, cells = [\"a\"], trials = 1)\n".to_owned(),
        ),
        (".buckconfig", String::new()),
    ] {
        std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
        std::fs::write(root.join(path), text).unwrap();
    }
    let targets = analyse_package(root, "p").unwrap();
    let a = &targets[0].result["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "run")
        .unwrap()
        .clone();
    assert_eq!(
        strings(&a["argv"]),
        [
            "$(exe //rules:aorta)",
            "trial",
            "exec",
            "--recipe",
            "g.yaml",
            "--cell",
            "a",
            "--trial",
            "0",
            "--out",
            "$(output trials/a/0)",
            "--mitigations-file",
            "m.json",
            "--env-snapshot",
            "h200.json",
            "--gpus",
            "0,1"
        ]
    );
}

#[test]
fn buck_cells_and_trials_match_the_recipes() {
    let root = repo_root();
    let bf = aorta_labels::evaluate_package(&root, "recipes")
        .unwrap()
        .unwrap();
    let mut checked = 0;
    for t in &bf.targets {
        let cells: Vec<&str> = t.attrs["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let trials = t.attrs["trials"].as_u64().unwrap();
        if cells.is_empty() && trials == 0 {
            continue;
        }
        let recipe_file = root
            .join("recipes")
            .join(t.attrs["recipe"].as_str().unwrap());
        let recipe = aorta_recipe::load_recipe(&recipe_file, &[]).unwrap().recipe;
        let names: Vec<&str> = recipe.cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            cells, names,
            "{}: `cells` must list the recipe's cells, in order",
            t.name
        );
        assert_eq!(
            trials, recipe.trials as u64,
            "{}: `trials` must be the recipe's trial count",
            t.name
        );
        checked += 1;
    }
    assert!(checked >= 1, "recipes/BUCK has per-trial targets");
}
