//! Sidecar and project-registry loading (spec §4.4, §4.5, §11.9): merging, collisions and
//! errors that name the file and point at the offending key or value.

use aorta_registry::{project_registry_for, Registry, Source, PROJECT_REGISTRY_FILE};
use aorta_source::Diag;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/sidecars")
        .join(name)
}

fn load(names: &[&str]) -> Result<Registry, Box<Diag>> {
    let paths: Vec<PathBuf> = names.iter().map(|n| fixture(n)).collect();
    Registry::load(None, &paths)
}

fn load_err(names: &[&str]) -> Box<Diag> {
    load(names)
        .err()
        .unwrap_or_else(|| panic!("{names:?} should not load"))
}

/// The diagnostic's file must be `file` and its primary span must cover `expected`.
fn assert_points_at(diag: &Diag, file: &Path, expected: &str) {
    assert_eq!(
        diag.file_name(),
        Some(file.display().to_string().as_str()),
        "{diag}"
    );
    let text = std::fs::read_to_string(file).unwrap();
    let span = diag.primary_span().expect("diagnostic has a span");
    assert_eq!(&text[span], expected, "{diag}");
}

#[test]
fn sidecar_entries_are_visible_with_their_source() {
    let reg = load(&["mitigations-sidecar.json"]).unwrap();
    let m = reg.mitigation("my_flag").unwrap();
    assert_eq!(m.env.get("MY_FLAG").map(String::as_str), Some("1"));
    assert_eq!(m.source.to_string(), "sidecar:mitigations-sidecar.json");
    assert_eq!(
        m.source,
        Source::Sidecar {
            path: fixture("mitigations-sidecar.json")
        }
    );
    assert_eq!(
        reg.mitigation("amp_bf16")
            .unwrap()
            .env
            .get("AMP_DTYPE")
            .map(String::as_str),
        Some("bf16")
    );
    let img = reg.environment("my_local_image").unwrap();
    assert!(img
        .docker
        .as_deref()
        .unwrap()
        .starts_with("rocm/pytorch@sha256:"));
    assert_eq!(
        img.docker.as_deref().unwrap().len(),
        "rocm/pytorch@sha256:".len() + 64
    );
    assert_eq!(
        reg.environment("host_venv_3_12").unwrap().venv.as_deref(),
        Some("/opt/venvs/py312")
    );
    assert!(reg.mitigation("tf32_off").is_some(), "built-ins stay");
    assert_eq!(reg.sidecars(), [fixture("mitigations-sidecar.json")]);
    assert!(reg.mitigation_env_vars().contains("AMP_DTYPE"));
}

#[test]
fn disjoint_sidecars_merge() {
    let reg = load(&["mitigations-sidecar.json", "probe-flag-sidecar.json"]).unwrap();
    for name in [
        "my_flag",
        "amp_bf16",
        "fbgemm_no_jk",
        "fbgemm_tbe_v2",
        "fbgemm_tbe_rocm_hip_backward",
        "fbgemm_bounds_check_v2",
        "torchinductor_max_autotune_pointwise",
        "eval_disable_pipelining",
    ] {
        assert!(reg.mitigation(name).is_some(), "{name}");
    }
    assert_eq!(
        reg.mitigation("fbgemm_no_jk").unwrap().source.to_string(),
        "sidecar:probe-flag-sidecar.json"
    );
    let names: Vec<&str> = reg.mitigations().map(|m| m.name.as_str()).collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted by name");
}

#[test]
fn buck_target_round_trips() {
    let reg = load(&["buck-environments-sidecar.json"]).unwrap();
    let alone = reg.environment("buck_only").unwrap();
    assert_eq!(
        (alone.docker.as_deref(), alone.buck_target.as_deref()),
        (None, Some("//workloads:train"))
    );
    let both = reg.environment("docker_and_buck").unwrap();
    assert_eq!(both.docker.as_deref(), Some("rocm/pytorch:latest"));
    assert_eq!(both.venv, None);
    assert_eq!(both.buck_target.as_deref(), Some("//workloads:eval"));
}

#[test]
fn collision_with_a_builtin_names_both_sources() {
    let e = load_err(&["bad-collides-builtin.json"]);
    let full = std::path::absolute(fixture("bad-collides-builtin.json")).unwrap();
    assert!(
        e.message.contains("built-in") && e.message.contains(&full.display().to_string()),
        "{e}"
    );
    assert_eq!(e.path.as_ref().unwrap().to_string(), "mitigations.tf32_off");
    assert_points_at(&e, &fixture("bad-collides-builtin.json"), "\"tf32_off\"");
}

