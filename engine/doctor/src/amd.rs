//! AMD's side: sysfs (always there with amdgpu: RAS error counts per IP block, the PCIe link)
//! and, where installed, `amd-smi static --json` / `amd-smi metric --json` for the product name,
//! the ECC totals and XGMI errors. Both shapes are read tolerantly: ROCm 6.1 prints plain
//! numbers, 6.2 and later `{"value": n, "unit": u}`, newer releases wrap the list in
//! `{"gpu_data": [...]}`.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One AMD GPU as the checks see it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct AmdGpu {
    pub index: usize,
    pub bdf: String,
    pub name: Option<String>,
    /// `(block, uncorrectable, correctable)` from `ras/<block>_err_count`.
    pub ras: Vec<(String, u64, u64)>,
    pub ecc_uncorrectable: Option<u64>,
    pub ecc_correctable: Option<u64>,
    pub ecc_deferred: Option<u64>,
    pub gen_current: Option<u32>,
    pub gen_max: Option<u32>,
    pub width_current: Option<u32>,
    pub width_max: Option<u32>,
    pub xgmi_errors: Option<u64>,
}

impl AmdGpu {
    pub fn label(&self) -> String {
        format!("{} {}", self.index, self.bdf)
    }
}

/// `"32.0 GT/s PCIe"` → 5.
pub fn gen_of_speed(s: &str) -> Option<u32> {
    let gts: f64 = s.split_whitespace().next()?.parse().ok()?;
    [
        (2.5, 1),
        (5.0, 2),
        (8.0, 3),
        (16.0, 4),
        (32.0, 5),
        (64.0, 6),
    ]
    .iter()
    .find(|(v, _)| (gts - v).abs() < 0.1)
    .map(|(_, g)| *g)
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned())
}

/// `ue: 0\nce: 3` (amdgpu's `*_err_count`).
fn parse_err_count(text: &str) -> (u64, u64) {
    let mut ue = 0;
    let mut ce = 0;
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim().parse().unwrap_or(0);
            match k.trim() {
                "ue" => ue = v,
                "ce" => ce = v,
                _ => {}
            }
        }
    }
    (ue, ce)
}

/// Every amdgpu card under `<root>/sys/class/drm` (`root` is `/` on a real node, a fixture
/// tree in tests): vendor 0x1002, display or processing-accelerator class.
pub fn from_sysfs(root: &Path) -> Vec<AmdGpu> {
    let drm = root.join("sys/class/drm");
    let Ok(entries) = std::fs::read_dir(&drm) else {
        return Vec::new();
    };
    let mut cards: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("card") && n[4..].chars().all(|c| c.is_ascii_digit())
            })
        })
        .filter(|p| read(&p.join("device/vendor")).as_deref() == Some("0x1002"))
        .collect();
    cards.sort_by_key(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n[4..].parse::<u32>().ok())
            .unwrap_or(u32::MAX)
    });
    cards
        .iter()
        .enumerate()
        .map(|(index, card)| {
            let dev = card.join("device");
            let bdf = std::fs::read_link(&dev)
                .ok()
                .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
                .or_else(|| {
                    read(&dev.join("uevent")).and_then(|u| {
                        u.lines()
                            .find_map(|l| l.strip_prefix("PCI_SLOT_NAME=").map(str::to_owned))
                    })
                })
                .unwrap_or_default();
            let mut ras = Vec::new();
            if let Ok(files) = std::fs::read_dir(dev.join("ras")) {
                let mut files: Vec<_> = files.flatten().map(|f| f.path()).collect();
                files.sort();
                for f in files {
                    let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    if let Some(block) = name.strip_suffix("_err_count") {
                        if let Some(t) = read(&f) {
                            let (ue, ce) = parse_err_count(&t);
                            ras.push((block.to_owned(), ue, ce));
                        }
                    }
                }
            }
            let (ue, ce) = ras.iter().fold((None, None), |(u, c), (_, ue, ce)| {
                (Some(u.unwrap_or(0) + ue), Some(c.unwrap_or(0) + ce))
            });
            AmdGpu {
                index,
                bdf,
                ras,
                ecc_uncorrectable: ue,
                ecc_correctable: ce,
                gen_current: read(&dev.join("current_link_speed")).and_then(|s| gen_of_speed(&s)),
                gen_max: read(&dev.join("max_link_speed")).and_then(|s| gen_of_speed(&s)),
                width_current: read(&dev.join("current_link_width")).and_then(|s| s.parse().ok()),
                width_max: read(&dev.join("max_link_width")).and_then(|s| s.parse().ok()),
                ..Default::default()
            }
        })
        .collect()
}

/// A number, or `{"value": n}`, or a numeric string; "N/A" is absent.
fn num(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.split_whitespace().next()?.parse().ok(),
        Value::Object(o) => num(o.get("value")),
        _ => None,
    }
}

