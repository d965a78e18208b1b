//! GPU metrics around a probe-flow trial: VRAM in use and a throttle counter before spawn and
//! after exit (Tier 3's `vram_growth` and `thermal_throttle`, the record's `peak_vram_mib`), and
//! utilisation for the hang monitor's "GPU idle" vote.
//!
//! NVIDIA through NVML, loaded at run time (`nvml-wrapper` dlopens `libnvidia-ml.so.1`, so the
//! `aorta` binary links nothing of CUDA and starts anywhere); AMD through `amd-smi monitor`, as
//! AORTA 0.2.1 does (spec §5, Tier 3). With neither, every value is `None` and those detectors
//! stay silent. `AORTA_PROBE_AMDSMI_FAKE="vram=<MiB>,throttle=<n>[,util=<%>]"` replaces
//! amd-smi, as AORTA's test shim does; `AORTA_PROBE_AMDSMI_FAKE=@FILE` reads that text from FILE
//! at every reading, so a test's trial can change what the post-exit snapshot sees.

use aorta_classify::GpuSnapshot;
use nvml_wrapper::enum_wrappers::device::PerformancePolicy;
use nvml_wrapper::Nvml;
use std::process::{Command, Stdio};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

const FAKE_VAR: &str = "AORTA_PROBE_AMDSMI_FAKE";

enum Source {
    /// NVML and its device handles, looked up once (each lookup is a driver call).
    Nvml(Vec<nvml_wrapper::Device<'static>>),
    AmdSmi,
    Fake(String),
    Absent,
}

fn source() -> &'static Source {
    static SOURCE: OnceLock<Source> = OnceLock::new();
    SOURCE.get_or_init(|| {
        if let Ok(spec) = std::env::var(FAKE_VAR) {
            return Source::Fake(spec);
        }
        if let Ok(n) = Nvml::init() {
            // Lives as long as the process, like the static it replaces; the handles borrow it.
            let n: &'static Nvml = Box::leak(Box::new(n));
            let devices = (0..n.device_count().unwrap_or(0))
                .filter_map(|i| n.device_by_index(i).ok())
                .collect();
            return Source::Nvml(devices);
        }
        let on_path = std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("amd-smi").is_file()));
        if on_path {
            Source::AmdSmi
        } else {
            Source::Absent
        }
    })
}

/// Whether any GPU metrics source is present (NVML, amd-smi or the fake).
pub fn available() -> bool {
    !matches!(source(), Source::Absent)
}

/// The NVML devices a trial may touch: its leased ids when they are indices, else all.
fn nvml_devices<'a>(
    all: &'a [nvml_wrapper::Device<'static>],
    leased: &[String],
) -> Vec<&'a nvml_wrapper::Device<'static>> {
    if leased.is_empty() {
        return all.iter().collect();
    }
    leased
        .iter()
        .filter_map(|d| d.parse::<usize>().ok())
        .filter_map(|i| all.get(i))
        .collect()
}

/// VRAM used (MiB, summed) and, with `throttle`, a throttle counter over the devices the trial
/// may touch. The counter is read only when asked: NVML's thermal violation counter costs
/// about 0.37 ms a device on an H200 (VRAM 7 µs; `bench/overhead/nvml_calls.py`), so it is
/// skipped where `tier3:thermal_throttle` is disabled and by the peak sampler.
pub fn snapshot(leased: &[String], throttle: bool) -> Option<GpuSnapshot> {
    let reading = match source() {
        Source::Nvml(all) => {
            let devs = nvml_devices(all, leased);
            if devs.is_empty() {
                return None;
            }
            let vram: Option<u64> = devs
                .iter()
                .map(|d| d.memory_info().ok().map(|m| m.used))
                .sum();
            // Time spent held back by the thermal policy, in ms: a counter, so growth = throttled.
            let throttle: Option<u64> = if throttle {
                devs.iter()
                    .map(|d| {
                        d.violation_status(PerformancePolicy::Thermal)
                            .ok()
                            .map(|v| v.violation_time)
                    })
                    .sum()
            } else {
                None
            };
            Some(GpuSnapshot {
                vram_used_mib: vram.map(|b| (b >> 20) as i64),
                throttle: throttle.map(|ns| (ns / 1_000_000) as i64),
            })
        }
        Source::Fake(spec) => fake(spec).map(|(s, _)| GpuSnapshot {
            throttle: s.throttle.filter(|_| throttle),
            ..s
        }),
        Source::AmdSmi => amd_smi().map(|(s, _)| s),
        Source::Absent => None,
    };
    if let Some(r) = &reading {
        recent().record(leased, r);
    }
    reading
}

