//! The run folder's names are written once, in the `run` crate (crates/run: layout.rs and
//! method.rs): no other crate's code (src/ and examples/) may spell a variant folder, the
//! checkpoint or analysis folder, or a method name as a string literal. Test modules
//! (`#[cfg(test)] mod tests` to the end of a file) and the tests/ folders may, since they check
//! what is on disk.

use std::path::{Path, PathBuf};

/// The literals owned by the contract: variant folders and method names, as a string literal
/// opens with them (`"eval-avg-k{k}"` is caught by its prefix), and the run's fixed folders as
/// they are joined to a path (a bench or a message may say "eval" or "analysis/...").
const OWNED: &[&str] = &[
    "join(\"eval\")",
    "\"eval/",
    "\"eval-avg-k",
    "\"averaged\"",
    "\"averaged/",
    "\"ensembled",
    "\"single\"",
    "\"smoothing\"",
    "\"average\"",
    "\"ensemble\"",
    "\"ensemble_vote\"",
    "join(\"analysis\")",
    "join(\"checkpoints\")",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every literal of `OWNED` in the code (not the test module) of `text`, as (line, literal).
fn owned_literals(text: &str) -> Vec<(usize, &'static str)> {
    let code = text.split("\n#[cfg(test)]\nmod tests").next().unwrap();
    let mut found = vec![];
    for (i, line) in code.lines().enumerate() {
        // a comment: `//` at the start of the line or after a space (not `"https://..."`)
        let line = match line.trim_start().starts_with("//") {
            true => "",
            false => line.split(" // ").next().unwrap(),
        };
        found.extend(OWNED.iter().filter(|lit| line.contains(*lit)).map(|lit| (i + 1, *lit)));
    }
    found
}

#[test]
fn folder_and_method_names_live_in_the_run_crate_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![];
    for dir in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        if dir.file_name() != "run" {
            for sub in ["src", "examples"] {
                if dir.path().join(sub).is_dir() {
                    rust_files(&dir.path().join(sub), &mut files);
                }
            }
        }
    }
    rust_files(&root.join("experiments/src"), &mut files);
    assert!(files.len() > 50, "found only {} source files under {}", files.len(), root.display());
    let mut offences = vec![];
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, lit) in owned_literals(&text) {
            offences.push(format!("{}:{line}: {lit}", f.strip_prefix(root).unwrap().display()));
        }
    }
    assert!(
        offences.is_empty(),
        "names owned by crates/run spelled elsewhere (use run::RunDir / run::Method):\n{}",
        offences.join("\n")
    );
}

/// The scan itself: it finds a literal in code, and not in a comment or a test module.
#[test]
fn the_scan_sees_code_and_skips_comments_and_tests() {
    let text = "fn f() -> &str { \"smoothing\" } // \"average\"\n// \"single\"\nlet p = d.join(\"eval-avg-k4\");\n#[cfg(test)]\nfn helper() {}\nlet u = \"a//b\"; let q = d.join(\"checkpoints\");\n#[cfg(test)]\nmod tests { const A: &str = \"single\"; }\n";
    assert_eq!(owned_literals(text), vec![(1, "\"smoothing\""), (3, "\"eval-avg-k"), (6, "join(\"checkpoints\")")]);
}
