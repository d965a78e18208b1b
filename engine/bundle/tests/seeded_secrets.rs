//! A run directory with secrets planted in logs, env snapshots, sidecars, results and file
//! names: the bundle holds none of them, is byte-identical when built twice, and verifies.

use aorta_bundle::{hosts_in_run, stage, verify, BundleOptions, RedactOptions};
use aorta_recipe::Redaction;
use std::io::Read;
use std::path::Path;

/// Each planted secret, and the rule that must catch it.
const SECRETS: &[(&str, &str)] = &[
    ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "hf_token"),
    ("sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe", "api_key"),
    ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "github_token"),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "github_token",
    ),
    ("AKIAIOSFODNN7EXAMPLE", "aws_access_key_id"),
    (
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key",
    ),
    (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJl",
        "bearer_token",
    ),
    ("Tr0ub4dor-3", "url_password"),
    ("wandb-4f2a9c81e7", "secret_env"),
    ("hunter2-db-pass", "secret_env"),
    ("alice-in-chains", "home_user"),
    ("corp-license-7731", "env_key"),
    ("gpu-node-17", "hostname"),
    ("10.23.4.5", "private_ip"),
];

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn seeded_run(root: &Path) {
    let s = |i: usize| SECRETS[i].0;
    write(
        root,
        "matrix.json",
        &format!(
            "{{\"ticket\": \"T-1\", \"cwd\": \"/home/{}/proj\"}}\n",
            s(10)
        ),
    );
    write(
        root,
        "matrix.md",
        "| cell | fails |\n|---|---|\n| none-none | 3/3 |\n",
    );
    write(
        root,
        "recipe.resolved.yaml",
        &format!(
            "schema_version: 1\nmode: probe\n# launched by /home/{}/run.sh\n",
            s(10)
        ),
    );
    write(
        root,
        "environments/local/env.json",
        &format!(
            "{{\n  \"host\": {{\"hostname\": \"{}.corp.example\"}},\n  \"env_vars\": {{\n    \"HF_TOKEN\": \"{}\",\n    \"AWS_ACCESS_KEY_ID\": \"{}\",\n    \"AWS_SECRET_ACCESS_KEY\": \"{}\",\n    \"WANDB_API_KEY\": \"{}\",\n    \"CORP_LICENSE\": \"{}\",\n    \"USER\": \"{}\",\n    \"NCCL_DEBUG\": \"INFO\"\n  }}\n}}\n",
            s(12), s(0), s(4), s(5), s(8), s(11), s(10)
        ),
    );
    write(
        root,
        "host_env.json",
        &format!(
            "{{\"env\": {{\"DB_PASSWORD\": \"{}\", \"OPENAI_API_KEY\": \"{}\"}}}}\n",
            s(9),
            s(1)
        ),
    );
    write(
        root,
        "none-none/trial_0/stdout.log",
        &format!(
            "step 1 loss=2.5 tokens/s=41230\nconnecting to {}.corp.example:29500 ({})\ncurl -H 'Authorization: Bearer {}' https://api.example.com\npip install --index-url https://bob:{}@pypi.corp.example/simple torch\nFile \"/home/{}/train.py\", line 9\ngit clone https://{}@github.com/org/repo\nGITHUB_TOKEN={}\n",
            s(12), s(13), s(6), s(7), s(10), s(2), s(3)
        ),
    );
    write(
        root,
        "none-none/trial_0/stderr.log",
        "RuntimeError: CUDA error: out of memory\n",
    );
    write(
        root,
        "none-none/trial_0/result.json",
        &format!(
            "{{\"verdict\": \"fail\", \"env\": {{\"HF_TOKEN\": \"{}\"}}}}\n",
            s(0)
        ),
    );
    write(
        root,
        "sidecar.json",
        &format!(
            "{{\"mitigations\": {{\"m\": {{\"env\": {{\"S3_SECRET\": \"{}\"}}}}}}}}\n",
            s(9)
        ),
    );
    write(
        root,
        &format!("none-none/trial_0/collected/{}.txt", s(0)),
        "a collected file\n",
    );
    std::fs::write(
        root.join("none-none/trial_0/core.bin"),
        b"\x7fELF\0\0binary",
    )
    .unwrap();
    write(root, ".aorta-materialized.json", "{}\n");
}

fn options(root: &Path) -> BundleOptions {
    BundleOptions {
        ticket: None,
        redact: RedactOptions {
            recipe: Some(Redaction {
                scrub_env_keys: vec!["CORP_*".into()],
                scrub_paths: false,
                scrub_ip_addresses: false,
            }),
            hosts: Some(hosts_in_run(root)),
        },
        aorta_version: "0.1.0".into(),
    }
}