/// The reading before a trial starts: a snapshot of the same devices taken within the last
/// [`RECENT`] (the previous trial's after-exit reading, when trials follow each other) stands
/// for a new one. Device-level readings a few milliseconds apart with no trial of ours started
/// in between differ only by other processes' activity, which the readings include anyway; a
/// reading is a driver call (NVML: about a millisecond for two devices' counters) or a process
/// (amd-smi). The fake is always read anew, so tests see exactly what they write.
pub fn snapshot_before(leased: &[String], throttle: bool) -> Option<GpuSnapshot> {
    if !matches!(source(), Source::Fake(_)) {
        if let Some(r) = recent()
            .get(leased, Instant::now())
            .filter(|r| !throttle || r.throttle.is_some())
        {
            return Some(r);
        }
    }
    snapshot(leased, throttle)
}

/// How old a reading may be and still stand for a new one in [`snapshot_before`].
const RECENT: Duration = Duration::from_millis(50);

/// The last snapshot taken, of which devices and when.
#[derive(Default)]
struct Recent(Mutex<Option<(Vec<String>, Instant, GpuSnapshot)>>);

impl Recent {
    fn record(&self, leased: &[String], r: &GpuSnapshot) {
        let mut last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *last = Some((leased.to_vec(), Instant::now(), *r));
    }

    fn get(&self, leased: &[String], now: Instant) -> Option<GpuSnapshot> {
        let last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (devs, at, r) = last.as_ref()?;
        (devs.as_slice() == leased && now.saturating_duration_since(*at) <= RECENT).then_some(*r)
    }
}

fn recent() -> &'static Recent {
    static RECENT_READING: OnceLock<Recent> = OnceLock::new();
    RECENT_READING.get_or_init(Recent::default)
}

/// How often [`PeakSampler`] reads: NVML calls cost microseconds, amd-smi is a process.
fn sample_every() -> Duration {
    match source() {
        Source::AmdSmi => Duration::from_secs(1),
        _ => Duration::from_millis(100),
    }
}

/// The highest VRAM reading while a trial runs: the readings before spawn and after exit miss
/// everything a trial frees before it ends. One thread per process reads for every running
/// trial (a thread per trial cost each short trial a thread and a reading at its end); a reading
/// counts for the trials registered before it began.
pub struct PeakSampler {
    id: u64,
}

struct Watched {
    id: u64,
    devices: Vec<String>,
    peak: Option<i64>,
}

#[derive(Default)]
struct Watch {
    next_id: u64,
    trials: Vec<Watched>,
}

/// The trials being watched, and the sampling thread's wake-up for the first of them.
fn watch() -> &'static (Mutex<Watch>, Condvar) {
    static WATCH: OnceLock<(Mutex<Watch>, Condvar)> = OnceLock::new();
    WATCH.get_or_init(|| {
        // Without the thread peaks stay None; the before/after readings still count.
        let _ = std::thread::Builder::new()
            .name("aorta-vram".into())
            .spawn(sample_forever);
        (Mutex::new(Watch::default()), Condvar::new())
    })
}

