//! Greedy-decoding benchmark: tokens/s of `lm`'s batched greedy decoding with its key/value cache
//! (`lm::generate`) against transformers' `generate` (`do_sample=False`) on the same checkpoint,
//! exported by `lm export` as a Hugging Face Llama folder, with the same prompts, batches and
//! threads, CPU, fp32, in one run: the two sides' repetitions interleave (the transformers side
//! is a warmed-up server, crates/lm/examples/bench_generate.py, timing one pass per request,
//! model load excluded). Also checked: **parity**, the generated tokens identical to
//! transformers' on every prompt (>= 99% required, fp32 ties aside: where a prompt differs,
//! the top-2 logits at the first differing position, ours and transformers', are compared); and
//! the **memory bound**, the bytes of weights and KV cache one decoding pass reads per
//! generated token against this machine's memory-copy rate (measured here). And **bf16**: the
//! same checkpoint cast to bf16 (weights, activations and KV cache; `VarStore::bfloat16`),
//! timed in the same interleaving, its tokens compared with fp32's prompt by prompt: issue 27
//! allows bf16 decoding only where it changes no output (the accuracy check), so `lm` decodes in
//! fp32 unless this check shows every prompt identical.
//!
//! Prompts: the first sentences, without their end mark, of the first paragraphs of `--corpus`
//! (the validation split, held out from training) that fit the model's context with room for
//! the new tokens (no truncation), in file order, at least 4 tokens each. Decoding runs all
//! `--max-new-tokens` tokens (the run's tokenizers have no end-of-text token; the transformers
//! side clears the eos `lm export` declares). lm's time includes what its `generate` does per
//! step besides the model (decoding each row's text for stop strings); neither side's includes
//! tokenizing the prompts. A step of `scripts/bench.sh` (`just bench`); writes
//! runs/bench/generate.summary.json (`--out`). `--threads 1` is steadier on a shared host.
use anyhow::{Context, Result};
use clap::Parser;
use lm::generate::{generate_ids, load, Generation, Options};
use lm::tch::{self, Device, Kind, Tensor};
use output::bench::{Reference, Row, Spread};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// The checkpoint (sidecar) both sides decode with.
    #[arg(long, default_value = "runs/smoke/checkpoints/step_000200.json")]
    checkpoint: PathBuf,
    /// Held-out text the prompts are taken from (paragraphs separated by blank lines).
    #[arg(long, default_value = "data/corpus/validation.txt")]
    corpus: PathBuf,
    #[arg(long, default_value_t = 64)]
    prompts: usize,
    #[arg(long, default_value_t = 8)]
    batch_size: usize,
    #[arg(long, default_value_t = 32)]
    max_new_tokens: usize,
    /// Timed passes of each side, interleaved, after one warm-up pass each.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Intra-op threads of both sides (default: libtorch's).
    #[arg(long)]
    threads: Option<i32>,
    /// Where the summary row goes.
    #[arg(long, default_value = "runs/bench")]
    out: PathBuf,
}

/// The first sentence of a paragraph without its end mark (so that the model continues the
/// sentence; after a full stop the smoke model only emits newlines): up to the first ". ", "? "
/// or "! ", else the whole paragraph, less a final ".", "?" or "!".
fn first_sentence(p: &str) -> &str {
    let p = p.trim();
    let s = [". ", "? ", "! "].iter().filter_map(|m| p.find(m)).min().map_or(p, |i| &p[..i]);
    s.strip_suffix(['.', '?', '!']).unwrap_or(s)
}

/// Seconds for `calls` copies of `src` into `dst`, split over `threads` threads (each copies
/// its part `calls` times; spawned once).
fn copy_secs(src: &[u8], dst: &mut [u8], threads: usize, calls: usize) -> f64 {
    let chunk = src.len().div_ceil(threads.max(1));
    let t = Instant::now();
    std::thread::scope(|s| {
        for (a, b) in src.chunks(chunk).zip(dst.chunks_mut(chunk)) {
            s.spawn(move || {
                for _ in 0..calls {
                    b.copy_from_slice(std::hint::black_box(a));
                    std::hint::black_box(&mut *b);
                }
            });
        }
    });
    t.elapsed().as_secs_f64()
}

