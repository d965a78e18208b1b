//! The facts outside a recipe that trial keys depend on, gathered once per invocation.

use aorta_graph::{hash_inputs, HostBasics, KeyContext};
use aorta_source::{Diag, DiagKind};

pub fn key_context(argv: Option<&[String]>) -> miette::Result<KeyContext> {
    let cwd = std::env::current_dir().map_err(|e| miette::miette!("cannot read the current directory: {e}"))?;
    let input_hashes = match argv {
        Some(a) => hash_inputs(&cwd, a, &[]).map_err(|e| miette::Report::new(Diag::new(DiagKind::Io, e).with_help("check the input paths")))?,
        None => Default::default(),
    };
    Ok(KeyContext { env_snapshot: HostBasics::current().key(), argv: argv.map(<[String]>::to_vec), input_hashes, workloads: Default::default() })
}
