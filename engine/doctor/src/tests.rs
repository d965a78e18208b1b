//! Every fail path on the recorded fixtures (tests/fixtures/gpu/doctor/README.md), through
//! [`run`] with the sources pointed at them.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gpu")
}

/// A stand-in `nvidia-smi` printing `xml` for `-q -x` and nothing for `nvlink`.
fn fake_smi(dir: &Path, xml: &Path) -> String {
    let p = dir.join("nvidia-smi");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\ncase \"$1\" in nvlink) exit 0;; esac\ncat '{}'\n",
            xml.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

fn run_on(xml: &str, kmsg: &str) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        level: Level::Quick,
        gpus: None,
        sources: Sources {
            nvidia_smi: fake_smi(dir.path(), &fixtures().join(xml)),
            amd_smi: "/nonexistent/amd-smi".into(),
            sysfs_root: dir.path().join("no-sysfs"),
            kernel_log: Some(fixtures().join(kmsg)),
            window: Duration::from_millis(10),
        },
        env: EnvFacts::default(),
        workload: None,
        work_dir: None,
    };
    run(&opts)
}

fn check<'a>(r: &'a Report, id: &str) -> &'a Check {
    r.checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no {id} in {:#?}", r.checks))
}

const HEALTHY: &str = "h100-cuda13/nvidia-smi-q.xml";
const KMSG: &str = "h100-cuda13/kmsg.txt";

#[test]
fn the_healthy_h100_passes() {
    let r = run_on(HEALTHY, KMSG);
    assert_eq!(r.status, Status::Pass, "{}", r.render_text());
    assert_eq!(r.gpus.len(), 1);
    assert_eq!(r.gpus[0].name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(check(&r, "pcie.link").measured.as_deref(), Some("Gen5 x16"));
    assert_eq!(check(&r, "pages.retired").status, Status::NotApplicable);
    assert_eq!(check(&r, "nvlink.state").status, Status::NotApplicable);
    assert_eq!(check(&r, "kernel.xid").status, Status::Pass);
    assert_eq!(check(&r, "driver.firmware").status, Status::Pass);
}

#[test]
fn a_pending_remap_fails() {
    let r = run_on("doctor/nvidia-smi-q-remap-pending.xml", KMSG);
    let c = check(&r, "rows.remap_pending");
    assert_eq!(c.status, Status::Fail);
    assert!(c.remedy.as_deref().unwrap().contains("reset the GPU"));
    assert_eq!(r.status, Status::Fail);
}

#[test]
fn a_gen3_x8_link_fails_with_the_riser_remedy() {
    let r = run_on("doctor/nvidia-smi-q-gen3x8.xml", KMSG);
    let c = check(&r, "pcie.link");
    assert_eq!(c.status, Status::Fail);
    assert_eq!(
        c.remedy.as_deref(),
        Some("reseat the card / check the riser and the slot's BIOS link setting: link trained at Gen3 x8, expected Gen5 x16")
    );
}

#[test]
fn an_uncorrectable_ecc_error_fails() {
    let r = run_on("doctor/nvidia-smi-q-ecc-dbe.xml", KMSG);
    assert_eq!(check(&r, "ecc.volatile_uncorrectable").status, Status::Fail);
    assert_eq!(
        check(&r, "ecc.volatile_uncorrectable").measured.as_deref(),
        Some("SRAM 0 DRAM 2")
    );
    assert_eq!(
        check(&r, "ecc.aggregate_uncorrectable").status,
        Status::Warn
    );
    assert_eq!(
        check(&r, "ecc.volatile_correctable").status,
        Status::Pass,
        "17 < 100"
    );
}

#[test]
fn an_xid_79_in_the_kernel_log_fails() {
    let r = run_on(HEALTHY, "doctor/kmsg-xid79.txt");
    let c = check(&r, "kernel.xid");
    assert_eq!(c.status, Status::Fail);
    assert_eq!(c.measured.as_deref(), Some("Xid 79 ×1"));
    assert!(c.remedy.as_deref().unwrap().contains("fell off the bus"));
    assert_eq!(
        check(&r, "kernel.events").status,
        Status::Pass,
        "judged per GPU, not twice"
    );
}

/// HW thermal slowdown active and its counter 4.1 s up over a 10 s window: 41%.
#[test]
fn thermal_slowdown_fails_with_its_share_of_the_window() {
    let before = nvidia::parse(
        &std::fs::read_to_string(fixtures().join("doctor/nvidia-smi-q-thermal.xml")).unwrap(),
    )
    .unwrap();
    let after = nvidia::parse(
        &std::fs::read_to_string(fixtures().join("doctor/nvidia-smi-q-thermal-after-10s.xml"))
            .unwrap(),
    )
    .unwrap();
    let mut out = Vec::new();
    checks::nvidia_gpu(
        &before.gpus[0],
        Some(checks::Window {
            after: &after.gpus[0],
            seconds: 10.0,
        }),
        &mut out,
    );
    let c = out
        .iter()
        .find(|c| c.id == "clocks.hw_thermal_slowdown")
        .unwrap();
    assert_eq!(c.status, Status::Fail);
    assert_eq!(
        c.remedy.as_deref(),
        Some("check cooling (fans, airflow, inlet temperature, heatsink contact): HW thermal slowdown active 41% of the last 10 s")
    );
    // Without a window (one sample), the active flag alone fails it.
    let r = run_on("doctor/nvidia-smi-q-thermal.xml", KMSG);
    assert_eq!(check(&r, "clocks.hw_thermal_slowdown").status, Status::Fail);
    assert_eq!(check(&r, "clocks.hw_power_brake").status, Status::Pass);
}

#[test]
fn no_gpu_is_not_applicable_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        level: Level::Medium,
        gpus: None,
        sources: Sources {
            nvidia_smi: "/nonexistent/nvidia-smi".into(),
            amd_smi: "/nonexistent/amd-smi".into(),
            sysfs_root: dir.path().to_path_buf(),
            kernel_log: None,
            window: Duration::from_millis(1),
        },
        env: EnvFacts::default(),
        workload: None,
        work_dir: None,
    };
    let r = run(&opts);
    assert_eq!(r.status, Status::NotApplicable);
    assert!(r.checks.iter().all(|c| c.status == Status::NotApplicable));
    assert!(check(&r, "gpu.present")
        .reason
        .as_deref()
        .unwrap()
        .starts_with("no NVIDIA or AMD GPU found"));
    assert_eq!(check(&r, "gemm.correctness").status, Status::NotApplicable);
}

