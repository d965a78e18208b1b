//! Evaluating BUCK files (and the `.bzl` files they load) with starlark-rust.
//!
//! One [`Session`] per `resolve()` call caches frozen `.bzl` modules, so `//recipes/...` over many
//! packages evaluates `rules/aorta.bzl` once, and detects `load()` cycles.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use starlark::environment::{FrozenModule, Module};
use starlark::eval::{Evaluator, FileLoader};
use starlark::syntax::{AstModule, Dialect, DialectTypes};

use crate::buck2::{globals, EvalContext, QuietPrint, Target};
use crate::error::err;
use crate::error::{from_starlark, LabelsError};

/// Buck2's build-file names, in precedence order (`BUCK.v2` shadows `BUCK`).
pub const BUILD_FILE_NAMES: &[&str] = &["BUCK.v2", "BUCK"];

/// A BUCK file and the targets it declared, in declaration order.
#[derive(Debug, Clone)]
pub struct BuildFile {
    /// Absolute path of the BUCK file.
    pub path: PathBuf,
    /// Package path (`recipes`, `""` for the root).
    pub package: String,
    /// Every target, whatever its rule.
    pub targets: Vec<Target>,
}

/// What `Dialect::Extended` enables (it is doc-hidden/deprecated in 0.14, so spell it out):
/// types, keyword-only args and top-level `for`/`if`, like Buck2's BUCK dialect.
fn dialect() -> Dialect {
    Dialect {
        enable_types: DialectTypes::Enable,
        enable_keyword_only_arguments: true,
        enable_top_level_stmt: true,
        ..Dialect::Standard
    }
}

pub(crate) struct Session<'r> {
    root: &'r Path,
    /// Frozen `.bzl` modules by absolute path.
    modules: RefCell<HashMap<PathBuf, FrozenModule>>,
    /// `.bzl` files currently being loaded, to report cycles instead of overflowing the stack.
    loading: RefCell<Vec<PathBuf>>,
}

/// Resolves `load()` paths relative to the file doing the loading.
struct Loader<'s, 'r> {
    session: &'s Session<'r>,
    package: &'s str,
}

/// Why a `load()` path names no `.bzl` file; the path as written. `Display` starts with
/// "cannot load", which picks the load() help line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LoadPathError {
    #[error("cannot load `{0}`: expected //pkg:file.bzl (a `:` before the file name)")]
    NoColon(String),
    #[error("cannot load `{0}`: cell-qualified loads are not supported (aorta only knows the root cell)")]
    CellQualified(String),
    #[error("cannot load `{0}`: expected \"//pkg:file.bzl\" or \":file.bzl\"")]
    NotALoadPath(String),
    #[error("cannot load `{0}`: expected a .bzl file inside the workspace (no `..`, empty or `.` components)")]
    NotABzl(String),
}

impl FileLoader for Loader<'_, '_> {
    fn load(&self, path: &str) -> starlark::Result<FrozenModule> {
        self.session.load_bzl(self.package, path)
    }
}

impl<'r> Session<'r> {
    pub(crate) fn new(root: &'r Path) -> Self {
        Session {
            root,
            modules: RefCell::default(),
            loading: RefCell::default(),
        }
    }