/// Memory-copy rate in bytes moved (read + written) per second: the median of `reps` timings,
/// each of enough copies of a `bytes` buffer to move ~512 MB.
fn copy_rate(bytes: usize, threads: usize, reps: usize) -> f64 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    copy_secs(&src, &mut dst, threads, 1); // fault the pages in
    let calls = (256usize << 20).div_ceil(bytes).max(1);
    let rates: Vec<f64> =
        (0..reps.max(1)).map(|_| (2 * bytes * calls) as f64 / copy_secs(&src, &mut dst, threads, calls)).collect();
    Spread::of(&rates).median
}

/// Forward passes per run: `n_new` for each batch.
fn order_passes(ids: &[Vec<u32>], batch: usize, n_new: usize) -> usize {
    ids.len().div_ceil(batch.max(1)) * n_new
}

/// The gap between the two largest logits of `model` after `tokens` (one row, no padding).
fn top2_gap(model: &lm::model::Gpt, tokens: &[u32]) -> Result<f64> {
    let ids: Vec<i64> = tokens.iter().map(|&t| t as i64).collect();
    let logits = tch::no_grad(|| model.forward(&Tensor::from_slice(&ids).view([1, -1]), false));
    let (top, _) = logits.get(0).get(ids.len() as i64 - 1).to_kind(Kind::Float).topk(2, -1, true, true);
    let v = Vec::<f32>::try_from(top)?;
    Ok((v[0] - v[1]) as f64)
}