fn sample_forever() {
    let every = sample_every();
    let (lock, wake) = watch();
    loop {
        {
            let w = lock.lock().unwrap_or_else(|p| p.into_inner());
            // Idle while no trial runs; a registration wakes it (its first reading comes a period
            // later, so a trial shorter than that costs no reading).
            drop(
                wake.wait_while(w, |w| w.trials.is_empty())
                    .unwrap_or_else(|p| p.into_inner()),
            );
        }
        std::thread::sleep(every);
        let watched: Vec<(u64, Vec<String>)> = {
            let w = lock.lock().unwrap_or_else(|p| p.into_inner());
            w.trials.iter().map(|t| (t.id, t.devices.clone())).collect()
        };
        let mut sets: Vec<&Vec<String>> = watched.iter().map(|(_, d)| d).collect();
        sets.sort();
        sets.dedup();
        let readings: Vec<(&Vec<String>, Option<i64>)> = sets
            .into_iter()
            .map(|d| (d, snapshot(d, false).and_then(|s| s.vram_used_mib)))
            .collect();
        let mut w = lock.lock().unwrap_or_else(|p| p.into_inner());
        for t in &mut w.trials {
            let counted = watched.iter().any(|(id, _)| *id == t.id);
            let v = readings
                .iter()
                .find(|(d, _)| **d == t.devices)
                .and_then(|r| r.1);
            if let (true, Some(v)) = (counted, v) {
                t.peak = Some(t.peak.map_or(v, |p| p.max(v)));
            }
        }
    }
}

impl PeakSampler {
    /// Starts watching `leased` (all devices when empty); `None` without a metrics source.
    pub fn start(leased: &[String]) -> Option<PeakSampler> {
        if !available() {
            return None;
        }
        let (lock, wake) = watch();
        let id = {
            let mut w = lock.lock().unwrap_or_else(|p| p.into_inner());
            let id = w.next_id;
            w.next_id += 1;
            w.trials.push(Watched {
                id,
                devices: leased.to_vec(),
                peak: None,
            });
            id
        };
        wake.notify_one();
        Some(PeakSampler { id })
    }

    /// Stops watching; the highest reading taken, if any.
    pub fn finish(self) -> Option<i64> {
        let (lock, _) = watch();
        let mut w = lock.lock().unwrap_or_else(|p| p.into_inner());
        let i = w.trials.iter().position(|t| t.id == self.id)?;
        w.trials.swap_remove(i).peak
    }
}

/// Utilisation of the busiest device the trial may touch, in percent.
pub fn utilisation(leased: &[String]) -> Option<u32> {
    match source() {
        Source::Nvml(all) => nvml_devices(all, leased)
            .iter()
            .filter_map(|d| d.utilization_rates().ok().map(|u| u.gpu))
            .max(),
        Source::Fake(spec) => fake(spec).and_then(|(_, u)| u),
        Source::AmdSmi => amd_smi().and_then(|(_, u)| u),
        Source::Absent => None,
    }
}

fn fake(spec: &str) -> Option<(GpuSnapshot, Option<u32>)> {
    match spec.strip_prefix('@') {
        Some(file) => parse_fake(std::fs::read_to_string(file).ok()?.trim()),
        None => parse_fake(spec),
    }
}

fn parse_fake(spec: &str) -> Option<(GpuSnapshot, Option<u32>)> {
    let mut s = GpuSnapshot::default();
    let mut util = None;
    for part in spec.split(',') {
        let (k, v) = part.split_once('=')?;
        match k.trim() {
            "vram" => s.vram_used_mib = Some(v.trim().parse().ok()?),
            "throttle" => s.throttle = Some(v.trim().parse().ok()?),
            "util" => util = Some(v.trim().parse().ok()?),
            _ => return None,
        }
    }
    Some((s, util))
}

