//! Evaluation-throughput benchmark: examples scored per second by `lm`'s packed shared-context
//! scorer (`score_groups`), by its per-request scorer (`score`, the path before packing) and by
//! the same per-request scoring in PyTorch eager (crates/lm/bench/eval_reference.py), on the same
//! model and the same tokenized requests, in one run; the log-likelihoods are compared too.
//! `just bench-eval`.
//!
//! The model is a checkpoint (`--checkpoint`) or, without one, a seeded random init of
//! `--config`'s model (throughput does not depend on the weights). The examples are the tasks of
//! the eval config when `data/tasks` holds them, else (or with `--synthetic N`) a synthetic mix of
//! N examples of each of three shapes: HellaSwag-like (context ~80 tokens, 4 options of ~25),
//! PIQA-like (~25, 2 options of ~25) and BIG-bench SVA-like (~8, 2 options of 1 token).
use anyhow::{Context, Result};
use clap::Parser;
use lm::checkpoint;
use lm::config::Config;
use lm::eval::{prepare, EvalConfig};
use lm::model::Gpt;
use lm::score::{pack_stats, pack_stats_with, score, score_groups, score_groups_with, Packing, Request, Scored};
use lm::tch::{self, nn::VarStore, Device};
use lm::tokenize::Tok;
use output::bench::{Goal, Reference, Row, Spread};
use rand::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Instant;

mod common;

