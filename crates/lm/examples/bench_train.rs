//! Training-throughput benchmark, in one run: this machine's matmul peak per dtype (fp32, bf16)
//! on the model's own GEMM shapes; `lm`'s training step in fp32 and in bf16 mixed precision; the
//! same model and step in PyTorch eager fp32 and under PyTorch's bf16 autocast
//! (crates/lm/bench/train_reference.py, same venv, same token stream), each also with lm's
//! malloc settings (`lm::heap`, through glibc's environment variables), so that the gain of
//! the heap settings is told apart from the rest. The contenders' repetitions are interleaved.
//! Every figure is the
//! median of `--reps` repetitions of `--steps` timed steps (min, max beside it); MFU is against
//! the peak of the dtype the step computes in, the best of the matmul measurements taken before
//! every round of the contenders (interleaved with them, as the host's speed drifts). Writes runs/bench/train.summary.json (the headline
//! rows of `just bench`, every row and the peaks in its `details`).
//!
//! `just bench-train` (or `cargo run --release -p lm --example bench_train -- --config ...`).

use anyhow::{Context, Result};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::time::Instant;

use lm::config::{Config, Precision};
use lm::model::Gpt;
use lm::optim::AdamW;
use lm::tch::{nn::VarStore, Device, Kind};
use lm::train::{tokenizer_for, TokenData};
use output::bench::{Goal, Reference, Row, Spread};

mod common;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "configs/default.toml")]
    config: PathBuf,
    /// Timed steps per repetition (after 3 untimed warm-up steps).
    #[arg(long, default_value_t = 10)]
    steps: u64,
    /// Repetitions; each figure is their median.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    #[arg(long, default_value = ".venv/bin/python")]
    python: PathBuf,
    /// Time only lm's step in this precision (fp32 or bf16) and print its tokens/s: no peaks,
    /// no PyTorch, no files (for a profiler: `just profile train`).
    #[arg(long)]
    only: Option<String>,
}

/// The model's training GEMMs as (M, K, N): tokens x d_model into qkv, wo, gate_up, down and
/// the output layer.
fn gemm_shapes(cfg: &Config) -> Vec<(i64, i64, i64)> {
    let (m, d, f, v) =
        (cfg.train.batch_size * cfg.model.context, cfg.model.d_model, cfg.model.d_ff, cfg.data.vocab_size);
    vec![(m, d, 3 * d), (m, d, d), (m, d, 2 * f), (m, f, d), (m, d, v)]
}

struct Timed {
    /// tokens/s per repetition
    rates: Vec<f64>,
    /// share of the time in forward, backward, optimizer
    split: (f64, f64, f64),
}

/// lm's training step in one precision, from the seeded init, kept between repetitions.
struct LmRunner<'a> {
    cfg: &'a Config,
    data: &'a TokenData,
    _vs: VarStore,
    model: Gpt,
    opt: AdamW,
    step: u64,
    /// seconds in forward, backward, optimizer over the timed repetitions
    split: [f64; 3],
}

impl<'a> LmRunner<'a> {
    /// A fresh model and optimizer, warmed up by 3 untimed steps.
    fn new(cfg: &'a Config, data: &'a TokenData, precision: Precision) -> Self {
        tch::manual_seed(cfg.init_seed() as i64);
        let vs = VarStore::new(Device::Cpu);
        let mut model = Gpt::new(&vs.root(), &cfg.model, cfg.data.vocab_size);
        model.set_train_compute(lm::model::precision_kind(precision));
        let t = &cfg.train;
        let opt = AdamW::new(&vs, t.beta1, t.beta2, t.eps, t.weight_decay);
        let mut r = LmRunner { cfg, data, _vs: vs, model, opt, step: 0, split: [0.0; 3] };
        r.steps(3);
        r.split = [0.0; 3];
        r
    }

    fn steps(&mut self, n: u64) {
        let t = &self.cfg.train;
        for _ in 0..n {
            let (x, y) = self.data.batch(self.cfg, self.step, Device::Cpu);
            let t0 = Instant::now();
            let loss = self.model.loss(&x, &y, true);
            let t1 = Instant::now();
            loss.backward();
            let t2 = Instant::now();
            self.opt.clip_grad_norm(t.grad_clip);
            self.opt.step(self.cfg.lr_at(self.step));
            let _ = f64::try_from(&loss).unwrap();
            let t3 = Instant::now();
            for (acc, d) in self.split.iter_mut().zip([t1 - t0, t2 - t1, t3 - t2]) {
                *acc += d.as_secs_f64();
            }
            self.step += 1;
        }
    }

    /// Tokens/s of `n` steps.
    fn rep(&mut self, n: u64) -> f64 {
        let began = Instant::now();
        self.steps(n);
        (n * (self.cfg.train.batch_size * self.cfg.model.context) as u64) as f64 / began.elapsed().as_secs_f64()
    }

    fn shares(&self) -> (f64, f64, f64) {
        let total: f64 = self.split.iter().sum();
        (self.split[0] / total, self.split[1] / total, self.split[2] / total)
    }
}

