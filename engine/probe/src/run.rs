//! The probe's orchestration, one call per section. Phase one runs every slow step at once: the
//! interpreter, the GPU tools, the host's files and the stack's tools (`nvcc`, `ldconfig`,
//! `rocm-sdk`) each on a thread, hashing the guessed wheel libraries on this one. Phase two
//! finishes the CUDA and ROCm sections from what the others found. A cold probe therefore
//! takes about as long as its slowest step (hashing the wheel libraries, or `import torch` with
//! `--deep`), not their sum.

use crate::cmd::Tools;
use crate::schema::Snapshot;
use crate::util::{Reasons, Steps};
use crate::{gpu, host, python, stack, ProbeOptions};

/// Every section but `env_vars`, which [`crate::probe`] records whether this succeeds or not.
pub(crate) fn snapshot(opts: &ProbeOptions, reasons: &Reasons, steps: &Steps) -> Snapshot {
    let (root, env, t) = (opts.root.as_path(), &opts.env, opts.timeouts.tool);
    let tools = Tools::new(env);
    let interp = python::choose_interpreter(opts.python.as_deref(), env, &tools);
    let ask = python::Ask {
        cache: opts.cache.as_ref(),
        tools: &tools,
        env,
        timeout: opts.timeouts.python,
        deep: opts.deep,
    };
    let machine = stack::Machine {
        root,
        env,
        tools: &tools,
        timeout: t,
        cache: opts.cache.as_ref(),
    };
    std::thread::scope(|s| {
        let py = interp
            .as_deref()
            .map(|i| (i, s.spawn(|| python::section(i, &ask, reasons, steps))));
        let gpus = s.spawn(|| gpu::section(&tools, root, env, t, reasons, steps));
        let host = s.spawn(|| host::section(root, env, &tools, t, reasons, steps));
        let stack = stack::start(s, &machine, interp.as_deref(), steps);

        let mut py = match py {
            None => {
                reasons.add(
                    "python",
                    "no interpreter: python3 is not on PATH (pass --python)",
                );
                python::PySection {
                    cache_state: Some("none".into()),
                    ..Default::default()
                }
            }
            Some((i, h)) => h.join().unwrap_or_else(|_| {
                reasons.add("python", "the interpreter step failed unexpectedly");
                python::described(i, None, Default::default(), env, reasons)
            }),
        };
        let gpus = gpus.join().unwrap_or_default();
        let mut host = host.join().unwrap_or_default();
        let stack = stack.finish(&machine, &mut py, &gpus, reasons, steps);

        host.runtime.python_env = py.runtime.python_env;
        host.runtime.venv_path = py.runtime.venv_path;
        host.runtime.conda_env = py.runtime.conda_env;
        let mut gpu = gpus.gpu;
        gpu.driver_identity = stack.driver;
        let mut snap = Snapshot {
            host,
            python: py.python,
            pytorch: py.pytorch,
            gpu,
            cuda: stack.cuda,
            rocm: stack.rocm,
            ..Snapshot::default()
        };
        snap.probe.python_cache = py.cache_state;
        snap.probe.hashed_bytes = Some(stack.hashed_bytes);
        snap
    })
}