#[derive(Parser)]
struct Args {
    /// A checkpoint sidecar, e.g. runs/default/checkpoints/step_001000.json; without it, a
    /// seeded random init of --config's model.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Run config whose model is initialised when no checkpoint is given.
    #[arg(long, default_value = "configs/default.toml")]
    config: PathBuf,
    #[arg(long, default_value = "configs/eval.toml")]
    eval_config: PathBuf,
    /// Use the synthetic mix with this many examples per shape even if the tasks exist.
    #[arg(long)]
    synthetic: Option<usize>,
    /// Rounds of one timed pass of each implementation, interleaved, after one warm-up pass
    /// each; each figure is their median (min, max beside it).
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Examples per task at most (default: the eval config's).
    #[arg(long)]
    max_examples: Option<usize>,
    /// Tokens per batch (default: the eval config's).
    #[arg(long)]
    batch_tokens: Option<usize>,
    /// Also time other row layouts of the packed scorer (interleaved with the default): a few
    /// preset ones, or those given with --layout.
    #[arg(long)]
    layouts: bool,
    /// A row layout to time, "PIECE:BIN:FILL" (Packing's piece_contexts, bin_contexts, min_fill);
    /// repeatable.
    #[arg(long)]
    layout: Vec<String>,
    /// Intra-op threads of both sides (default: libtorch's, the physical cores); 1 is steadier
    /// on a host shared with other work.
    #[arg(long)]
    threads: Option<i32>,
    /// Also time the packed scorer with bf16 weights and activations (fp32 log-softmax).
    #[arg(long)]
    bf16: bool,
}

/// A seeded stream for the synthetic examples.
struct Rng(ChaCha8Rng);
impl Rng {
    /// A length around `mean`, +-25%, at least 1.
    fn around(&mut self, mean: usize) -> usize {
        let spread = mean / 4;
        self.0.gen_range(mean - spread..=mean + spread).max(1)
    }
    fn tokens(&mut self, n: usize, vocab: i64) -> Vec<u32> {
        (0..n).map(|_| self.0.gen_range(0..vocab as u32)).collect()
    }
}

/// (name, groups): `n` examples of each shape (context tokens, options, option tokens).
fn synthetic(n: usize, vocab: i64) -> Vec<(String, Vec<Vec<Request>>)> {
    let mut rng = Rng(ChaCha8Rng::seed_from_u64(0x5eed_1234_abcd_ef01));
    [("hellaswag-like", 80, 4, 25), ("piqa-like", 25, 2, 25), ("sva-like", 8, 2, 1)]
        .into_iter()
        .map(|(name, ctx, options, cont)| {
            let groups = (0..n)
                .map(|_| {
                    let len = rng.around(ctx);
                    let context = rng.tokens(len, vocab);
                    (0..options)
                        .map(|_| {
                            let len = if cont == 1 { 1 } else { rng.around(cont) };
                            Request { context: context.clone(), continuation: rng.tokens(len, vocab) }
                        })
                        .collect()
                })
                .collect();
            (name.to_string(), groups)
        })
        .collect()
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

fn main() -> Result<()> {
    let args = Args::parse();
    lm::heap::keep_freed_memory();
    if let Some(n) = args.threads {
        tch::set_num_threads(n);
    }
    let mut eval_cfg = EvalConfig::load(&args.eval_config)?;
    eval_cfg.max_examples = args.max_examples.unwrap_or(eval_cfg.max_examples);
    eval_cfg.batch_tokens = args.batch_tokens.unwrap_or(eval_cfg.batch_tokens);
    let (config, step) = match &args.checkpoint {
        Some(p) => {
            let meta = checkpoint::read_sidecar(p)?;
            (meta.config.clone(), Some(meta.step))
        }
        None => (Config::load(&args.config)?, None),
    };
    let (mc, vocab) = (&config.model, config.data.vocab_size);
    let mut vs = VarStore::new(Device::Cpu);
    tch::manual_seed(config.init_seed() as i64);
    let model = Gpt::new(&vs.root(), mc, vocab);
    let dir = tempfile::tempdir()?;
    let weights = match &args.checkpoint {
        Some(p) => {
            let tok = Tok::load(&config.data.tokenizer)?;
            let meta = checkpoint::load(p, &mut vs, &tok.sha256)?;
            p.parent().unwrap().join(&meta.weights_file)
        }
        None => {
            let w = dir.path().join("init.safetensors");
            checkpoint::write_tensors(&w, &checkpoint::named_weights(&vs))?;
            w
        }
    };
    let tasks = match args.synthetic {
        Some(_) => None,
        None => tasks::load_all(&eval_cfg.tasks).ok(),
    };
    let (source, sets) = match tasks {
        Some(t) => {
            let tok = Tok::load(&config.data.tokenizer)?;
            let prepared = prepare(&t, &tok, &eval_cfg)?;
            (
                format!("tasks of {} ({} per task at most)", eval_cfg.tasks.display(), eval_cfg.max_examples),
                prepared.into_iter().map(|p| (p.name, p.requests)).collect::<Vec<_>>(),
            )
        }
        None => {
            let n = args.synthetic.unwrap_or(128);
            (
                format!(
                    "synthetic mix, {n} examples per shape (no task manifest in {} or --synthetic)",
                    eval_cfg.tasks.display()
                ),
                synthetic(n, vocab),
            )
        }
    };
    let groups: Vec<&[Request]> = sets.iter().flat_map(|(_, g)| g.iter().map(Vec::as_slice)).collect();
    let flat: Vec<Request> = groups.iter().flat_map(|g| g.iter().cloned()).collect();
    let n_examples = groups.len();
    let bt = eval_cfg.batch_tokens;
    let context = mc.context as usize;
    let stats = pack_stats(&groups, context, bt)?;

    let logliks = |s: &[Vec<Scored>]| -> Vec<f64> { s.iter().flatten().map(|x| x.loglik).collect() };

    // the PyTorch reference loads the same weights and requests, warms up, then times one pass
    // per "run" we send, so that its passes interleave with ours under the same load
    let rpath = dir.path().join("requests.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&rpath)?);
    for r in &flat {
        writeln!(f, "{}", serde_json::json!([r.context, r.continuation]))?;
    }
    drop(f);
    let cfg_path = dir.path().join("config.toml");
    std::fs::write(&cfg_path, toml::to_string(&config)?)?;
    let mut child = std::process::Command::new(".venv/bin/python")
        .arg("crates/lm/bench/eval_reference.py")
        .arg("--config")
        .arg(&cfg_path)
        .arg("--weights")
        .arg(&weights)
        .arg("--requests")
        .arg(&rpath)
        .args(["--batch-tokens", &bt.to_string(), "--serve", "--threads", &tch::get_num_threads().to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("cannot run the PyTorch reference")?;
    let mut to_py = child.stdin.take().unwrap();
    let mut from_py = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut read_py =
        || -> Result<String> { from_py.next().context("the PyTorch reference ended early")?.map_err(Into::into) };
    anyhow::ensure!(read_py()? == "ready", "the PyTorch reference did not start");

    let mut packed = score_groups(&model, &groups, bt, Device::Cpu)?; // warm-up
    let mut old = score(&model, &flat, bt, Device::Cpu)?;
    let (mut packed_t, mut old_t, mut py_t) = (vec![], vec![], vec![]);
    for _ in 0..args.repeats.max(1) {
        let t = Instant::now();
        packed = score_groups(&model, &groups, bt, Device::Cpu)?;
        packed_t.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        old = score(&model, &flat, bt, Device::Cpu)?;
        old_t.push(t.elapsed().as_secs_f64());
        writeln!(to_py, "run")?;
        let v: serde_json::Value = serde_json::from_str(&read_py()?)?;
        py_t.push(v["seconds"].as_f64().context("no seconds")?);
    }
    let (packed_s, old_s, py_s) = (Spread::of(&packed_t).median, Spread::of(&old_t).median, Spread::of(&py_t).median);
    drop(to_py);
    let py: serde_json::Value = serde_json::from_str(&read_py()?)?;
    anyhow::ensure!(child.wait()?.success(), "the PyTorch reference failed");
    let py_ll: Vec<f64> = py["logliks"].as_array().context("no logliks")?.iter().map(|v| v.as_f64().unwrap()).collect();
    let packed_ll = logliks(&packed);
    let old_ll: Vec<f64> = old.iter().map(|x| x.loglik).collect();
    let argmax_same = packed.iter().flatten().zip(&old).all(|(a, b)| a.argmax == b.argmax && a.greedy == b.greedy);
    let pred = |g: &[Scored]| records::argmax(&g.iter().map(|x| x.loglik).collect::<Vec<_>>());
    let old_groups: Vec<&[Scored]> = {
        let mut rest = old.as_slice();
        groups
            .iter()
            .map(|g| {
                let (a, b) = rest.split_at(g.len());
                rest = b;
                a
            })
            .collect()
    };
    let pred_same = packed.iter().zip(&old_groups).filter(|(a, b)| pred(a) == pred(b)).count();

    let what = match (&args.checkpoint, step) {
        (Some(p), Some(s)) => format!("checkpoint {} (step {s})", p.display()),
        _ => format!("random init of {} (seed {})", args.config.display(), config.init_seed()),
    };
    println!("{what}, {} params, context {context}; {source}", config.n_params());
    for (name, g) in &sets {
        let s = pack_stats(g, context, bt)?;
        println!(
            "  {name:<16} {:>5} examples {:>5} requests, {:>7} tokens per request -> {:>7} packed",
            g.len(),
            s.requests,
            s.request_tokens,
            s.tokens
        );
    }
    println!(
        "{n_examples} examples, {} requests ({} packed in {} rows, {} per request); batch_tokens {bt}, median of {} interleaved rounds after a warm-up, threads {} (PyTorch {})",
        stats.requests, stats.packed, stats.rows, stats.requests - stats.packed, args.repeats, tch::get_num_threads(), py["threads"]
    );
    println!(
        "{:<26} {:>26} {:>12} {:>11} {:>9} {:>10}",
        "", "seconds (min, max)", "examples/s", "tokens run", "padding", "vs PyTorch"
    );
    let line = |name: &str, t: &[f64], tokens: usize, pad: f64| {
        let Spread { median: s, min, max, .. } = Spread::of(t);
        println!(
            "{name:<26} {:>26} {:>12.1} {tokens:>11} {:>8.1}% {:>9.2}x",
            format!("{s:.3} ({min:.3}, {max:.3})"),
            n_examples as f64 / s,
            100.0 * pad,
            py_s / s
        )
    };
    line("lm packed (score_groups)", &packed_t, stats.tokens, stats.padding_share());
    line("lm per-request (score)", &old_t, stats.request_tokens, stats.request_padding_share());
    line("PyTorch eager, per-request", &py_t, stats.request_tokens, stats.request_padding_share());
    println!("packed / per-request: {:.2}x; packed / PyTorch: {:.2}x", old_s / packed_s, py_s / packed_s);
    // matmul work: every input token through the blocks, every scored position through the
    // (vocab x d_model) output layer, which packing does not share
    let (d, ff, l) = (mc.d_model as f64, mc.d_ff as f64, mc.n_layers as f64);
    let body = l * (4.0 * d * d + 3.0 * d * ff);
    let head = d * vocab as f64;
    let (pw, rw) = (
        stats.slots as f64 * body + stats.head_rows as f64 * head,
        stats.request_slots as f64 * body + stats.request_head_rows as f64 * head,
    );
    println!(
        "matmul MACs (slots x blocks + scored positions x output layer): packed {:.0} G ({:.0}% output layer, {} positions), per-request {:.0} G ({} positions): {:.2}x less work",
        pw / 1e9, 100.0 * stats.head_rows as f64 * head / pw, stats.head_rows, rw / 1e9, stats.request_head_rows, rw / pw
    );
    println!(
        "max |log-likelihood difference| over {} requests: packed vs per-request {:.2e}, packed vs PyTorch {:.2e}, per-request vs PyTorch {:.2e}; argmax tokens identical: {argmax_same}; predictions identical on {pred_same} of {n_examples} examples",
        flat.len(), max_diff(&packed_ll, &old_ll), max_diff(&packed_ll, &py_ll), max_diff(&old_ll, &py_ll)
    );
    // the bound: this machine's fp32 matmul peak on the scorer's GEMM shapes (a batch of
    // batch_tokens rows through the blocks and the output layer), as examples/s at the packed
    // scorer's work per example (2 FLOPs per MAC)
    let (d, f, v, rows) = (mc.d_model, mc.d_ff, vocab, bt as i64);
    let (_, peak) = common::peak_gflops(
        tch::Kind::Float,
        &[(rows, d, 3 * d), (rows, d, d), (rows, d, 2 * f), (rows, f, d), (rows, d, v)],
        args.repeats,
    );
    let bound = peak * 1e9 / (2.0 * pw / n_examples as f64);
    println!("fp32 matmul peak on the scorer's shapes: {peak:.0} GFLOP/s = {bound:.0} examples/s at the packed work per example; packed at {:.0}% of it", 100.0 * n_examples as f64 / packed_s / bound);
    let max_ll_diff = max_diff(&packed_ll, &py_ll);
    anyhow::ensure!(
        max_ll_diff <= 1e-4,
        "the packed scorer's log-likelihoods differ from PyTorch's by {max_ll_diff:.2e} (> 1e-4)"
    );
    let rate = |t: &[f64]| t.iter().map(|s| n_examples as f64 / s).collect::<Vec<_>>();
    let anchor = Reference { name: "PyTorch eager fp32, per-request".into(), median: Spread::of(&rate(&py_t)).median };
    let bound = Reference { name: "fp32 matmul peak".into(), median: bound };
    let row = |measure: &str, t: &[f64], goal: Option<f64>| Row {
        bench: "eval".into(),
        measure: measure.into(),
        unit: "examples/s".into(),
        higher_is_better: true,
        ours: Spread::of(&rate(t)),
        anchor: Some(anchor.clone()),
        bound: Some(bound.clone()),
        goal: goal.map(Goal::Speedup),
    };
    let details = serde_json::json!({
        "model": what, "examples": n_examples, "requests": stats.requests, "source": source, "batch_tokens": bt,
        "threads": tch::get_num_threads(), "peak_gflops_fp32": peak, "max_loglik_diff_vs_pytorch": max_ll_diff,
        "predictions_identical": pred_same, "seconds": {"packed": packed_t, "per_request": old_t, "pytorch": py_t},
    });
    output::bench::write_summary(
        std::path::Path::new("runs/bench"),
        "eval",
        &[row("scoring, lm packed fp32", &packed_t, Some(3.0)), row("scoring, lm per-request fp32", &old_t, None)],
        details,
    )?;
    if args.layouts || !args.layout.is_empty() {
        let mut layouts: Vec<(String, Packing)> = vec![
            (
                "one piece per row, no fill bound".into(),
                Packing { piece_contexts: 2.0, bin_contexts: 0.0, min_fill: 0.0 },
            ),
            ("bins of 1 context".into(), Packing { bin_contexts: 1.0, ..Packing::default() }),
            ("bins of 1/4 context".into(), Packing { bin_contexts: 0.25, ..Packing::default() }),
        ];
        if !args.layout.is_empty() {
            layouts = args
                .layout
                .iter()
                .map(|l| {
                    let v: Vec<f64> =
                        l.split(':').map(|x| x.parse().context("--layout PIECE:BIN:FILL")).collect::<Result<_>>()?;
                    anyhow::ensure!(v.len() == 3, "--layout PIECE:BIN:FILL");
                    Ok((l.clone(), Packing { piece_contexts: v[0], bin_contexts: v[1], min_fill: v[2] }))
                })
                .collect::<Result<_>>()?;
        }
        let mut best = vec![f64::INFINITY; layouts.len() + 1];
        for _ in 0..args.repeats.max(1) {
            for (k, how) in std::iter::once(&Packing::default()).chain(layouts.iter().map(|(_, h)| h)).enumerate() {
                let t = Instant::now();
                score_groups_with(&model, &groups, bt, Device::Cpu, how)?;
                best[k] = best[k].min(t.elapsed().as_secs_f64());
            }
        }
        println!("layouts of the packed scorer (interleaved rounds, best of {}):", args.repeats);
        for (k, (name, how)) in std::iter::once(("default".to_string(), Packing::default())).chain(layouts).enumerate()
        {
            let st = pack_stats_with(&groups, context, bt, &how)?;
            println!(
                "  {name:<28} {:>8.3} s {:>8.1} examples/s {:>6} rows {:>7} tokens {:>5.1}% padding",
                best[k],
                n_examples as f64 / best[k],
                st.rows,
                st.tokens,
                100.0 * st.padding_share()
            );
        }
    }
    if args.bf16 {
        let mut vs16 = VarStore::new(Device::Cpu);
        let model16 = Gpt::new(&vs16.root(), mc, vocab);
        vs16.copy(&vs)?;
        vs16.bfloat16();
        let mut out16 = score_groups(&model16, &groups, bt, Device::Cpu)?;
        let (mut s16, mut s32) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..args.repeats.max(1) {
            let t = Instant::now();
            out16 = score_groups(&model16, &groups, bt, Device::Cpu)?;
            s16 = s16.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            score_groups(&model, &groups, bt, Device::Cpu)?;
            s32 = s32.min(t.elapsed().as_secs_f64());
        }
        let ll16 = logliks(&out16);
        let flips = out16.iter().zip(&packed).filter(|(a, b)| pred(a) != pred(b)).count();
        println!(
            "bf16 packed (not default; weights and activations bf16, log-softmax fp32): {s16:.3} s, {:.1} examples/s, {:.2}x fp32 packed (interleaved), {:.2}x PyTorch; max |loglik - fp32| {:.2e}, {flips} of {n_examples} predictions differ",
            n_examples as f64 / s16, s32 / s16, py_s / s16, max_diff(&ll16, &packed_ll)
        );
    }
    Ok(())
}
