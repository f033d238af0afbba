//! Shared pieces of the end-to-end suites: the built binaries, a micro study (corpus, tasks,
//! configs) in a temp folder, and helpers to run commands and compare folders byte for byte.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (this package's manifest folder).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A release binary of the workspace. `just test` builds them first; without them (plain
/// `cargo test` on a machine without the torch venv) the suites say so and fail.
pub fn bin(name: &str) -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
    let p = dir.join("release").join(name);
    assert!(p.is_file(), "{} is not built: run `just test` (it builds every binary first), or `cargo build --release --workspace --bins`", p.display());
    p
}

/// Runs a binary with arguments from the repository root, returning its output.
pub fn exec(name: &str, args: &[&str]) -> Output {
    exec_env(name, args, &[])
}

pub fn exec_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    exec_in(&root(), name, args, env)
}

/// Runs a binary from another working folder.
pub fn exec_in(cwd: &Path, name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin(name));
    c.args(args).current_dir(cwd);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap_or_else(|e| panic!("cannot start {name}: {e}"))
}

/// Starts a binary in the background and waits (at most a minute) until it holds the lock file
/// `lock`, so that a second writer can be started against a folder known to be in use.
pub fn spawn_holding(name: &str, args: &[&str], lock: &Path) -> std::process::Child {
    let child = Command::new(bin(name))
        .args(args)
        .current_dir(root())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
    let t = std::time::Instant::now();
    while !lock.exists() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "{name} {} never took its lock {}",
            args[0],
            lock.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child
}

pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Asserts success, showing the output otherwise.
pub fn ok(o: Output, what: &str) -> Output {
    assert!(o.status.success(), "{what} failed:\n{}", text(&o));
    o
}

/// Asserts a clean refusal: non-zero exit, no panic, and stderr naming `names` (a file, a flag).
pub fn refused(o: &Output, names: &str, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{what}: exited 0 but should have been refused:\n{}", text(o));
    assert!(!err.contains("panicked"), "{what}: panicked instead of a clear error:\n{err}");
    assert!(err.contains(names), "{what}: the error does not name `{names}`:\n{err}");
}

/// Every file under `dir` (relative path -> bytes), skipping lock files.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else if e.file_name() != ".lock" {
                out.insert(p.strip_prefix(base).unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Paths under `dir` that are temp files, staging folders or lock files (none may be left once
/// a command has finished).
pub fn leftovers(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.contains(".~") || name.ends_with(".partial") || name.ends_with(".tmp") || name == ".lock" {
                out.push(e.path().display().to_string());
            } else if e.path().is_dir() {
                walk(&e.path(), out);
            }
        }
    }
    walk(dir, &mut out);
    out
}