#[test]
fn collision_between_sidecars_names_both_full_paths() {
    let e = load_err(&["mitigations-sidecar.json", "bad-collides-sidecar.json"]);
    for f in ["mitigations-sidecar.json", "bad-collides-sidecar.json"] {
        let full = std::path::absolute(fixture(f)).unwrap();
        assert!(e.message.contains(&full.display().to_string()), "{e}");
    }
    assert!(
        e.message.contains("mitigations-sidecar.json:4:5"),
        "first definition's line:col: {e}"
    );
    assert_points_at(&e, &fixture("bad-collides-sidecar.json"), "\"my_flag\"");
}

#[test]
fn same_basename_twice_is_refused_up_front() {
    let e = load_err(&["mitigations-sidecar.json", "mitigations-sidecar.json"]);
    assert!(e.message.contains("given twice"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("mitigations-sidecar.json");
    std::fs::copy(fixture("probe-flag-sidecar.json"), &copy).unwrap();
    let e = Registry::load(None, &[fixture("mitigations-sidecar.json"), copy])
        .err()
        .unwrap();
    assert!(
        e.message
            .contains("share the basename 'mitigations-sidecar.json'"),
        "{e}"
    );
}

#[test]
fn malformed_files_are_located() {
    let cases: &[(&str, &str, &str)] = &[
        ("bad-version.json", "2", "version"),
        ("bad-version-bool.json", "true", "version"),
        ("bad-missing-version.json", "\"mitigations\"", "version"),
        ("bad-unknown-top-key.json", "\"mitigation\"", "mitigation"),
        (
            "bad-non-object-payload.json",
            "\"MY_FLAG=1\"",
            "mitigations.my_flag",
        ),
        ("bad-non-string-value.json", "1", "mitigations.my_flag.FOO"),
        (
            "bad-env-name.json",
            "\"FOO=BAR\"",
            "mitigations.my_flag.FOO=BAR",
        ),
        (
            "bad-nul-value.json",
            "\"a\\u0000b\"",
            "mitigations.my_flag.FOO",
        ),
        ("bad-top-level-array.json", "[", ""),
        ("bad-section-not-object.json", "[", "mitigations"),
        (
            "bad-environment-key.json",
            "\"image\"",
            "environments.img.image",
        ),
        (
            "bad-environment-value.json",
            "42",
            "environments.img.docker",
        ),
        (
            "bad-duplicate-key.json",
            "\"my_flag\"",
            "mitigations.my_flag",
        ),
    ];
    for (file, under, path) in cases {
        let e = load_err(&[file]);
        assert_points_at(&e, &fixture(file), under);
        assert_eq!(
            e.path.as_ref().map(ToString::to_string).unwrap_or_default(),
            *path,
            "{file}"
        );
        assert!(e.message.contains(file), "message names the file: {e}");
        assert!(e.help.is_some(), "{file} has a hint");
    }
}

#[test]
fn duplicate_key_also_points_at_the_first() {
    let e = load_err(&["bad-duplicate-key.json"]);
    let span = e.primary_span().unwrap();
    let text = std::fs::read_to_string(fixture("bad-duplicate-key.json")).unwrap();
    assert_eq!(
        text[..span.start].matches('\n').count() + 1,
        5,
        "the second my_flag, line 5"
    );
}

#[test]
fn invalid_json_reports_a_location() {
    let e = load_err(&["bad-invalid-json.json"]);
    assert!(
        e.message.contains("bad-invalid-json.json") && e.message.contains("line 5"),
        "{e}"
    );
    assert!(e.file_name().unwrap().ends_with("bad-invalid-json.json"));
    assert!(e.primary_span().is_some());
}

#[test]
fn missing_file_names_the_file() {
    let e = load_err(&["does-not-exist.json"]);
    assert!(e.message.contains("does-not-exist.json"), "{e}");
}

#[test]
fn an_error_in_a_later_sidecar_loads_nothing() {
    let e = load_err(&["mitigations-sidecar.json", "bad-version.json"]);
    assert!(e.message.contains("bad-version.json"), "{e}");
}

#[test]
fn project_registry_is_found_next_to_the_recipe_and_loaded_first() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("recipe.yaml");
    assert_eq!(project_registry_for(&recipe), None);
    let project = dir.path().join(PROJECT_REGISTRY_FILE);
    std::fs::write(&project, r#"{"version": 1, "mitigations": {"proj_flag": {"PROJ": "1"}}, "environments": {"proj_env": {"venv": "/v"}}}"#).unwrap();
    assert_eq!(project_registry_for(&recipe), Some(project.clone()));
    assert_eq!(
        project_registry_for(Path::new("recipe.yaml")),
        None,
        "relative recipe: looks in ."
    );

    let reg = Registry::load(Some(&project), &[fixture("mitigations-sidecar.json")]).unwrap();
    assert_eq!(
        reg.mitigation("proj_flag").unwrap().source.to_string(),
        "project:aorta-registry.json"
    );
    assert_eq!(
        reg.environment("proj_env").unwrap().source,
        Source::Project {
            path: project.clone()
        }
    );
    assert_eq!(reg.project(), Some(project.as_path()));

    // A sidecar redefining a project name is the one blamed (merge order: project first).
    let clash = dir.path().join("clash.json");
    std::fs::write(
        &clash,
        r#"{"version": 1, "mitigations": {"proj_flag": {"PROJ": "2"}}}"#,
    )
    .unwrap();
    let e = Registry::load(Some(&project), std::slice::from_ref(&clash))
        .err()
        .unwrap();
    assert!(
        e.message.contains("aorta-registry.json:1:")
            && e.message.contains("(project:aorta-registry.json)"),
        "{e}"
    );
    assert_points_at(&e, &clash, "\"proj_flag\"");

    // Passing the project registry again as a sidecar is explained, not reported as 2 collisions.
    let e = Registry::load(Some(&project), std::slice::from_ref(&project))
        .err()
        .unwrap();
    assert!(e.message.contains("also given as a sidecar"), "{e}");
}

/// What the CLI prints for a diagnostic.
fn rendered(d: &Diag) -> String {
    let mut out = String::new();
    miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
        .render_report(&mut out, d)
        .unwrap();
    out
}

/// A project (marked by .buckconfig) with a recipe directory; returns (project, recipes dir).
fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".buckconfig"), "[aorta]\n").unwrap();
    let recipes = dir.path().join("recipes");
    std::fs::create_dir(&recipes).unwrap();
    (dir, recipes)
}

