//! `aorta bundle` on a real run directory: a build whose command prints secrets, bundled
//! twice (byte-identical), verified, reviewed; the seeded-secret corpus itself is
//! engine/bundle/tests/seeded_secrets.rs.
use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const SECRET: &str = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
const RECIPE: &str = "schema_version: 1\nmode: probe\nticket: T-7\ntrials: 2\nmitigation_axis: [none]\ndiagnostic_axis: [none]\nredaction:\n  scrub_env_keys: ['CORP_*']\n";

fn aorta(dir: &Path, args: &[&str]) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("AORTA_STORE", dir.join("store"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn built_run() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".aorta-root"), "").unwrap();
    std::fs::write(dir.path().join("r.yaml"), RECIPE).unwrap();
    let script = format!(
        "echo \"HF_TOKEN={SECRET}\"; echo 'CORP_LICENSE=lic-99812'; echo 'loading /home/alice-q/data'; exit 1\n"
    );
    std::fs::write(dir.path().join("job.sh"), script).unwrap();
    let out = aorta(
        dir.path(),
        &[
            "sweep", "run", "--recipe", "r.yaml", "--output", "out", "--", "bash", "job.sh",
        ],
    );
    assert!(dir.path().join("out/T-7/matrix.json").is_file(), "{out:?}");
    dir
}

fn members(path: &Path) -> Vec<(String, String)> {
    let f = std::fs::File::open(path).unwrap();
    let mut a = tar::Archive::new(flate2::read::GzDecoder::new(f));
    a.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let mut s = String::new();
            e.read_to_string(&mut s).unwrap();
            (e.path().unwrap().to_string_lossy().into_owned(), s)
        })
        .collect()
}

#[test]
fn a_built_run_bundles_redacted_reproducibly_and_verifies() {
    let ws = built_run();
    let d = ws.path();
    let first = aorta(d, &["bundle", "out/T-7", "--output", "a.tar.gz"]);
    assert!(first.status.success(), "{first:?}");
    let said = String::from_utf8_lossy(&first.stdout);
    assert!(said.starts_with("Wrote a.tar.gz ("), "{said}");
    assert!(
        said.contains("env_key 2") && said.contains("hf_token 2") && said.contains("home_user 2"),
        "{said}"
    );
    std::fs::create_dir(d.join("outdir")).unwrap();
    let second = aorta(d, &["bundle", "out/T-7", "--output", "outdir"]);
    assert!(second.status.success(), "{second:?}");
    let b = d.join("outdir/T-7.bundle.tar.gz");
    assert_eq!(
        std::fs::read(d.join("a.tar.gz")).unwrap(),
        std::fs::read(&b).unwrap()
    );

    let all = members(&b);
    assert!(all
        .iter()
        .any(|(n, _)| n == "T-7/none-none/trial_1/stdout.log"));
    assert_eq!(all.last().unwrap().0, "T-7/manifest.json");
    for (name, text) in &all {
        for secret in [SECRET, "lic-99812", "alice-q"] {
            assert!(!text.contains(secret), "{secret} in {name}");
        }
    }
    let manifest: serde_json::Value = serde_json::from_str(&all.last().unwrap().1).unwrap();
    assert_eq!(manifest["schema_version"], "aorta.bundle/1");
    assert_eq!(manifest["redaction"]["recipe_block"], true);

    let ok = aorta(d, &["bundle", "--verify", "a.tar.gz"]);
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    let bad = aorta(d, &["bundle", "--verify", "r.yaml"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}

#[test]
fn review_without_a_terminal_is_no_and_writes_nothing() {
    let ws = built_run();
    let d = ws.path();
    let out = aorta(d, &["bundle", "out/T-7", "--review", "--ticket", "T 7/x"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        listing.starts_with("Bundle T 7/x of run directory T-7: "),
        "{listing}"
    );
    assert!(
        listing.contains("none-none/trial_0/stdout.log  (env_key 1, hf_token 1, home_user 1)"),
        "{listing}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing written"));
    let left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("bundle"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
