//! `aorta bench hw-queue …`: forwards to the `aorta-hw-queue` executable, which links the CUDA
//! driver API (loaded at run time) so that `aorta` itself never does.

use crate::exit::usage;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

fn find_tool(name: &str) -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)));
    let path_dirs = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    beside.into_iter().chain(path_dirs).find(|p| p.is_file())
}

pub fn hw_queue(args: &[String]) -> crate::exit::CliResult {
    let Some(tool) = find_tool("aorta-hw-queue") else {
        return Err(usage(
            "aorta-hw-queue was not found next to aorta or on PATH",
            "build it with `cargo build --release -p aorta-hw-queue` (it is installed beside the aorta binary)",
        ));
    };
    // Its usage lines then read `aorta bench hw-queue …`, the command the user typed.
    let status = std::process::Command::new(&tool)
        .arg0("aorta bench hw-queue")
        .args(args)
        .status()
        .map_err(|e| {
            usage(
                format!("cannot run {}: {e}", tool.display()),
                "check the file's permissions",
            )
        })?;
    Ok(match status.code() {
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::from(crate::exit::INCOMPLETE),
    })
}