fn main() -> Result<()> {
    let args = Args::parse();
    lm::heap::keep_freed_memory();
    if let Some(n) = args.threads {
        tch::set_num_threads(n);
    }
    let threads = tch::get_num_threads();
    let l = load(&args.checkpoint, None, Device::Cpu)?;
    let (mc, vocab) = (&l.model.config, l.meta.config.data.vocab_size);
    let n_new = args.max_new_tokens;
    let room = mc.context as usize - n_new;

    // the prompts: first sentences of paragraphs of held-out text, kept whole (no truncation)
    let text =
        std::fs::read_to_string(&args.corpus).with_context(|| format!("{}: cannot read", args.corpus.display()))?;
    let (mut texts, mut ids) = (Vec::new(), Vec::new());
    for para in text.split("\n\n") {
        let s = first_sentence(para);
        let t = l.tok.encode(s)?;
        if (4..=room).contains(&t.len()) {
            texts.push(s.to_string());
            ids.push(t);
        }
        if ids.len() == args.prompts {
            break;
        }
    }
    anyhow::ensure!(
        ids.len() == args.prompts,
        "{}: only {} paragraphs open with a sentence of 4 to {room} tokens, {} wanted",
        args.corpus.display(),
        ids.len(),
        args.prompts
    );
    let prompt_tokens: usize = ids.iter().map(Vec::len).sum();

    // the checkpoint as `lm export` writes it, and the transformers side on it
    let dir = tempfile::tempdir()?;
    let hf = dir.path().join("hf");
    lm::export::export(&args.checkpoint, &hf, None, false)?;
    let (ids_path, texts_path) = (dir.path().join("prompts.json"), dir.path().join("texts.json"));
    std::fs::write(&ids_path, serde_json::to_string(&ids)?)?;
    std::fs::write(&texts_path, serde_json::to_string(&texts)?)?;
    let mut child = std::process::Command::new(".venv/bin/python")
        .arg("crates/lm/examples/bench_generate.py")
        .arg("--model")
        .arg(&hf)
        .arg("--prompts")
        .arg(&ids_path)
        .arg("--texts")
        .arg(&texts_path)
        .args(["--max-new-tokens", &n_new.to_string(), "--batch-size", &args.batch_size.to_string()])
        .args(["--threads", &threads.to_string()])
        .envs([("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_VERBOSITY", "error"), ("HF_HUB_DISABLE_PROGRESS_BARS", "1")])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("cannot run the transformers side (.venv/bin/python crates/lm/examples/bench_generate.py)")?;
    let mut to_py = child.stdin.take().unwrap();
    let mut from_py = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut read_py =
        || -> Result<String> { from_py.next().context("the transformers side ended early")?.map_err(Into::into) };
    anyhow::ensure!(read_py()? == "ready", "the transformers side did not start");

    let opts = Options { max_new_tokens: n_new, until: vec![], batch_size: args.batch_size, cache: true };
    let decode = |t: &[u32]| l.tok.decode(t);
    let run = || generate_ids(&l.model, &ids, &opts, lm::generate::end_of_text(&l.tok), decode, Device::Cpu);
    let mut l16 = load(&args.checkpoint, None, Device::Cpu)?;
    l16.vs.bfloat16();
    let run16 = || generate_ids(&l16.model, &ids, &opts, lm::generate::end_of_text(&l16.tok), decode, Device::Cpu);
    let mut ours: Vec<Generation> = run()?; // warm-up
    let mut ours16: Vec<Generation> = run16()?;
    let (mut ours_t, mut py_t, mut bf16_t) = (vec![], vec![], vec![]);
    for _ in 0..args.repeats.max(1) {
        let t = Instant::now();
        ours = run()?;
        ours_t.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        ours16 = run16()?;
        bf16_t.push(t.elapsed().as_secs_f64());
        writeln!(to_py, "run")?;
        let v: serde_json::Value = serde_json::from_str(&read_py()?)?;
        py_t.push(v["seconds"].as_f64().context("no seconds")?);
    }
    drop(to_py);
    let py: serde_json::Value = serde_json::from_str(&read_py()?)?;
    anyhow::ensure!(child.wait()?.success(), "the transformers side failed");
    let theirs: Vec<Vec<u32>> = serde_json::from_value(py["tokens"].clone()).context("no tokens")?;
    let gaps: Vec<Vec<f64>> = serde_json::from_value(py["top2_gaps"].clone()).context("no top2_gaps")?;
    anyhow::ensure!(theirs.len() == ids.len() && gaps.len() == ids.len(), "the transformers side lost prompts");

    // parity, and at the first differing token of each differing prompt the top-2 logit gaps
    const TIE: f64 = 1e-5;
    let mut identical = 0;
    let mut mismatches = vec![];
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        match a.tokens.iter().zip(b).position(|(x, y)| x != y) {
            None if a.tokens.len() == b.len() => identical += 1,
            at => {
                let j = at.unwrap_or(a.tokens.len().min(b.len()));
                let prefix: Vec<u32> = ids[i].iter().chain(&a.tokens[..j]).copied().collect();
                let (g_ours, g_theirs) = (top2_gap(&l.model, &prefix)?, gaps[i].get(j).copied().unwrap_or(f64::NAN));
                mismatches.push(serde_json::json!({
                    "prompt": i, "text": texts[i], "position": j, "ours": a.tokens.get(j), "transformers": b.get(j),
                    "top2_gap_ours": g_ours, "top2_gap_transformers": g_theirs,
                    "tie": g_ours <= TIE || g_theirs <= TIE,
                }));
            }
        }
    }
    let ties = mismatches.iter().filter(|m| m["tie"] == true).count();
    // bf16 against fp32: prompts whose generated tokens are identical, and where the others part
    let bf16_identical = ours.iter().zip(&ours16).filter(|(a, b)| a.tokens == b.tokens).count();
    let bf16_first_diff: Vec<usize> = ours
        .iter()
        .zip(&ours16)
        .filter(|(a, b)| a.tokens != b.tokens)
        .map(|(a, b)| {
            a.tokens.iter().zip(&b.tokens).position(|(x, y)| x != y).unwrap_or(a.tokens.len().min(b.tokens.len()))
        })
        .collect();
    let n = ids.len();
    let min_gap = gaps.iter().flatten().cloned().fold(f64::INFINITY, f64::min);

    // the memory bound: each pass of a batch reads every weight once (the tied embedding whole,
    // as the output layer) and, after the prompt pass, each row's cached keys and values of
    // every column so far (padding columns included) in every layer
    let weight_bytes: usize = l.vs.variables().values().map(|t| t.numel() * t.kind().elt_size_in_bytes()).sum();
    let col_bytes = (mc.n_layers * 2 * mc.d_model) as usize * 4; // one column's K and V, all layers
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
    let (mut w_read, mut kv_read) = (0usize, 0usize);
    for chunk in order.chunks(args.batch_size.max(1)) {
        let w = chunk.iter().map(|&i| ids[i].len()).max().unwrap();
        w_read += n_new * weight_bytes;
        kv_read += (1..n_new).map(|s| chunk.len() * (w + s) * col_bytes).sum::<usize>();
    }
    let generated = n * n_new;
    let per_token = (w_read + kv_read) as f64 / generated as f64;
    let copy_dram = copy_rate(256 << 20, threads as usize, args.repeats);
    // the same copy on a buffer the size of one batch's working set (weights + its full cache),
    // which fits the caches of most CPUs: the tighter-to-reach, higher ceiling
    let working = weight_bytes + args.batch_size * (room + n_new) * col_bytes;
    let copy_cache = copy_rate(working, threads as usize, args.repeats);
    let (ceiling, ceiling_cache) = (copy_dram / per_token, copy_cache / per_token);

    let rate = |t: &[f64]| t.iter().map(|s| generated as f64 / s).collect::<Vec<_>>();
    let (ours_r, py_r) = (Spread::of(&rate(&ours_t)), Spread::of(&rate(&py_t)));
    let ratios: Vec<f64> = py_t.iter().zip(&ours_t).map(|(p, o)| p / o).collect();
    let ratio = Spread::of(&ratios);
    println!(
        "checkpoint {} (step {}), {} params (d_model {}, {} layers, context {}, vocab {vocab}); {n} prompts from {} ({prompt_tokens} tokens, {}-{} each), batch {}, {n_new} new tokens each ({generated} per pass), threads {threads} (transformers {}, {} attention, transformers {}, torch {})",
        args.checkpoint.display(),
        l.meta.step,
        l.meta.config.n_params(),
        mc.d_model,
        mc.n_layers,
        mc.context,
        args.corpus.display(),
        ids.iter().map(Vec::len).min().unwrap(),
        ids.iter().map(Vec::len).max().unwrap(),
        args.batch_size,
        py["threads"],
        py["attn_implementation"].as_str().unwrap_or("?"),
        py["transformers"].as_str().unwrap_or("?"),
        py["torch"].as_str().unwrap_or("?"),
    );
    println!("median of {} interleaved passes after a warm-up each (min, max):", ours_t.len());
    println!("{:<40} {:>26} {:>28}", "", "seconds per pass", "tokens/s");
    let line = |name: &str, t: &[f64], r: &Spread| {
        let s = Spread::of(t);
        println!(
            "{name:<40} {:>26} {:>28}",
            format!("{:.3} ({:.3}, {:.3})", s.median, s.min, s.max),
            format!("{:.0} ({:.0}, {:.0})", r.median, r.min, r.max)
        );
    };
    line("lm generate (KV cache) fp32", &ours_t, &ours_r);
    line("transformers generate (greedy) fp32", &py_t, &py_r);
    let bf16_r = Spread::of(&rate(&bf16_t));
    line("lm generate (KV cache) bf16", &bf16_t, &bf16_r);
    let passes = order_passes(&ids, args.batch_size, n_new);
    println!(
        "one decoding step (a pass of one batch, {passes} per run): lm {:.3} ms, transformers {:.3} ms (medians)",
        1e3 * Spread::of(&ours_t).median / passes as f64,
        1e3 * Spread::of(&py_t).median / passes as f64
    );
    println!(
        "lm / transformers: {:.2}x on medians; per interleaved pair {:.2}x ({:.2}, {:.2})",
        ours_r.median / py_r.median,
        ratio.median,
        ratio.min,
        ratio.max
    );
    println!(
        "parity: tokens identical to transformers' on {identical} of {n} prompts ({:.1}%); {} differ, {ties} of them fp32 ties (top-2 logits within {TIE:.0e} at the first differing token); smallest top-2 logit gap over all {} of transformers' steps: {min_gap:.3}; transformers' tokenizer gives lm's prompt ids on {} of {n}",
        100.0 * identical as f64 / n as f64,
        mismatches.len(),
        gaps.iter().map(Vec::len).sum::<usize>(),
        py["tokenizer_identical"],
    );
    let bf16_ratio = Spread::of(&ours_t.iter().zip(&bf16_t).map(|(a, b)| a / b).collect::<Vec<_>>());
    println!(
        "bf16 against fp32 (the accuracy check of bf16 decoding): tokens identical on {bf16_identical} of {n} prompts{}; speed bf16 / fp32 per interleaved pair {:.2}x ({:.2}, {:.2}) -> {}",
        if bf16_first_diff.is_empty() { String::new() } else { format!(" (the others part at new token {:?})", bf16_first_diff) },
        bf16_ratio.median,
        bf16_ratio.min,
        bf16_ratio.max,
        if bf16_identical == n { "bf16 changes no output here" } else { "bf16 changes outputs: lm decodes in fp32" }
    );
    for (t, g) in texts.iter().zip(&ours).take(2) {
        println!("  e.g. {t:?} -> {:?}", g.text);
    }
    for m in &mismatches {
        println!("  mismatch: {m}");
    }
    println!(
        "memory bound: {:.1} KB read per generated token ({:.1} KB of weights, {:.1} KB per pass of a batch of {}, + {:.1} KB of KV cache); memory copy ({threads} threads) {:.1} GB/s on 256 MB -> {:.0} tokens/s ceiling, lm at {:.1}% of it; on a {:.2} MB buffer (one batch's weights + cache, cache-resident) {:.1} GB/s -> {:.0} tokens/s, lm at {:.1}%",
        per_token / 1e3,
        w_read as f64 / generated as f64 / 1e3,
        weight_bytes as f64 / 1e3,
        args.batch_size,
        kv_read as f64 / generated as f64 / 1e3,
        copy_dram / 1e9,
        ceiling,
        100.0 * ours_r.median / ceiling,
        working as f64 / 1e6,
        copy_cache / 1e9,
        ceiling_cache,
        100.0 * ours_r.median / ceiling_cache,
    );
    let share = identical as f64 / n as f64;
    anyhow::ensure!(
        share >= 0.99 || identical + ties == n,
        "parity: lm's greedy tokens are identical to transformers' on {identical} of {n} prompts (< 99%), and only {ties} of the {} differences are fp32 ties",
        mismatches.len()
    );
    let row = Row {
        bench: "generate".into(),
        measure: format!("greedy decoding, lm KV cache fp32, batch {}", args.batch_size),
        unit: "tokens/s".into(),
        higher_is_better: true,
        ours: ours_r,
        anchor: Some(Reference { name: "transformers generate fp32".into(), median: py_r.median }),
        bound: Some(Reference { name: "memory bound (weights + KV per token at memcpy rate)".into(), median: ceiling }),
        goal: None,
    };
    let row16 = Row {
        bench: "generate".into(),
        measure: format!(
            "greedy decoding, lm KV cache bf16 ({bf16_identical}/{n} prompts as fp32), batch {}",
            args.batch_size
        ),
        unit: "tokens/s".into(),
        higher_is_better: true,
        ours: bf16_r,
        anchor: Some(Reference { name: "lm fp32".into(), median: ours_r.median }),
        bound: None,
        goal: None,
    };
    let details = serde_json::json!({
        "checkpoint": args.checkpoint, "step": l.meta.step, "prompts": n, "prompt_tokens": prompt_tokens,
        "source": args.corpus, "batch_size": args.batch_size, "max_new_tokens": n_new, "threads": threads,
        "seconds": {"lm": ours_t, "transformers": py_t, "lm_bf16": bf16_t}, "ratio_per_pair": ratio,
        "bf16": {"identical_to_fp32": bf16_identical, "prompts": n, "first_differing_token": bf16_first_diff, "speed_over_fp32_per_pair": bf16_ratio},
        "parity": {"identical": identical, "prompts": n, "ties": ties, "tie_threshold": TIE, "mismatches": mismatches,
                   "min_top2_gap_transformers": min_gap, "tokenizer_identical": py["tokenizer_identical"]},
        "memory_bound": {"bytes_per_token": per_token, "weight_bytes_per_token": w_read as f64 / generated as f64, "kv_bytes_per_token": kv_read as f64 / generated as f64, "weight_bytes": weight_bytes, "copy_bytes_per_s": copy_dram,
                         "tokens_per_s": ceiling, "cache_resident_copy_bytes_per_s": copy_cache,
                         "cache_resident_buffer_bytes": working, "cache_resident_tokens_per_s": ceiling_cache},
        "transformers": {"version": py["transformers"], "torch": py["torch"], "attn_implementation": py["attn_implementation"]},
    });
    let path = output::bench::write_summary(&args.out, "generate", &[row, row16], details)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