#[test]
fn a_project_registry_symlinked_out_of_the_project_is_refused_unread() {
    // The issue's reproduction: aorta-registry.json -> a system file printed its first lines.
    let (proj, recipes) = project();
    let outside = tempfile::tempdir().unwrap();
    let system = outside.path().join("passwd");
    std::fs::write(&system, "root:x:0:0:SECRET-LINE:/root:/bin/bash\n").unwrap();
    let link = recipes.join(PROJECT_REGISTRY_FILE);
    std::os::unix::fs::symlink(&system, &link).unwrap();
    let found = project_registry_for(&recipes.join("r.yaml")).unwrap();
    let e = Registry::load(Some(&found), &[]).expect_err("refused");
    let out = rendered(&e);
    assert!(
        out.contains("symbolic link") && out.contains("outside the project"),
        "{out}"
    );
    assert!(!out.contains("SECRET-LINE"), "{out}");
    // Same through the path watch mode takes (files read first).
    let file = aorta_source::SourceFile::read(&found).unwrap();
    assert!(Registry::from_sources(Some((&found, file)), &[]).is_err());
    drop(proj);
}

#[test]
fn a_project_registry_symlinked_within_the_project_loads() {
    let (proj, recipes) = project();
    let shared = proj.path().join("shared.json");
    std::fs::write(
        &shared,
        r#"{"version": 1, "mitigations": {"from_link": {"X": "1"}}}"#,
    )
    .unwrap();
    std::os::unix::fs::symlink(&shared, recipes.join(PROJECT_REGISTRY_FILE)).unwrap();
    let found = project_registry_for(&recipes.join("r.yaml")).unwrap();
    let r = Registry::load(Some(&found), &[]).unwrap();
    assert!(r.mitigation("from_link").is_some());
}

#[test]
fn a_file_that_is_not_registry_shaped_is_not_quoted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oops.json");
    std::fs::write(
        &path,
        "root:x:0:0:SECRET-LINE:/root:/bin/bash\ndaemon:x:1:1\n",
    )
    .unwrap();
    let e = Registry::load(None, std::slice::from_ref(&path)).expect_err("refused");
    let out = rendered(&e);
    assert!(
        out.contains("is not a registry file") && out.contains("(at 1:"),
        "{out}"
    );
    assert!(
        !out.contains("SECRET-LINE") && !out.contains("daemon"),
        "{out}"
    );
    // A registry with a syntax error is still shown, to be fixed.
    std::fs::write(&path, "{\"version\": 1,,}\n").unwrap();
    let out = rendered(
        &Registry::load(None, std::slice::from_ref(&path))
            .err()
            .unwrap(),
    );
    assert!(
        out.contains("not valid JSON") && out.contains("{\"version\": 1,,}"),
        "{out}"
    );
}