#[test]
fn a_hung_or_broken_nvidia_smi_fails() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nvidia-smi");
    std::fs::write(&p, "#!/bin/sh\necho 'Unable to determine the device handle for GPU0000:00:06.0: Unknown Error' >&2\nexit 255\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    let opts = Options {
        level: Level::Quick,
        gpus: None,
        sources: Sources {
            nvidia_smi: p.display().to_string(),
            amd_smi: "/nonexistent/amd-smi".into(),
            sysfs_root: dir.path().to_path_buf(),
            kernel_log: None,
            window: Duration::from_millis(1),
        },
        env: EnvFacts::default(),
        workload: None,
        work_dir: None,
    };
    let r = run(&opts);
    assert_eq!(r.status, Status::Fail);
    assert!(check(&r, "driver.nvidia_smi")
        .measured
        .as_deref()
        .unwrap()
        .contains("Unknown Error"));
}

#[test]
fn amd_sick_sysfs_and_amd_smi() {
    let dir = tempfile::tempdir().unwrap();
    let metric = fixtures().join("doctor/amd-smi-metric-sick.json");
    let amd = dir.path().join("amd-smi");
    std::fs::write(
        &amd,
        format!(
            "#!/bin/sh\ncase \"$1\" in metric) cat '{}';; *) exit 1;; esac\n",
            metric.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&amd, std::fs::Permissions::from_mode(0o755)).unwrap();
    let opts = Options {
        level: Level::Quick,
        gpus: None,
        sources: Sources {
            nvidia_smi: "/nonexistent/nvidia-smi".into(),
            amd_smi: amd.display().to_string(),
            sysfs_root: fixtures().join("doctor/amd-sysfs-sick"),
            kernel_log: Some(fixtures().join(KMSG)),
            window: Duration::from_millis(1),
        },
        env: EnvFacts::default(),
        workload: None,
        work_dir: None,
    };
    let r = run(&opts);
    assert_eq!(r.gpus[0].vendor, "amd");
    assert_eq!(check(&r, "ecc.uncorrectable").status, Status::Fail);
    assert_eq!(check(&r, "xgmi.errors").status, Status::Fail);
    assert_eq!(check(&r, "pcie.link").status, Status::Fail);
    assert_eq!(check(&r, "ecc.deferred").status, Status::Warn);
    let healthy = Options {
        sources: Sources {
            amd_smi: "/nonexistent/amd-smi".into(),
            sysfs_root: fixtures().join("doctor/amd-sysfs-healthy"),
            ..opts.sources.clone()
        },
        ..opts
    };
    let r = run(&healthy);
    assert_eq!(r.status, Status::Pass, "{}", r.render_text());
}

#[test]
fn driver_cuda_against_the_toolkit() {
    let smi = nvidia::parse(&std::fs::read_to_string(fixtures().join(HEALTHY)).unwrap()).unwrap();
    let mut out = Vec::new();
    let env = EnvFacts {
        toolkit_cuda: Some("13.0.2".into()),
        torch_cuda: Some("12.8".into()),
    };
    checks::versions(&smi, &env, &mut out);
    assert_eq!(out.last().unwrap().status, Status::Pass);
    let mut out = Vec::new();
    checks::versions(
        &smi,
        &EnvFacts {
            toolkit_cuda: None,
            torch_cuda: Some("14.0".into()),
        },
        &mut out,
    );
    assert_eq!(out.last().unwrap().status, Status::Fail);
    let mut out = Vec::new();
    checks::versions(
        &smi,
        &EnvFacts {
            toolkit_cuda: Some("13.1".into()),
            torch_cuda: None,
        },
        &mut out,
    );
    assert_eq!(out.last().unwrap().status, Status::Warn);
}

#[test]
fn nvidia_smi_without_a_device_is_not_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nvidia-smi");
    std::fs::write(&p, "#!/bin/sh\necho 'No devices were found'\nexit 6\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    let opts = Options {
        level: Level::Quick,
        gpus: None,
        sources: Sources {
            nvidia_smi: p.display().to_string(),
            amd_smi: "/nonexistent/amd-smi".into(),
            sysfs_root: dir.path().to_path_buf(),
            kernel_log: None,
            window: Duration::from_millis(1),
        },
        env: EnvFacts::default(),
        workload: None,
        work_dir: None,
    };
    let r = run(&opts);
    assert_eq!(r.status, Status::NotApplicable, "{}", r.render_text());
}
