//! What `run`, `sweep` and the workload protocol share: run a workload in this process, or a
//! sweep in child processes, and write the outputs.

use std::path::{Path, PathBuf};

use crate::analysis::analyze;
use crate::backend::cuda::CudaGpu;
use crate::backend::sim::SimGpu;
use crate::backend::{Gpu, GpuError};
use crate::config::Config;
use crate::results::{write_atomic, Kind, ResultFile, Run, CONNECTIONS_ENV, DEFAULT_CONNECTIONS};
use crate::{plot, sweep, table, workloads};

pub fn connections_from_env() -> Option<u32> {
    std::env::var(CONNECTIONS_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
}

/// `AORTA_HW_QUEUE_BACKEND=sim` selects the simulated GPU (tests, demos); the default is CUDA.
pub const BACKEND_ENV: &str = "AORTA_HW_QUEUE_BACKEND";

pub fn open_gpu(cfg: &Config) -> Result<Box<dyn Gpu>, GpuError> {
    match std::env::var(BACKEND_ENV).as_deref() {
        Ok("sim") => Ok(Box::new(SimGpu::new(
            connections_from_env().unwrap_or(DEFAULT_CONNECTIONS) as usize,
        ))),
        Ok("cuda") | Err(_) => Ok(Box::new(CudaGpu::new(cfg.device as usize)?)),
        Ok(other) => Err(GpuError::Unavailable(format!(
            "{BACKEND_ENV}={other}: backends are cuda and sim"
        ))),
    }
}

pub fn run_in_process(
    workload: &str,
    cfg: &Config,
    log: &mut dyn FnMut(String),
) -> Result<ResultFile, GpuError> {
    let mut gpu = open_gpu(cfg)?;
    let d = gpu.info().clone();
    log(format!(
        "{} (sm {}, {} SMs), driver {}, {}, {CONNECTIONS_ENV}={}",
        d.name,
        d.compute_capability,
        d.sm_count,
        d.driver_version,
        d.compiler_version,
        d.queue_env.as_ref().map_or("?", |q| q.1.as_str())
    ));
    let points = workloads::run(workload, cfg, gpu.as_mut(), log)?;
    let mut f = ResultFile::new(Kind::Run, workload, cfg.clone());
    f.device = Some(d);
    f.runs.push(Run {
        connections: connections_from_env(),
        points,
        ..Default::default()
    });
    Ok(f)
}

pub fn run_sweep(
    workload: &str,
    cfg: &Config,
    connections: &[u32],
    tolerance: f64,
    log: &mut dyn FnMut(String),
) -> Result<ResultFile, (i32, String)> {
    sweep::validate_connections(connections).map_err(|e| (2, e))?;
    let exe =
        std::env::current_exe().map_err(|e| (1, format!("cannot find my own executable: {e}")))?;
    let specs = sweep::plan(workload, cfg, connections);
    let (runs, device) = sweep::execute(&exe, &specs, log)?;
    let mut f = ResultFile::new(Kind::Sweep, workload, cfg.clone());
    f.device = device;
    let k = (workload == "spin_streams").then_some(cfg.kernels_per_stream);
    f.analysis = Some(analyze(&runs, k, tolerance));
    f.runs = runs;
    Ok(f)
}

/// result.json, table.txt and the plots into `dir`; returns the files written.
pub fn write_outputs(file: &ResultFile, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let json = dir.join("result.json");
    write_atomic(&json, file.to_json().as_bytes())
        .map_err(|e| format!("{}: {e}", json.display()))?;
    out.push(json);
    let txt = dir.join("table.txt");
    write_atomic(&txt, table::render(file).as_bytes())
        .map_err(|e| format!("{}: {e}", txt.display()))?;
    out.push(txt);
    out.extend(plot::plot_result(file, dir)?);
    Ok(out)
}