/// The PyTorch reference (eager fp32 or under bf16 autocast, optionally with lm's malloc
/// settings) as a server: warmed up once, then one timed repetition per "run" line.
struct PyServer {
    child: std::process::Child,
    to: std::process::ChildStdin,
    from: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl PyServer {
    fn start(args: &Args, cache: &Path, bf16: bool, same_heap: bool) -> Result<Self> {
        let mut cmd = std::process::Command::new(&args.python);
        if same_heap {
            // lm::heap's malloc settings, through glibc's environment variables
            cmd.env("MALLOC_MMAP_THRESHOLD_", (1u64 << 30).to_string())
                .env("MALLOC_TRIM_THRESHOLD_", (1u64 << 30).to_string());
        }
        cmd.args(["crates/lm/bench/train_reference.py", "--serve", "--config"])
            .arg(&args.config)
            .arg("--tokens")
            .arg(cache);
        cmd.args(["--steps", &args.steps.to_string()]);
        if bf16 {
            cmd.arg("--bf16");
        }
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot run {}", args.python.display()))?;
        let to = child.stdin.take().unwrap();
        let from = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
        let mut s = PyServer { child, to, from };
        anyhow::ensure!(s.line()? == "ready", "the PyTorch reference did not start");
        Ok(s)
    }

    fn line(&mut self) -> Result<String> {
        Ok(self.from.next().context("the PyTorch reference ended early")??)
    }

    /// Tokens/s of one repetition.
    fn rep(&mut self) -> Result<f64> {
        use std::io::Write;
        writeln!(self.to, "run")?;
        let v: serde_json::Value = serde_json::from_str(&self.line()?)?;
        v["tokens_per_s"].as_f64().context("no tokens_per_s")
    }

    /// Ends the server; its shares of forward, backward and optimizer time.
    fn finish(mut self) -> Result<(f64, f64, f64)> {
        drop(self.to);
        let py: serde_json::Value = serde_json::from_str(&self.from.next().context("no summary")??)?;
        anyhow::ensure!(self.child.wait()?.success(), "the PyTorch reference failed");
        let w = py["forward_s"].as_f64().unwrap_or(0.0)
            + py["backward_s"].as_f64().unwrap_or(0.0)
            + py["optimizer_s"].as_f64().unwrap_or(0.0);
        let share = |k: &str| py[k].as_f64().unwrap_or(0.0) / w.max(1e-12);
        Ok((share("forward_s"), share("backward_s"), share("optimizer_s")))
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    lm::heap::keep_freed_memory();
    let cfg = Config::load(&args.config)?;
    let tok = tokenizer_for(&cfg)?;
    let data = TokenData::load(&cfg, &tok)?;
    let flops = cfg.train_flops_per_token();
    if let Some(only) = &args.only {
        let precision = match only.as_str() {
            "fp32" => Precision::Fp32,
            "bf16" => Precision::Bf16,
            other => anyhow::bail!("--only fp32 or bf16, not {other}"),
        };
        let mut runner = LmRunner::new(&cfg, &data, precision);
        let rates: Vec<f64> = (0..args.reps).map(|_| runner.rep(args.steps)).collect();
        let s = Spread::of(&rates);
        println!(
            "lm {only}: {:.0} tokens/s ({:.0}, {:.0}), {} reps x {} steps",
            s.median, s.min, s.max, args.reps, args.steps
        );
        return Ok(());
    }

    // peaks in this run: once per shape here, then again before every round of the contenders
    // below; the peak is the best of all of them, so a host that is slow while the peak is first
    // measured (it was, once: MFU 104-167%) cannot make a share of the peak exceed 100%
    let shapes = gemm_shapes(&cfg);
    let dtypes_of_peak = [("fp32", Kind::Float), ("bf16", Kind::BFloat16)];
    let mut peak_samples: std::collections::BTreeMap<&str, Vec<f64>> = std::collections::BTreeMap::new();
    println!("matmul GFLOP/s on the model's GEMM shapes (M x K x N), median of {}", args.reps);
    for (name, kind) in dtypes_of_peak {
        let (per, best) = common::peak_gflops(kind, &shapes, args.reps);
        let cells: Vec<String> = shapes.iter().zip(&per).map(|((m, k, n), g)| format!("{m}x{k}x{n} {g:.0}")).collect();
        println!("  {name}: {}", cells.join(", "));
        peak_samples.entry(name).or_default().push(best);
    }

    let cache = tok.cache_path(&cfg.data.corpus.join("train.txt"))?;
    // every contender set up and warmed up first; then repetition r of each runs back to back
    // (in a rotating order), so a drift of the host's speed over the minutes of the run falls on
    // all contenders alike rather than on the ones that happen to run last
    let names = [
        "lm (tch) fp32",
        "lm (tch) bf16 mixed",
        "PyTorch eager fp32",
        "PyTorch bf16 autocast",
        "PyTorch eager fp32, lm's heap",
        "PyTorch bf16 autocast, lm's heap",
    ];
    let dtypes = ["fp32", "bf16", "fp32", "bf16", "fp32", "bf16"];
    let mut lm_runs = [LmRunner::new(&cfg, &data, Precision::Fp32), LmRunner::new(&cfg, &data, Precision::Bf16)];
    let mut py_runs = vec![
        PyServer::start(&args, &cache, false, false)?,
        PyServer::start(&args, &cache, true, false)?,
        PyServer::start(&args, &cache, false, true)?,
        PyServer::start(&args, &cache, true, true)?,
    ];
    let mut rates = vec![Vec::new(); names.len()];
    for rep in 0..args.reps {
        for (name, kind) in dtypes_of_peak {
            peak_samples.entry(name).or_default().push(common::peak_gflops(kind, &shapes, 1).1);
        }
        for k in 0..names.len() {
            let c = (k + rep) % names.len();
            rates[c].push(if c < 2 { lm_runs[c].rep(args.steps) } else { py_runs[c - 2].rep()? });
        }
    }
    let mut splits: Vec<(f64, f64, f64)> = lm_runs.iter().map(LmRunner::shares).collect();
    for p in py_runs.drain(..) {
        splits.push(p.finish()?);
    }
    let peak: std::collections::BTreeMap<&str, f64> =
        peak_samples.iter().map(|(k, v)| (*k, v.iter().cloned().fold(0.0, f64::max))).collect();
    for (name, v) in &peak_samples {
        let s = Spread::of(v);
        println!(
            "{name} matmul peak: best {:.0} GFLOP/s of {} measurements interleaved with the contenders (median {:.0}, min {:.0})",
            peak[name],
            v.len(),
            s.median,
            s.min
        );
    }
    println!("bf16 / fp32 peak {:.2}x", peak["bf16"] / peak["fp32"]);
    let rows: Vec<(&str, &str, Timed)> =
        (0..names.len()).map(|c| (names[c], dtypes[c], Timed { rates: rates[c].clone(), split: splits[c] })).collect();
    println!(
        "config {} ({} params, {:.1} MFLOP/token), {} reps x {} timed steps",
        cfg.name,
        cfg.n_params(),
        flops / 1e6,
        args.reps,
        args.steps
    );
    println!(
        "{:<32} {:>9} {:>21} {:>7} {:>7} {:>7} {:>8}",
        "", "tokens/s", "(min, max)", "MFU", "fwd %", "bwd %", "optim %"
    );
    let mut json_rows = Vec::new();
    for (name, dtype, t) in &rows {
        let Spread { median: med, min: lo, max: hi, .. } = Spread::of(&t.rates);
        let mfu = med * flops / (peak[dtype] * 1e9);
        println!(
            "{name:<32} {med:>9.0} {:>21} {:>6.1}% {:>6.1}% {:>6.1}% {:>7.1}%",
            format!("({lo:.0}, {hi:.0})"),
            100.0 * mfu,
            100.0 * t.split.0,
            100.0 * t.split.1,
            100.0 * t.split.2
        );
        json_rows.push(serde_json::json!({"row": name, "dtype": dtype, "tokens_per_s": t.rates, "median": med, "mfu": mfu, "split": [t.split.0, t.split.1, t.split.2]}));
    }
    let med = |i: usize| Spread::of(&rows[i].2.rates).median;
    println!("ratios (medians): lm fp32 / PyTorch fp32 {:.2}x; lm bf16 / PyTorch fp32 {:.2}x (goal >= 1.5x); lm bf16 / PyTorch bf16 autocast {:.2}x (goal >= 1.0x); lm bf16 / lm fp32 {:.2}x", med(0) / med(2), med(1) / med(2), med(1) / med(3), med(1) / med(0));
    println!("against PyTorch with lm's heap settings: lm fp32 / PyTorch fp32 {:.2}x; lm bf16 / PyTorch fp32 {:.2}x; lm bf16 / PyTorch bf16 autocast {:.2}x", med(0) / med(4), med(1) / med(4), med(1) / med(5));

    let report = serde_json::json!({
        "config": cfg.name, "config_hash": cfg.hash(), "git_commit": output::provenance::git_commit(),
        "steps": args.steps, "reps": args.reps, "peak_gflops": peak, "peak_gflops_samples": peak_samples, "flops_per_token": flops,
        "gemm_shapes": shapes, "rows": json_rows, "threads": tch::get_num_threads(),
    });
    // the headline rows of `just bench`: each of ours against its anchor and its dtype's peak
    let row = |ours: usize, anchor: usize, goal: Option<f64>| {
        let (name, dtype, t) = &rows[ours];
        Row {
            bench: "train".into(),
            measure: format!("training step, {name}"),
            unit: "tokens/s".into(),
            higher_is_better: true,
            ours: Spread::of(&t.rates),
            anchor: Some(Reference { name: rows[anchor].0.into(), median: med(anchor) }),
            bound: Some(Reference { name: format!("{dtype} matmul peak"), median: peak[dtype] * 1e9 / flops }),
            goal: goal.map(Goal::Speedup),
        }
    };
    let headline = [
        row(0, 2, None),
        row(1, 2, Some(1.5)),
        row(1, 3, Some(1.0)),
        row(0, 4, None),
        row(1, 4, None),
        row(1, 5, None),
    ];
    output::bench::write_summary(Path::new("runs/bench"), "train", &headline, report)?;
    Ok(())
}