fn list(doc: &Value) -> Vec<Value> {
    match doc {
        Value::Array(a) => a.clone(),
        Value::Object(o) => o
            .get("gpu_data")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Fills in what `amd-smi static --json` and `amd-smi metric --json` say, matching GPUs by
/// BDF (adding those sysfs did not list).
pub fn merge_amd_smi(
    gpus: &mut Vec<AmdGpu>,
    static_json: Option<&Value>,
    metric_json: Option<&Value>,
) {
    let bdf_norm = |s: &str| s.to_ascii_lowercase();
    let find = |gpus: &mut Vec<AmdGpu>, bdf: &str, idx: usize| -> usize {
        match gpus.iter().position(|g| bdf_norm(&g.bdf) == bdf_norm(bdf)) {
            Some(i) => i,
            None => {
                gpus.push(AmdGpu {
                    index: idx,
                    bdf: bdf.to_owned(),
                    ..Default::default()
                });
                gpus.len() - 1
            }
        }
    };
    for (i, g) in static_json.map(list).unwrap_or_default().iter().enumerate() {
        let bdf = g.pointer("/bus/bdf").and_then(Value::as_str).unwrap_or("");
        let idx = g
            .get("gpu")
            .and_then(Value::as_u64)
            .map_or(i, |v| v as usize);
        let at = find(gpus, bdf, idx);
        let gpu = &mut gpus[at];
        gpu.name = g
            .pointer("/asic/market_name")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(gpu.name.take());
        if gpu.width_max.is_none() {
            gpu.width_max = num(g.pointer("/bus/max_pcie_width")).map(|v| v as u32);
        }
        if gpu.gen_max.is_none() {
            gpu.gen_max = g.pointer("/bus/max_pcie_speed").and_then(|v| match v {
                Value::String(s) => gen_of_speed(s),
                other => num(Some(other)).and_then(|f| gen_of_speed(&f.to_string())),
            });
        }
    }
    for (i, g) in metric_json.map(list).unwrap_or_default().iter().enumerate() {
        let bdf = g
            .pointer("/bus/bdf")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let idx = g
            .get("gpu")
            .and_then(Value::as_u64)
            .map_or(i, |v| v as usize);
        let at = match bdf {
            Some(b) => find(gpus, &b, idx),
            None => match gpus.iter().position(|x| x.index == idx) {
                Some(p) => p,
                None => continue,
            },
        };
        let gpu = &mut gpus[at];
        let u = |p: &str| num(g.pointer(p)).map(|v| v as u64);
        gpu.ecc_uncorrectable = u("/ecc/total_uncorrectable_count").or(gpu.ecc_uncorrectable);
        gpu.ecc_correctable = u("/ecc/total_correctable_count").or(gpu.ecc_correctable);
        gpu.ecc_deferred = u("/ecc/total_deferred_count").or(gpu.ecc_deferred);
        if let Some(w) = u("/pcie/width") {
            gpu.width_current = Some(w as u32);
        }
        if let Some(s) = num(g.pointer("/pcie/speed")) {
            gpu.gen_current = gen_of_speed(&format!("{s}")).or(gpu.gen_current);
        }
        gpu.xgmi_errors = u("/xgmi_err").or(gpu.xgmi_errors);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(name: &str) -> PathBuf {
        PathBuf::from(format!(
            "{}/../../tests/fixtures/gpu/doctor/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
    }

    fn json(name: &str) -> Value {
        serde_json::from_str(&std::fs::read_to_string(root(name)).unwrap()).unwrap()
    }

    #[test]
    fn sysfs_healthy_and_sick() {
        let g = from_sysfs(&root("amd-sysfs-healthy"));
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].bdf, "0000:0c:00.0");
        assert_eq!((g[0].gen_current, g[0].gen_max), (Some(5), Some(5)));
        assert_eq!((g[0].width_current, g[0].width_max), (Some(16), Some(16)));
        assert_eq!(
            (g[0].ecc_uncorrectable, g[0].ecc_correctable),
            (Some(0), Some(0))
        );
        let s = from_sysfs(&root("amd-sysfs-sick"));
        assert_eq!((s[0].gen_current, s[0].width_current), (Some(3), Some(8)));
        assert_eq!(s[0].ecc_uncorrectable, Some(3));
        assert!(
            s[0].ras.contains(&("umc".to_owned(), 3, 12)),
            "{:?}",
            s[0].ras
        );
        assert!(from_sysfs(Path::new("/nonexistent")).is_empty());
    }

    #[test]
    fn amd_smi_both_shapes() {
        let mut g = Vec::new();
        merge_amd_smi(
            &mut g,
            Some(&json("amd-smi-static.json")),
            Some(&json("amd-smi-metric.json")),
        );
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].name.as_deref(), Some("AMD Instinct MI300X"));
        assert_eq!((g[0].gen_max, g[0].width_max), (Some(5), Some(16)));
        assert_eq!((g[0].gen_current, g[0].width_current), (Some(5), Some(16)));
        assert_eq!(g[0].ecc_uncorrectable, Some(0));
        assert_eq!(g[0].ecc_deferred, Some(0));
        assert_eq!(g[0].xgmi_errors, Some(0));
        let mut g = Vec::new();
        merge_amd_smi(&mut g, None, Some(&json("amd-smi-metric-sick.json")));
        assert_eq!(g[0].ecc_uncorrectable, Some(4));
        assert_eq!(g[0].xgmi_errors, Some(2));
        assert_eq!(gen_of_speed("16.0 GT/s PCIe"), Some(4));
        assert_eq!(gen_of_speed("Unknown"), None);
    }
}
