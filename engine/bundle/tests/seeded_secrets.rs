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

/// Issue 36: the kinds that leaked (an AWS secret under `"SecretAccessKey"`, PEM and OpenSSH
/// private key blocks with the continuation lines of a multi-line `SSH_PRIVATE_KEY`, lower-case
/// keys, secrets inside a recipe regex and `collect_paths` in recipe.resolved.yaml and
/// report.html, a tracked env var's value in env.json), then one example of each of gitleaks'
/// common rules ported (config/gitleaks.toml: gcp-api-key, a GCP service-account key file,
/// azure-ad-client-secret, an Azure storage key, slack-bot-token, slack-webhook-url,
/// stripe-access-token, gitlab-pat, npm-access-token, pypi-upload-token, jwt). All values are
/// fakes of the published shapes.
const ISSUE_36: &[&str] = &[
    "MNu9Yda5/FS1k7yXwxeTIZWPUpCL6RiHgh0DsJGz",
    "MIIEowIBAAKCAQEAuPEMBODYLINEONEqwertyuiop",
    "PEMBODYLINETWOasdfghjkl0123456789",
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUSSHCONTINUATION1",
    "SSHCONTINUATIONLINE2xyz987",
    "JSONESCAPEDBODY123abc",
    "hunter2-lower",
    "pg-s3cret-77",
    "mys3cr3t-value",
    "lowertokenvalue42",
    "rx-pass-1234",
    "cp-secret-5566",
    "pt-S1IJ0BqvmnqJu7UT0",
    "AIzatqjoV8fAlObMNu9Yda5_FS1k7yXwxeTIZWP",
    "MIIEvQIBADANBgkqhkiG9w0GCPBODY",
    "0123456789abcdef0123456789abcdef01234567",
    "cXC8Q~1URwFAHSl8RUbMt0F6Z6X.VCnW1i-kfulA",
    "AlObMNu9Yda5+FS1k7yXwxeTIZWPUpCL6RiHgh0DsJGzE/mvQB4r23KnctqjoV8fAlObMNu9Yda5+FS1k7yXwx==",
    "xoxb-1234567890123-1234567890123-5ofeDsdSNmrorwHuzkxc1Uz2",
    "10FELW7uX4ZMRQbCPy9Ol0Lg",
    "sk_live_0NSROFAh2ViZAvWFuFqDw3oR",
    "glpat-XC54Ro367Ozaj8FI7MJs",
    "npm_674pmj8tizcpib8hercpyr8d6zslav85absp",
    "pypi-AgEIcHlwaS5vcmcTevwXSXGhw9yLsbQn2j43cbIlWDGV2lWRgJaZ0jYdwLwHKbut2LUPoVk3mHk",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
];

/// What is not secret and must stay as it was.
const ORDINARY: &[&str] = &[
    "NCCL_DEBUG=INFO",
    "\"NCCL_DEBUG\": \"INFO\"",
    "\"key\": \"386a4c1d1f749d342f2220da28e359e30e4885f2aac147f086fbde90c2704abe\"",
    "/opt/rocm/lib/libamdhip64.so",
    "max_new_tokens=128",
    "tokens/s=41230",
    "tokenizer: gpt2",
    "token_count: 512",
    "password_required: true",
];

