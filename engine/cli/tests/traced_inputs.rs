//! Traced inputs (docs/cache-keys.md, "Traced inputs"): a command trial's process tree is
//! traced, what it read is kept with its result, and a rebuild re-runs exactly the trials
//! whose inputs changed. Real builds of real commands in temporary workspaces.

mod common;

use common::{counts, text, Ws};
use std::process::Output;

const ONE_CELL: &str = "schema_version: 1\nmode: probe\nticket: traced\ntrials: 2\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n";

fn python_project(ws: &Ws) {
    ws.write("r.yaml", ONE_CELL);
    ws.write("launch.sh", "python3 train.py\n");
    ws.write(
        "train.py",
        "import pkg.sub.mod\nprint('ok', pkg.sub.mod.X)\n",
    );
    ws.write("pkg/__init__.py", "");
    ws.write("pkg/sub/__init__.py", "");
    ws.write("pkg/sub/mod.py", "X = 1\n");
    ws.write("other.sh", "cat data.txt\n");
    ws.write("data.txt", "data\n");
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `aorta build r.yaml … -- COMMAND` with AORTA_TIMING on (the hashed-file count).
fn build_timed(ws: &Ws, command: &[&str]) -> Output {
    let mut args = vec!["build", "r.yaml", "--store", "s", "--output", "o", "--"];
    args.extend(command);
    ws.aorta_env(&args, &[("AORTA_TIMING", "1")])
}

/// "traced inputs: N file(s) hashed this session".
fn hashed(o: &Output) -> usize {
    let err = stderr(o);
    let line = err
        .lines()
        .find(|l| l.contains("file(s) hashed this session"))
        .unwrap_or_else(|| panic!("no hashed line:\n{}", text(o)));
    line.split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap()
}

#[test]
fn an_edit_two_imports_deep_reruns_only_that_commands_trials() {
    let ws = Ws::new();
    python_project(&ws);
    let launch = ["bash", "launch.sh"];
    let other = ["bash", "other.sh"];
    assert_eq!(counts(&ws.build(&[], &launch)), (2, 0));
    assert_eq!(counts(&ws.build(&[], &other)), (2, 0));
    let list =
        std::fs::read_to_string(ws.path().join("o/traced/none-none/trial_0/inputs.json")).unwrap();
    assert!(list.contains("\"data.txt\""), "{list}");
    // The module imported by a module train.py imports now fails the way a GPU fault would.
    ws.write(
        "pkg/sub/mod.py",
        "import sys\nprint('CUDA error: an illegal memory access was encountered', file=sys.stderr)\nsys.exit(1)\n",
    );
    let rerun = ws.build(&[], &launch);
    assert_eq!(counts(&rerun), (2, 0), "{}", text(&rerun));
    assert!(
        stderr(&rerun).contains("re-ran 2 trial(s): pkg/sub/mod.py changed"),
        "{}",
        text(&rerun)
    );
    assert!(
        String::from_utf8_lossy(&rerun.stdout).contains("with failing trials"),
        "{}",
        text(&rerun)
    );
    // The other command never read it.
    let untouched = ws.build(&[], &other);
    assert_eq!(counts(&untouched), (0, 2), "{}", text(&untouched));
    // And the edited command is cached again.
    assert_eq!(counts(&ws.build(&[], &launch)), (0, 2));
    // explain names the inputs and the one that changed.
    ws.write("pkg/sub/mod.py", "X = 2\n");
    let explain = ws.explain("none-none", "0", &["bash", "launch.sh"]);
    let said = String::from_utf8_lossy(&explain.stdout);
    assert!(said.contains("traced inputs:"), "{}", text(&explain));
    assert!(
        said.contains("input pkg/sub/mod.py  (changed"),
        "{}",
        text(&explain)
    );
    assert!(said.contains("input train.py\n"), "{}", text(&explain));
}

#[test]
fn a_touch_costs_one_hash_and_no_rerun_and_a_removal_reruns() {
    let ws = Ws::new();
    python_project(&ws);
    let cmd = ["bash", "other.sh"];
    assert_eq!(counts(&build_timed(&ws, &cmd)), (2, 0));
    let warm = build_timed(&ws, &cmd);
    assert_eq!(counts(&warm), (0, 2), "{}", text(&warm));
    assert_eq!(hashed(&warm), 0, "{}", text(&warm));
    // Same bytes, new mtime: hashed once (the digest cache), nothing runs.
    let t = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(ws.path().join("data.txt"))
        .unwrap()
        .set_modified(t)
        .unwrap();
    let touched = build_timed(&ws, &cmd);
    assert_eq!(counts(&touched), (0, 2), "{}", text(&touched));
    assert_eq!(hashed(&touched), 1, "{}", text(&touched));
    std::fs::remove_file(ws.path().join("data.txt")).unwrap();
    let removed = build_timed(&ws, &cmd);
    assert_eq!(counts(&removed), (2, 0), "{}", text(&removed));
    assert!(
        stderr(&removed).contains("data.txt was removed"),
        "{}",
        text(&removed)
    );
}

#[test]
fn a_daemonised_grandchild_and_a_static_binary_are_traced() {
    let ws = Ws::new();
    ws.write("r.yaml", ONE_CELL);
    ws.write("g.txt", "grandchild\n");
    // A grandchild in its own session with an empty environment, waited for by its parent.
    let daemon = [
        "sh",
        "-c",
        "env -i setsid sh -c 'cat g.txt > /dev/null' & wait",
    ];
    assert_eq!(counts(&ws.build(&[], &daemon)), (2, 0));
    let list =
        std::fs::read_to_string(ws.path().join("o/traced/none-none/trial_0/inputs.json")).unwrap();
    assert!(list.contains("\"g.txt\""), "{list}");
    ws.write("g.txt", "edited\n");
    let rerun = ws.build(&[], &daemon);
    assert_eq!(counts(&rerun), (2, 0), "{}", text(&rerun));

    // A statically linked program (no LD_PRELOAD shim could see it).
    let libc_a = std::path::Path::new("/usr/lib/x86_64-linux-gnu/libc.a");
    if !libc_a.exists() {
        eprintln!("skipped the static binary: no static libc here");
        return;
    }
    ws.write(
        "reader.c",
        "#include <stdio.h>\nint main(void){FILE*f=fopen(\"s.txt\",\"r\");if(!f)return 2;char b[64];fgets(b,64,f);fclose(f);return 0;}\n",
    );
    let cc = std::process::Command::new("gcc")
        .current_dir(ws.path())
        .args(["-static", "-O1", "-o", "reader", "reader.c"])
        .status();
    if !cc.is_ok_and(|s| s.success()) {
        eprintln!("skipped the static binary: gcc -static failed");
        return;
    }
    ws.write("s.txt", "static\n");
    ws.write("r.yaml", &ONE_CELL.replace("traced", "static"));
    assert_eq!(counts(&ws.build(&[], &["./reader"])), (2, 0));
    let list =
        std::fs::read_to_string(ws.path().join("o/static/none-none/trial_0/inputs.json")).unwrap();
    assert!(
        list.contains("\"s.txt\"") && list.contains("\"reader\""),
        "{list}"
    );
    ws.write("s.txt", "edited\n");
    let rerun = ws.build(&[], &["./reader"]);
    assert_eq!(counts(&rerun), (2, 0), "{}", text(&rerun));
    assert!(stderr(&rerun).contains("s.txt changed"), "{}", text(&rerun));
}

#[test]
fn a_file_the_trial_writes_then_reads_is_not_an_input() {
    let ws = Ws::new();
    ws.write("r.yaml", ONE_CELL);
    let cmd = ["sh", "-c", "echo made > made.txt; cat made.txt"];
    assert_eq!(counts(&ws.build(&[], &cmd)), (2, 0));
    let list =
        std::fs::read_to_string(ws.path().join("o/traced/none-none/trial_0/inputs.json")).unwrap();
    assert!(!list.contains("made.txt"), "{list}");
    // The trial rewrote it: the next build still reuses.
    assert_eq!(counts(&ws.build(&[], &cmd)), (0, 2));
}

#[test]
fn a_second_clone_at_another_path_shares_results_through_a_remote() {
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let remote_flags = [
        "--remote-cache",
        url.as_str(),
        "--remote-cache-mode",
        "readwrite",
    ];
    let cmd = ["bash", "launch.sh"];
    let a = Ws::new();
    python_project(&a);
    let first = a.build(&remote_flags, &cmd);
    assert_eq!(counts(&first), (2, 0), "{}", text(&first));
    // A colleague's checkout: same files, another path, an empty local store.
    let b = Ws::new();
    python_project(&b);
    let shared = b.build(&remote_flags, &cmd);
    assert_eq!(counts(&shared), (0, 2), "{}", text(&shared));
    b.write("pkg/sub/mod.py", "X = 3\n");
    let edited = b.build(&remote_flags, &cmd);
    assert_eq!(counts(&edited), (2, 0), "{}", text(&edited));
    assert!(
        stderr(&edited).contains("pkg/sub/mod.py changed"),
        "{}",
        text(&edited)
    );
}

#[test]
fn an_input_changed_while_its_trial_ran_is_not_stored() {
    let ws = Ws::new();
    ws.write("r.yaml", ONE_CELL);
    ws.write("data.txt", "one\n");
    // A build that reads data.txt: the digest cache now knows it.
    assert_eq!(counts(&ws.build(&[], &["cat", "data.txt"])), (2, 0));
    // This command reads it, then (as an editor saving the file would) replaces it.
    let swap = [
        "sh",
        "-c",
        "cat data.txt; printf 'two\\n' > new.tmp; mv new.tmp data.txt",
    ];
    let o = ws.build(&[], &swap);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        stderr(&o).contains("data.txt changed while trial"),
        "{}",
        text(&o)
    );
    assert!(
        stderr(&o).contains("its result is not stored"),
        "{}",
        text(&o)
    );
}