/// Every member's name and bytes, decompressed.
fn unpack(path: &Path) -> Vec<(String, Vec<u8>)> {
    let f = std::fs::File::open(path).unwrap();
    let mut a = tar::Archive::new(flate2::read::GzDecoder::new(f));
    a.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut bytes = Vec::new();
            e.read_to_end(&mut bytes).unwrap();
            (name, bytes)
        })
        .collect()
}

#[test]
fn no_planted_secret_survives_and_every_rule_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("T-1");
    seeded_run(&run);
    let staged = stage(&run, &options(&run), tmp.path()).unwrap();
    let out = tmp.path().join("out.tar.gz");
    staged.write(&out).unwrap();
    let members = unpack(&out);
    assert!(members.len() >= 11, "{}", members.len());
    for (name, bytes) in &members {
        let text = String::from_utf8_lossy(bytes);
        for (secret, rule) in SECRETS {
            assert!(
                !name.contains(secret),
                "{secret} ({rule}) leaked in the name {name}"
            );
            assert!(
                !text.contains(secret),
                "{secret} ({rule}) leaked in {name}:\n{text}"
            );
        }
    }
    let counts = &staged.manifest.redaction.counts;
    for (_, rule) in SECRETS {
        assert!(
            counts.get(*rule).copied().unwrap_or(0) > 0,
            "{rule} never counted: {counts:?}"
        );
    }
    // What is not secret stays: NCCL_DEBUG, the loss line, the binary member byte for byte.
    let get = |suffix: &str| &members.iter().find(|(n, _)| n.ends_with(suffix)).unwrap().1;
    assert!(String::from_utf8_lossy(get("env.json")).contains("\"NCCL_DEBUG\": \"INFO\""));
    assert!(
        String::from_utf8_lossy(get("stdout.log")).starts_with("step 1 loss=2.5 tokens/s=41230\n")
    );
    assert_eq!(get("core.bin"), b"\x7fELF\0\0binary");
    // Redacted JSON is still JSON.
    for (n, b) in &members {
        if n.ends_with(".json") {
            serde_json::from_slice::<serde_json::Value>(b).unwrap_or_else(|e| panic!("{n}: {e}"));
        }
    }
    assert!(!members
        .iter()
        .any(|(n, _)| n.contains(".aorta-materialized")));
    assert!(members.last().unwrap().0.ends_with("/manifest.json"));
    let report = verify(&out).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.checked, members.len() - 1);
}

#[test]
fn built_twice_the_bundle_is_byte_identical_and_tampering_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("T-1");
    seeded_run(&run);
    let (a, b) = (tmp.path().join("a.tar.gz"), tmp.path().join("b.tar.gz"));
    stage(&run, &options(&run), tmp.path())
        .unwrap()
        .write(&a)
        .unwrap();
    // Touch every file: new mtimes must not change a byte.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    for e in walkdir::WalkDir::new(&run).into_iter().flatten() {
        if e.file_type().is_file() {
            let bytes = std::fs::read(e.path()).unwrap();
            std::fs::write(e.path(), bytes).unwrap();
        }
    }
    stage(&run, &options(&run), tmp.path())
        .unwrap()
        .write(&b)
        .unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());

    // Rewrite one member's bytes inside the archive: verify names it.
    let members = unpack(&a);
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        std::fs::File::create(&b).unwrap(),
        flate2::Compression::fast(),
    ));
    for (name, mut bytes) in members {
        if name.ends_with("stderr.log") {
            bytes = b"nothing to see\n".to_vec();
        }
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        builder.append_data(&mut h, &name, &bytes[..]).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap();
    let report = verify(&b).unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(report.problems[0].starts_with("none-none/trial_0/stderr.log: blake3"));
}

#[test]
fn wrong_inputs_are_input_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let e = stage(
        &tmp.path().join("nope"),
        &BundleOptions::default(),
        tmp.path(),
    )
    .unwrap_err();
    assert!(e.is_input(), "{e}");
    let e = stage(tmp.path(), &BundleOptions::default(), tmp.path()).unwrap_err();
    assert!(e.to_string().contains("has no matrix.json"), "{e}");
    let run = tmp.path().join("r");
    seeded_run(&run);
    std::os::unix::fs::symlink("/etc/hostname", run.join("escape.txt")).unwrap();
    let e = stage(&run, &BundleOptions::default(), tmp.path()).unwrap_err();
    assert!(e.to_string().contains("leaves the run directory"), "{e}");
}