/// Asserts that two trees hold the same files with the same bytes, naming the first difference.
pub fn same_tree(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>, what: &str) {
    let ka: Vec<_> = a.keys().collect();
    let kb: Vec<_> = b.keys().collect();
    assert_eq!(ka, kb, "{what}: different files");
    for (k, v) in a {
        assert!(v == &b[k], "{what}: {k} differs");
    }
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// SplitMix64, for seeded choices in the suites.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A micro study in a temp folder: corpus from the lm crate's Moby-Dick fixture, a tokenizer,
/// two small tasks, a run config of a few seconds and an eval config.
pub struct Micro {
    pub dir: tempfile::TempDir,
}

impl Micro {
    pub fn new(steps: u64) -> Micro {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().to_path_buf();
        let text = std::fs::read_to_string(root().join("crates/lm/tests/fixtures/moby_dick_excerpt.txt")).unwrap();
        let (a, b) = text.split_at(80_000);
        std::fs::create_dir_all(w.join("corpus")).unwrap();
        std::fs::write(w.join("corpus/train.txt"), a).unwrap();
        std::fs::write(w.join("corpus/validation.txt"), b).unwrap();
        let m = Micro { dir };
        m.write_config("micro", steps, 32);
        m.write_tasks();
        std::fs::write(
            w.join("eval.toml"),
            format!(
                "tasks = \"{}\"\nseed = 1\nshots = 0\nmax_examples = 24\nbatch_tokens = 2048\n",
                w.join("tasks").display()
            ),
        )
        .unwrap();
        m
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn s(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }

    /// `<name>.toml`: a 1-layer model of width `d_model` trained for `steps`, a checkpoint every 5.
    pub fn write_config(&self, name: &str, steps: u64, d_model: i64) {
        let w = self.dir.path();
        let cfg = format!(
            r#"name = "{name}"
seed = 7

[data]
corpus = "{corpus}"
tokenizer = "{tok}"
vocab_size = 320

[model]
d_model = {d_model}
n_layers = 1
n_heads = 4
d_ff = 64
context = 32
rope_theta = 10000.0
norm_eps = 1e-5
init_std = 0.02
dropout = 0.0

[train]
batch_size = 4
steps = {steps}
schedule = "cosine"
lr = 3e-3
min_lr_ratio = 0.1
warmup_steps = 5
decay_fraction = 0.2
weight_decay = 0.1
beta1 = 0.9
beta2 = 0.95
eps = 1e-8
grad_clip = 1.0
checkpoint_every = 5
val_windows = 4
"#,
            corpus = w.join("corpus").display(),
            tok = w.join("tok.json").display()
        );
        std::fs::write(w.join(format!("{name}.toml")), cfg).unwrap();
    }

    /// Two tasks from the excerpt: a 3-way next-words choice and a word-swap minimal pair.
    pub fn write_tasks(&self) {
        let w = self.dir.path();
        std::fs::create_dir_all(w.join("tasks")).unwrap();
        let text = std::fs::read_to_string(w.join("corpus/validation.txt")).unwrap();
        let words: Vec<&str> = text.split_whitespace().collect();
        let (mut mc, mut pairs) = (String::new(), String::new());
        for i in 0..24 {
            let at = 40 + i * 97;
            let ctx = words[at..at + 8].join(" ");
            let gold = words[at + 8..at + 10].join(" ");
            let wrong1 = words[at + 300..at + 302].join(" ");
            let wrong2 = words[at + 600..at + 602].join(" ");
            let ch = |c: &str| serde_json::json!({"context": ctx, "continuation": format!(" {c}")});
            mc += &format!(
                "{}\n",
                serde_json::json!({"id": format!("mc/{i}"), "choices": [ch(&gold), ch(&wrong1), ch(&wrong2)], "gold": 0})
            );
            let s: Vec<&str> = words[at..at + 6].to_vec();
            let mut t = s.clone();
            t.swap(2, 3);
            let p = |x: &[&str]| serde_json::json!({"context": "", "continuation": x.join(" ")});
            pairs +=
                &format!("{}\n", serde_json::json!({"id": format!("pair/{i}"), "choices": [p(&s), p(&t)], "gold": 0}));
        }
        self.set_task("mc", "multiple_choice", &mc, 1.0 / 3.0);
        self.set_task("pair", "minimal_pair", &pairs, 0.5);
    }

    /// Writes (or replaces) one task file and its manifest entry.
    pub fn set_task(&self, name: &str, kind: &str, jsonl: &str, chance: f64) {
        let dir = self.path("tasks");
        let file = format!("{name}.jsonl");
        std::fs::write(dir.join(&file), jsonl).unwrap();
        let mpath = dir.join("manifest.json");
        let mut m: Vec<serde_json::Value> =
            std::fs::read_to_string(&mpath).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
        m.retain(|e| e["name"] != name);
        m.push(serde_json::json!({
            "name": name, "kind": kind, "file": file, "sha256": output::sha256_hex(jsonl.as_bytes()),
            "examples": jsonl.lines().filter(|l| !l.trim().is_empty()).count(), "chance": chance, "source": "test", "license": "test"
        }));
        std::fs::write(mpath, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    }

    /// Trains the run `<name>` into `out` (and the tokenizer on first use).
    pub fn train(&self, name: &str, out: &Path) -> Output {
        exec(
            "lm",
            &["train", "--quiet", "--config", &self.s(&format!("{name}.toml")), "--out", &out.display().to_string()],
        )
    }

    pub fn eval(&self, run_dir: &Path) -> Output {
        exec(
            "lm",
            &[
                "eval",
                "--quiet",
                "--checkpoints",
                &run_dir.join("checkpoints").display().to_string(),
                "--config",
                &self.s("eval.toml"),
            ],
        )
    }
}