    /// Display name of a file: relative to the root, `/`-separated (used in spans and messages).
    fn display_name(&self, path: &Path) -> String {
        let rel = path.strip_prefix(self.root).unwrap_or(path);
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The package's BUCK file, if it has one.
    pub(crate) fn build_file_path(&self, package: &str) -> Option<PathBuf> {
        let dir = self.root.join(package);
        BUILD_FILE_NAMES
            .iter()
            .map(|n| dir.join(n))
            .find(|p| p.is_file())
    }

    /// Evaluates the package's BUCK file; `Ok(None)` when the package has none.
    pub(crate) fn eval_package(&self, package: &str) -> Result<Option<BuildFile>, LabelsError> {
        let Some(path) = self.build_file_path(package) else {
            return Ok(None);
        };
        let source = std::fs::read_to_string(&path).map_err(|e| LabelsError::io(&path, e))?;
        let name = self.display_name(&path);
        let fail = |e| from_starlark(e, self.root, (&path, &source));
        let ast = AstModule::parse(&name, source.clone(), &dialect()).map_err(fail)?;
        let ctx = EvalContext {
            file_label: format!(
                "//{package}:{}",
                path.file_name().unwrap_or_default().to_string_lossy()
            ),
            package: package.to_owned(),
            targets: Some(RefCell::default()),
        };
        let loader = Loader {
            session: self,
            package,
        };
        Module::with_temp_heap(|module| {
            let mut eval = Evaluator::new(&module);
            eval.set_loader(&loader);
            eval.set_print_handler(&QuietPrint);
            eval.extra = Some(&ctx);
            eval.eval_module(ast, globals()).map(drop)
        })
        .map_err(fail)?;
        let targets = ctx.targets.map(RefCell::into_inner).unwrap_or_default();
        Ok(Some(BuildFile {
            path,
            package: package.to_owned(),
            targets,
        }))
    }

    /// Maps a `load()` path to (package, absolute file).
    ///
    /// `//a/b:c.bzl` → `<root>/a/b/c.bzl`; `:c.bzl` → `<root>/<current package>/c.bzl`.
    fn locate(
        &self,
        current_package: &str,
        path: &str,
    ) -> Result<(String, PathBuf), LoadPathError> {
        let (pkg, file) = if let Some(rest) = path.strip_prefix("//") {
            rest.split_once(':')
                .ok_or_else(|| LoadPathError::NoColon(path.to_owned()))?
        } else if let Some(file) = path.strip_prefix(':') {
            (current_package, file)
        } else if path.contains("//") {
            return Err(LoadPathError::CellQualified(path.to_owned()));
        } else {
            return Err(LoadPathError::NotALoadPath(path.to_owned()));
        };
        let bad = |p: &str| p.split('/').any(|c| c.is_empty() || c == "." || c == "..");
        if (!pkg.is_empty() && bad(pkg)) || bad(file) || !file.ends_with(".bzl") {
            return Err(LoadPathError::NotABzl(path.to_owned()));
        }
        Ok((pkg.to_owned(), self.root.join(pkg).join(file)))
    }

    pub(crate) fn load_bzl(
        &self,
        current_package: &str,
        load_path: &str,
    ) -> starlark::Result<FrozenModule> {
        let (package, path) = self.locate(current_package, load_path).map_err(err)?;
        if let Some(m) = self.modules.borrow().get(&path) {
            return Ok(m.clone());
        }
        let name = self.display_name(&path);
        if self.loading.borrow().contains(&path) {
            let chain: Vec<String> = self
                .loading
                .borrow()
                .iter()
                .map(|p| self.display_name(p))
                .collect();
            return Err(err(format!(
                "cannot load `{load_path}`: load cycle {} -> {name}",
                chain.join(" -> ")
            )));
        }
        let source = match std::fs::read_to_string(&path) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(err(format!(
                    "cannot load `{load_path}`: file {name} does not exist"
                )));
            }
            Err(e) => {
                return Err(err(format!(
                    "cannot load `{load_path}`: reading {name}: {e}"
                )))
            }
        };
        let ast = AstModule::parse(&name, source, &dialect())?;
        let ctx = EvalContext {
            file_label: format!(
                "//{package}:{}",
                path.file_name().unwrap_or_default().to_string_lossy()
            ),
            package: package.clone(),
            targets: None,
        };
        let loader = Loader {
            session: self,
            package: &package,
        };
        self.loading.borrow_mut().push(path.clone());
        let frozen = Module::with_temp_heap(|module| {
            {
                let mut eval = Evaluator::new(&module);
                eval.set_loader(&loader);
                eval.set_print_handler(&QuietPrint);
                eval.extra = Some(&ctx);
                eval.eval_module(ast, globals())?;
            }
            module
                .freeze()
                .map_err(|e| err(format!("freezing {name}: {}", e.err_msg)))
        });
        self.loading.borrow_mut().pop();
        let frozen = frozen?;
        self.modules.borrow_mut().insert(path, frozen.clone());
        Ok(frozen)
    }
}