fn issue_36_run(root: &Path) {
    let s = |i: usize| ISSUE_36[i];
    write(
        root,
        "matrix.json",
        "{\"ticket\": \"T-36\", \"key\": \"386a4c1d1f749d342f2220da28e359e30e4885f2aac147f086fbde90c2704abe\"}\n",
    );
    write(
        root,
        "recipe.resolved.yaml",
        &format!(
            "schema_version: 1\nmode: probe\ncollect_paths: [\"logs/*.txt\", \"/data/secret={}/x.log\"]\ncustom_patterns:\n  - id: leak\n    match: {{regex: 'password={}'}}\n",
            s(11),
            s(10)
        ),
    );
    write(
        root,
        "report.html",
        &format!(
            "<pre>collect_paths: [&quot;/data/secret={}/x.log&quot;]\nregex: &#39;password={}&#39;\n&quot;SecretAccessKey&quot;: &quot;{}&quot;</pre>\n",
            s(11),
            s(10),
            s(0)
        ),
    );
    write(
        root,
        "environments/local/env.json",
        &format!(
            "{{\n  \"env_vars\": {{\n    \"NCCL_DEBUG\": \"INFO\",\n    \"PYTORCH_HUB_AUTH\": \"{}\",\n    \"SSH_PRIVATE_KEY\": \"-----BEGIN OPENSSH PRIVATE KEY-----\\n{}\\n-----END OPENSSH PRIVATE KEY-----\\n\"\n  }}\n}}\n",
            s(12),
            s(5)
        ),
    );
    write(
        root,
        "host_env.txt",
        &format!(
            "NCCL_DEBUG=INFO\nSSH_PRIVATE_KEY=-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n{}\n-----END OPENSSH PRIVATE KEY-----\nHOME_DIR=/opt/rocm/lib/libamdhip64.so\n",
            s(3),
            s(4)
        ),
    );
    write(
        root,
        "none-none/trial_0/stdout.log",
        &format!(
            "step 1 max_new_tokens=128 tokens/s=41230\ntokenizer: gpt2\ntoken_count: 512\npassword_required: true\naws: {{\"SecretAccessKey\": \"{}\", \"AccessKeyId\": \"x\"}}\n-----BEGIN RSA PRIVATE KEY-----\n{}\n{}\n-----END RSA PRIVATE KEY-----\npassword: {}\nexport db_password={}\nmy_secret={} hf_token_lower={}\n",
            s(0), s(1), s(2), s(6), s(7), s(8), s(9)
        ),
    );
    write(
        root,
        "none-none/trial_0/stderr.log",
        &format!(
            "GOOGLE_API_KEY: {}\nclient_secret={}\nDefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core.windows.net\nslack {} https://hooks.slack.com/services/T0A1B2C3D/B0A1B2C3D/{}\nstripe {} gitlab {} npm {}\npypi {}\njwt {}\n",
            s(13), s(16), s(17), s(18), s(19), s(20), s(21), s(22), s(23), s(24)
        ),
    );
    write(
        root,
        "sa.json",
        &format!(
            "{{\"type\": \"service_account\", \"private_key_id\": \"{}\", \"private_key\": \"-----BEGIN PRIVATE KEY-----\\n{}\\n-----END PRIVATE KEY-----\\n\"}}\n",
            s(15),
            s(14)
        ),
    );
}

#[test]
fn issue_36_kinds_and_gitleaks_shapes_leak_nothing_and_ordinary_text_stays() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("T-36");
    issue_36_run(&run);
    // Seeded as written (the fixture is right)...
    let mut all = String::new();
    for e in walkdir::WalkDir::new(&run).into_iter().flatten() {
        if e.file_type().is_file() {
            all.push_str(&std::fs::read_to_string(e.path()).unwrap());
        }
    }
    for secret in ISSUE_36 {
        assert!(all.contains(secret), "not seeded: {secret}");
    }
    let staged = stage(&run, &BundleOptions::default(), tmp.path()).unwrap();
    let out = tmp.path().join("out.tar.gz");
    staged.write(&out).unwrap();
    let members = unpack(&out);
    let mut bundled = String::new();
    for (name, bytes) in &members {
        let text = String::from_utf8_lossy(bytes);
        for secret in ISSUE_36 {
            assert!(!name.contains(secret), "{secret} leaked in the name {name}");
            assert!(!text.contains(secret), "{secret} leaked in {name}:\n{text}");
        }
        bundled.push_str(&text);
    }
    // ...and what is not secret stays.
    for keep in ORDINARY {
        assert!(bundled.contains(keep), "{keep} was redacted:\n{bundled}");
    }
    for (n, b) in &members {
        if n.ends_with(".json") {
            serde_json::from_slice::<serde_json::Value>(b).unwrap_or_else(|e| panic!("{n}: {e}"));
        }
    }
    let counts = &staged.manifest.redaction.counts;
    for rule in [
        "aws_secret_access_key",
        "private_key",
        "secret_env",
        "generic_secret",
        "gcp_api_key",
        "azure_secret",
        "slack_token",
        "slack_webhook",
        "stripe_key",
        "gitlab_token",
        "npm_token",
        "pypi_token",
        "jwt",
    ] {
        assert!(
            counts.get(rule).copied().unwrap_or(0) > 0,
            "{rule} never counted: {counts:?}"
        );
    }
}
