//! AORTA 0.3.0's env.json and aorta's, both taken on the H100 machine within a minute
//! (2026-12-07, `.carry/device-run2.sh`; tests/fixtures/aorta-h100/README.md): the import reads
//! a real CUDA machine's snapshot, and what both tools see agrees.

use aorta_probe::{diff, KeyRules, Snapshot};
use std::path::Path;

fn read(name: &str) -> Snapshot {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/aorta-h100")
        .join(name);
    Snapshot::from_json_or_aorta(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn aortas_h100_snapshot_imports_and_agrees_with_aortas_own() {
    let theirs = read("aorta-0.3.0-h100.json");
    let ours = read("aorta-h100.json");
    let i = theirs.probe.imported.as_ref().expect("imported");
    assert_eq!(
        (i.from.as_str(), i.schema_version.as_str()),
        ("AORTA 0.3.0", "1.17")
    );
    assert!(ours.probe.imported.is_none());
    // What both probed, the same machine seen the same way.
    assert_eq!(theirs.host.kernel_release, ours.host.kernel_release);
    assert_eq!(theirs.host.glibc_version, ours.host.glibc_version);
    assert_eq!(theirs.host.runtime.container, ours.host.runtime.container);
    assert_eq!(theirs.python.version, ours.python.version);
    let d = diff(&theirs, &ours, &KeyRules::default());
    let text = d.render("aorta-0.3.0-h100.json", "aorta-h100.json");
    assert!(
        text.contains("imported from AORTA 0.3.0's env.json (schema 1.17)"),
        "{text}"
    );
    // AORTA 0.3.0 reads no NVIDIA GPU: aorta's GPU fields are only in B, never "changed".
    assert!(text.contains("+ gpu.vendor"), "{text}");
    assert!(!text.contains("~ gpu."), "{text}");
    assert!(!text.contains("~ host.kernel_release"), "{text}");
    // AORTA keeps no list of distributions: aorta's is only in B, not a change from `{}`.
    assert!(text.contains("+ python.distributions"), "{text}");
    assert!(!text.contains("~ python.distributions"), "{text}");
}
