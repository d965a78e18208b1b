//! Where a cell's trials live inside a run directory. Paths in matrix.json are relative to
//! the run directory (AORTA wrote them as given on the command line, §12.1.6), so a run
//! directory can be moved, bundled or read on another machine.

use aorta_recipe::{safe_slug, Mode};

/// The cell's directory, relative to the run directory, with a trailing `/`: `<slug>/` for
/// probe runs (AORTA's flat layout) and `cells/<slug>/` for triage runs.
pub fn cell_dir(mode: Mode, cell: &str) -> String {
    match mode {
        Mode::Probe => format!("{}/", safe_slug(cell)),
        Mode::Triage => format!("cells/{}/", safe_slug(cell)),
    }
}

/// A trial's record, relative to the run directory: `<cell dir>trial_<N>/result.json`.
/// One shape for both flows (AORTA's `trial_d0_m0_t<N>` indices were vestigial, §12.1.5).
pub fn trial_path(mode: Mode, cell: &str, index: u32) -> String {
    format!("{}trial_{index}/result.json", cell_dir(mode, cell))
}