/// `amd-smi monitor --csv --gfx --vram-usage` (10 s timeout), parsed as AORTA does: VRAM summed
/// over rows from the `VRAM_USED` column (`14 MB`, `1.5 GB`; `N/A` skipped), GFX the largest
/// number in the `GFX%` / `GFX_ACTIVITY` / `GFX` column.
fn amd_smi() -> Option<(GpuSnapshot, Option<u32>)> {
    let mut child = Command::new("amd-smi")
        .args(["monitor", "--csv", "--gfx", "--vram-usage"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut text).ok()?;
    parse_amd_smi_csv(&text)
}

fn parse_amd_smi_csv(text: &str) -> Option<(GpuSnapshot, Option<u32>)> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()?
        .split(',')
        .map(|h| h.trim().to_uppercase())
        .collect();
    let vram_col = header.iter().position(|h| h == "VRAM_USED");
    let gfx_col = header
        .iter()
        .position(|h| h == "GFX%" || h == "GFX_ACTIVITY" || h == "GFX");
    if vram_col.is_none() && gfx_col.is_none() {
        return None;
    }
    let number = |cell: &str| {
        cell.split_whitespace()
            .next()
            .and_then(|n| n.trim_end_matches('%').parse::<f64>().ok())
    };
    let (mut vram, mut gfx): (Option<f64>, Option<f64>) = (None, None);
    for row in lines {
        let cells: Vec<&str> = row.split(',').map(str::trim).collect();
        if let Some(cell) = vram_col.and_then(|c| cells.get(c)) {
            if let Some(v) = number(cell) {
                let unit = cell.to_uppercase();
                let mib = if unit.contains("GB") || unit.contains("GIB") {
                    v * 1024.0
                } else {
                    v
                };
                vram = Some(vram.unwrap_or(0.0) + mib);
            }
        }
        if let Some(g) = gfx_col.and_then(|c| cells.get(c)).and_then(|c| number(c)) {
            gfx = Some(gfx.map_or(g, |x: f64| x.max(g)));
        }
    }
    Some((
        GpuSnapshot {
            vram_used_mib: vram.map(|v| v.round() as i64),
            throttle: None,
        },
        gfx.map(|g| g.round() as u32),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amd_smi_csv_as_aorta_reads_it() {
        let csv = "GPU, GFX%, VRAM_USED, VRAM_TOTAL\n0, 12 %, 1024 MB, 196592 MB\n1, 97 %, 1.5 GB, 196592 MB\n2, N/A, N/A, 196592 MB\n";
        let (s, gfx) = parse_amd_smi_csv(csv).unwrap();
        assert_eq!(s.vram_used_mib, Some(1024 + 1536));
        assert_eq!(gfx, Some(97));
        assert!(
            parse_amd_smi_csv("GPU, POWER\n0, 300 W\n").is_none(),
            "no usable column"
        );
    }

    #[test]
    fn a_recent_reading_stands_only_for_the_same_devices_and_briefly() {
        let r = Recent::default();
        let (gpus0, gpus01) = (
            vec!["0".to_string()],
            vec!["0".to_string(), "1".to_string()],
        );
        let reading = GpuSnapshot {
            vram_used_mib: Some(512),
            throttle: Some(3),
        };
        assert!(r.get(&gpus0, Instant::now()).is_none(), "nothing read yet");
        r.record(&gpus0, &reading);
        let now = Instant::now();
        assert_eq!(r.get(&gpus0, now), Some(reading));
        assert!(r.get(&gpus01, now).is_none(), "other devices");
        assert!(
            r.get(&gpus0, now + RECENT + Duration::from_millis(1))
                .is_none(),
            "too old"
        );
    }

    #[test]
    fn fake_spec() {
        let (s, u) = parse_fake("vram=300,throttle=2,util=40").unwrap();
        assert_eq!(
            (s.vram_used_mib, s.throttle, u),
            (Some(300), Some(2), Some(40))
        );
        assert!(parse_fake("vram=x").is_none());
        assert!(parse_fake("bogus=1").is_none());
    }
}
