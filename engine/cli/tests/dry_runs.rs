//! The dry-run plan of every shipped recipe, pinned: cell names, each cell's resolved env vars
//! with their origin, trials and key inputs. A change here changes what AORTA users get.
mod common;
use common::*;

#[test]
fn shipped_recipe_plans() {
    insta::glob!("../../../recipes", "*.yaml", |path| {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let out = aorta(&["build", &format!("recipes/{name}"), "--dry-run"]);
        assert!(out.status.success(), "{}", transcript(&out));
        // The recipe's own hash line changes with every comment edit; keep the rest pinned.
        let text: String = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with("Recipe: "))
            .map(|l| format!("{l}\n"))
            .collect();
        insta::assert_snapshot!(text);
    });
}
