//! Greedy decoding of free text, batched, with a per-layer key/value cache, following
//! lm-evaluation-harness's `generate_until` (`lm_eval/models/huggingface.py`, with
//! `handle_stop_sequences` and `postprocess_generated_text` of `lm_eval/models/utils.py`):
//!
//! - **Prompt length.** A prompt keeps its last `context - max_new_tokens` tokens (lm-eval's
//!   `max_ctx_len = max_length - max_gen_toks`, left truncation), so that no row ever runs past
//!   the model's context; `max_new_tokens >= context` is an error, as lm-eval's assertion. An
//!   empty prompt is the prefix token (the token [`crate::score`] scores empty contexts after).
//! - **Batching.** Prompts are sorted longest first (as lm-eval's `Collator`) and decoded
//!   `batch_size` at a time, **left-padded** to the longest prompt of the batch, as lm-eval pads
//!   (`padding_side="left"`): every row's next token is then in the same column, so one step
//!   appends one column to every row and the cache stays one rectangular tensor per layer.
//!   Padding columns are masked out of every attention (a padding query attends to itself only,
//!   so that no softmax row is empty), and each row's rotary positions start at 0 at its first
//!   real token (transformers derives `position_ids` from the attention mask the same way), so a
//!   row computes what it computes alone, up to float rounding.
//! - **Cache.** [`crate::model::KvCache`]: per layer a key and a value tensor
//!   [batch, heads, padded prompt + max_new_tokens, head_dim]. The prompt runs once
//!   ([`Gpt::hidden_cached`] over all its columns), then each step feeds the batch's new tokens
//!   as one column at the next position, which attends to the cached columns and itself. With
//!   `cache: false` every step runs the whole sequence again ([`Gpt::hidden_masked`]): the
//!   reference path the tests compare against.
//! - **Greedy.** The argmax of the next-token distribution, the softmax of the fp32 logits
//!   taken in f64 (so its argmax is the logits' argmax; libtorch's `argmax`: the first index on
//!   ties).
//! - **Ensembles.** [`generate_ensemble`] decodes with k models (checkpoints of one architecture
//!   and tokenizer, [`load_ensemble`]): the step's distribution is the mean of the k models'
//!   softmaxes (the paper's checkpoint ensembling, the mean of the predictive distributions),
//!   each model keeping its own cache; everything else is the single-model path, which is the
//!   ensemble of one.
//!   Inference runs in the weights' kind (fp32: checkpoints are stored in fp32; the training
//!   `precision` setting does not apply to inference, as in `lm eval`). bf16 decoding is not
//!   offered: `bench_generate`'s accuracy check (the checkpoint cast to bf16, against fp32) gave
//!   other tokens on 2 of 64 prompts of the smoke model and 13 of 64 of a 1.8M one, and ran
//!   0.66x / 0.97x as fast on these CPUs (BENCHMARKS.md).
//! - **Stops.** A row stops when its decoded continuation contains one of `until` (empty strings
//!   are ignored, as in lm-eval's post-processing), its text being cut before the first
//!   occurrence of any of them; when it generates the tokenizer's end-of-text token, if the
//!   tokenizer has one ([`end_of_text`]; the run's BPE tokenizers have none); or after
//!   `max_new_tokens`. lm-eval also adds the end-of-text token's text to `until`: a Hugging Face
//!   folder from `lm export` declares the newline token eos, so lm-eval on it stops at the first
//!   `"\n"`; pass `until: ["\n"]` to decode as it does there. A batch runs until all of its rows
//!   have stopped; a stopped row's further tokens are computed and dropped (rows are independent).

use anyhow::{bail, Context, Result};
use std::path::Path;
use tch::{nn::VarStore, Device, Kind, Tensor};

use crate::checkpoint::Sidecar;
use crate::model::{Gpt, KvCache};
use crate::tokenize::Tok;

/// How to decode.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The most tokens a row generates (lm-eval's `max_gen_toks`).
    pub max_new_tokens: usize,
    /// Stop strings: a row stops at the first occurrence of any of them in its decoded
    /// continuation, which is cut before it.
    pub until: Vec<String>,
    /// Prompts decoded together (the rows of one batch).
    pub batch_size: usize,
    /// Decode with the key/value cache; `false` runs the whole sequence at every step (the
    /// reference path, same tokens, much slower).
    pub cache: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { max_new_tokens: 32, until: Vec::new(), batch_size: 16, cache: true }
    }
}

/// Why a row stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// Its continuation contains this stop string.
    Until(String),
    /// It generated the end-of-text token.
    EndOfText,
    /// It generated `max_new_tokens` tokens.
    MaxNewTokens,
}

/// One prompt's continuation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// The decoded continuation, cut before the first stop string.
    pub text: String,
    /// The generated tokens, up to and including the one that completed a stop string or was
    /// the end-of-text token.
    pub tokens: Vec<u32>,
    pub stop: Stop,
    /// Prompt tokens the model saw.
    pub prompt_tokens: usize,
    /// Prompt tokens dropped from the left to leave room for `max_new_tokens`.
    pub truncated: usize,
}

/// The tokenizer's end-of-text token: a special added token named `<|endoftext|>`, `</s>`,
/// `<eos>` or `<|end_of_text|>`, if it has one (the run's byte-level BPEs have no special tokens).
pub fn end_of_text(tok: &Tok) -> Option<u32> {
    let added = tok.inner.get_added_tokens_decoder();
    ["<|endoftext|>", "</s>", "<eos>", "<|end_of_text|>"]
        .iter()
        .find_map(|name| added.iter().filter(|(_, t)| t.special && t.content == *name).map(|(&id, _)| id).min())
}

/// Continues each prompt (text, encoded with `tok`) greedily; results in prompt order.
pub fn generate(model: &Gpt, tok: &Tok, prompts: &[String], opts: &Options, device: Device) -> Result<Vec<Generation>> {
    generate_ensemble(&[model], tok, prompts, opts, device)
}

/// [`generate`] with an ensemble: greedy on the mean of the `models`' next-token probability
/// distributions at every step ([`generate_ids_ensemble`]). One model is [`generate`].
pub fn generate_ensemble(
    models: &[&Gpt],
    tok: &Tok,
    prompts: &[String],
    opts: &Options,
    device: Device,
) -> Result<Vec<Generation>> {
    let mut ids = Vec::with_capacity(prompts.len());
    for p in prompts {
        let t = tok.encode(p)?;
        ids.push(if t.is_empty() { vec![tok.prefix_token()?] } else { t });
    }
    generate_ids_ensemble(models, &ids, opts, end_of_text(tok), |t: &[u32]| tok.decode(t), device)
}

/// [`generate`] on token ids: `eos` is the end-of-text token (if any), `decode` turns generated
/// tokens into the text stop strings are looked for in. Every prompt needs a token.
pub fn generate_ids<D>(
    model: &Gpt,
    prompts: &[Vec<u32>],
    opts: &Options,
    eos: Option<u32>,
    decode: D,
    device: Device,
) -> Result<Vec<Generation>>
where
    D: Fn(&[u32]) -> Result<String>,
{
    generate_ids_ensemble(&[model], prompts, opts, eos, decode, device)
}

/// Ensemble decoding (checkpoint ensembling as the paper's remedy: the mean of the predictive
/// distributions): at every step each of the `models` computes its next-token distribution
/// (softmax of its logits, with its own key/value cache), the step's distribution is their
/// mean, and the next token is its argmax. Batching, padding, truncation and stops are those of
/// [`generate_ids`], which is this with one model. The models must have one architecture and
/// one vocabulary (a member that differs from the first is refused, named by its index;
/// [`load_ensemble`] names checkpoints).
pub fn generate_ids_ensemble<D>(
    models: &[&Gpt],
    prompts: &[Vec<u32>],
    opts: &Options,
    eos: Option<u32>,
    decode: D,
    device: Device,
) -> Result<Vec<Generation>>
where
    D: Fn(&[u32]) -> Result<String>,
{
    generate_observed(models, prompts, opts, eos, decode, device, &mut |_, _| {})
}

/// The architecture fields that decide what a model computes (not its init or dropout).
fn architecture(c: &crate::config::ModelConfig) -> (i64, i64, i64, i64, i64, u64, u64) {
    (c.d_model, c.n_layers, c.n_heads, c.d_ff, c.context, c.rope_theta.to_bits(), c.norm_eps.to_bits())
}

fn describe(c: &crate::config::ModelConfig) -> String {
    format!(
        "d_model {}, {} layers, {} heads, d_ff {}, context {}, rope_theta {}, norm_eps {}",
        c.d_model, c.n_layers, c.n_heads, c.d_ff, c.context, c.rope_theta, c.norm_eps
    )
}

/// [`generate_ids_ensemble`], calling `observe(rows, dist)` at every step with the original
/// prompt indices of the batch's rows and the step's distribution [rows, vocab] (f64).
fn generate_observed<D>(
    models: &[&Gpt],
    prompts: &[Vec<u32>],
    opts: &Options,
    eos: Option<u32>,
    decode: D,
    device: Device,
    observe: &mut dyn FnMut(&[usize], &Tensor),
) -> Result<Vec<Generation>>
where
    D: Fn(&[u32]) -> Result<String>,
{
    let Some(model) = models.first() else { bail!("no model to decode with (an ensemble needs at least one)") };
    for (i, m) in models.iter().enumerate().skip(1) {
        if architecture(&m.config) != architecture(&model.config) {
            bail!(
                "ensemble member {} of {}: architecture ({}) differs from member 1's ({}); ensemble members need one architecture",
                i + 1,
                models.len(),
                describe(&m.config),
                describe(&model.config)
            );
        }
    }
    let context = model.config.context as usize;
    if opts.max_new_tokens >= context {
        bail!(
            "max_new_tokens {} leaves no room for a prompt in the model's context of {context} tokens",
            opts.max_new_tokens
        );
    }
    if let Some(i) = prompts.iter().position(Vec::is_empty) {
        bail!("prompt {i} has no tokens");
    }
    let keep = context - opts.max_new_tokens;
    // longest first, ties in prompt order (lm-eval sorts by -length too)
    let mut order: Vec<usize> = (0..prompts.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(prompts[i].len()));
    let mut out: Vec<Option<Generation>> = vec![None; prompts.len()];
    for chunk in order.chunks(opts.batch_size.max(1)) {
        let rows: Vec<&[u32]> = chunk.iter().map(|&i| &prompts[i][prompts[i].len().saturating_sub(keep)..]).collect();
        let mut obs = |d: &Tensor| observe(chunk, d);
        let gens = tch::no_grad(|| decode_batch(models, &rows, opts, eos, &decode, device, &mut obs))?;
        for ((&i, g), row) in chunk.iter().zip(gens).zip(&rows) {
            out[i] = Some(Generation { prompt_tokens: row.len(), truncated: prompts[i].len() - row.len(), ..g });
        }
    }
    Ok(out.into_iter().map(Option::unwrap).collect())
}

/// `mask[b, q, k]` for the first `n` columns of left-padded rows (`real` [B, >= n]): causal,
/// real keys only, and a padding query sees itself.
fn full_mask(real: &Tensor, n: i64) -> Tensor {
    let opts = (Kind::Bool, real.device());
    let causal = Tensor::ones([n, n], opts).tril(0).unsqueeze(0);
    let keys = real.narrow(1, 0, n).unsqueeze(1).logical_or(&Tensor::eye(n, opts).unsqueeze(0));
    causal.logical_and(&keys)
}

/// The first occurrence of any non-empty stop string in `text`: (byte offset, the string);
/// the first listed among those at the same offset.
fn first_stop<'a>(text: &str, until: &'a [String]) -> Option<(usize, &'a String)> {
    until.iter().filter(|s| !s.is_empty()).filter_map(|s| text.find(s.as_str()).map(|p| (p, s))).min_by_key(|(p, _)| *p)
}

/// Whether row `toks` (its generated tokens so far) has stopped, and with what text.
fn check_stop<D>(toks: &[u32], opts: &Options, eos: Option<u32>, decode: &D) -> Result<Option<(String, Stop)>>
where
    D: Fn(&[u32]) -> Result<String>,
{
    let last = *toks.last().expect("a token was just generated");
    if eos == Some(last) {
        return Ok(Some((decode(&toks[..toks.len() - 1])?, Stop::EndOfText)));
    }
    let text = decode(toks)?;
    if let Some((p, s)) = first_stop(&text, &opts.until) {
        return Ok(Some((text[..p].to_string(), Stop::Until(s.clone()))));
    }
    Ok((toks.len() >= opts.max_new_tokens).then_some((text, Stop::MaxNewTokens)))
}

/// The left-padded batch being decoded: tokens, rotary positions and real (non-padding)
/// columns, each [B, padded prompt + max_new_tokens].
struct Batch {
    tokens: Tensor,
    positions: Tensor,
    real: Tensor,
}

/// One model's hidden state of each row's last column after the first `n` columns of the
/// batch: with a cache, the whole prompt when the cache is empty, else the newest column only;
/// without, the whole sequence again.
fn last_hidden(model: &Gpt, cache: Option<&mut KvCache>, x: &Batch, n: i64) -> Tensor {
    match cache {
        Some(cache) if !cache.is_empty() => {
            let (c, q) = (n - 1, x.tokens.narrow(1, n - 1, 1));
            let mask = x.real.narrow(1, 0, n).unsqueeze(1);
            model.hidden_cached(&q, &x.positions.narrow(1, c, 1), &mask, cache).select(1, 0)
        }
        Some(cache) => {
            let h = model.hidden_cached(
                &x.tokens.narrow(1, 0, n),
                &x.positions.narrow(1, 0, n),
                &full_mask(&x.real, n),
                cache,
            );
            h.select(1, n - 1)
        }
        None => model
            .hidden_masked(&x.tokens.narrow(1, 0, n), &x.positions.narrow(1, 0, n), &full_mask(&x.real, n))
            .select(1, n - 1),
    }
}

/// The step's next-token distribution [B, vocab] (f64) after the first `n` columns: the mean
/// over `models` of the softmax of each one's logits (each with its own cache, if any). With one
/// model its softmax, whose argmax is the logits' argmax (f64 keeps distinct fp32 logits
/// distinct, so greedy decoding is unchanged by going through probabilities).
fn next_distribution(models: &[&Gpt], caches: &mut [Option<KvCache>], x: &Batch, n: i64) -> Result<Tensor> {
    let mut sum: Option<Tensor> = None;
    for (i, (m, cache)) in models.iter().zip(caches.iter_mut()).enumerate() {
        let p = m.head(&last_hidden(m, cache.as_mut(), x, n)).softmax(-1, Kind::Double);
        sum = Some(match sum {
            None => p,
            Some(s) => {
                let (v, v0) = (p.size().last().copied(), s.size().last().copied());
                if v != v0 {
                    bail!(
                        "ensemble member {} of {}: a vocabulary of {} tokens, member 1 has {}; ensemble members need one tokenizer",
                        i + 1,
                        models.len(),
                        v.unwrap_or(0),
                        v0.unwrap_or(0)
                    );
                }
                s + p
            }
        });
    }
    let sum = sum.expect("at least one model");
    Ok(if models.len() == 1 { sum } else { sum / models.len() as f64 })
}

/// Decodes one batch of (already truncated, non-empty) prompts with the ensemble `models`
/// (one model: plain greedy); `prompt_tokens` and `truncated` are filled in by the caller.
/// `observe` sees each step's distribution.
fn decode_batch<D>(
    models: &[&Gpt],
    prompts: &[&[u32]],
    opts: &Options,
    eos: Option<u32>,
    decode: &D,
    device: Device,
    observe: &mut dyn FnMut(&Tensor),
) -> Result<Vec<Generation>>
where
    D: Fn(&[u32]) -> Result<String>,
{
    let b = prompts.len();
    let done = |text, stop| Generation { text, tokens: vec![], stop, prompt_tokens: 0, truncated: 0 };
    if opts.max_new_tokens == 0 {
        return Ok(vec![done(String::new(), Stop::MaxNewTokens); b]);
    }
    let w = prompts.iter().map(|p| p.len()).max().unwrap_or(0);
    let cap = w + opts.max_new_tokens;
    let (mut tokens, mut positions, mut real) = (vec![0i64; b * cap], vec![0i64; b * cap], vec![false; b * cap]);
    for (r, p) in prompts.iter().enumerate() {
        let pad = w - p.len();
        for j in 0..cap {
            positions[r * cap + j] = j.saturating_sub(pad) as i64;
            real[r * cap + j] = j >= pad;
        }
        for (j, &t) in p.iter().enumerate() {
            tokens[r * cap + pad + j] = t as i64;
        }
    }
    let shape = [b as i64, cap as i64];
    let x = Batch {
        tokens: Tensor::from_slice(&tokens).view(shape).to(device),
        positions: Tensor::from_slice(&positions).view(shape).to(device),
        real: Tensor::from_slice(&real).view(shape).to(device),
    };
    let mut caches: Vec<Option<KvCache>> =
        models.iter().map(|m| opts.cache.then(|| m.kv_cache(b as i64, cap as i64))).collect();
    let mut generated: Vec<Vec<u32>> = vec![Vec::new(); b];
    let mut stopped: Vec<Option<(String, Stop)>> = vec![None; b];
    let mut n = w as i64;
    loop {
        let dist = next_distribution(models, &mut caches, &x, n)?;
        observe(&dist);
        let next = dist.argmax(-1, false);
        let ids = Vec::<i64>::try_from(next.to(Device::Cpu))?;
        for r in 0..b {
            if stopped[r].is_none() {
                generated[r].push(ids[r] as u32);
                stopped[r] = check_stop(&generated[r], opts, eos, decode)?;
            }
        }
        if stopped.iter().all(Option::is_some) {
            break;
        }
        x.tokens.narrow(1, n, 1).copy_(&next.unsqueeze(1));
        n += 1;
    }
    Ok(generated
        .into_iter()
        .zip(stopped)
        .map(|(tokens, s)| {
            let (text, stop) = s.expect("every row stopped");
            Generation { tokens, ..done(text, stop) }
        })
        .collect())
}

/// A checkpoint (its sidecar `step_N.json` or weights `step_N.safetensors`) loaded for
/// inference on `device`, with its tokenizer (`tokenizer`, else the one its config names;
/// checked against the sidecar's sha256, as are the weights).
pub struct Loaded {
    pub vs: VarStore,
    pub model: Gpt,
    pub tok: Tok,
    pub meta: Sidecar,
}

pub fn load(checkpoint: &Path, tokenizer: Option<&Path>, device: Device) -> Result<Loaded> {
    let src = crate::export::open_source(checkpoint, tokenizer)?;
    let c = &src.meta.config;
    let mut vs = VarStore::new(device);
    let model = Gpt::new(&vs.root(), &c.model, c.data.vocab_size);
    crate::checkpoint::load_tensors_into(&src.weights, &mut vs)?;
    Ok(Loaded { vs, model, tok: src.tokenizer, meta: src.meta })
}

/// Loads the checkpoints of an ensemble ([`load`] each, with `tokenizer` for all); they must
/// share the tokenizer (its sha256), the vocabulary size and the architecture of the first one.
/// A checkpoint that differs is refused, named, before any decoding.
pub fn load_ensemble(checkpoints: &[&Path], tokenizer: Option<&Path>, device: Device) -> Result<Vec<Loaded>> {
    let Some(&first) = checkpoints.first() else { bail!("no checkpoint to decode with") };
    let mut out: Vec<Loaded> = Vec::with_capacity(checkpoints.len());
    for &c in checkpoints {
        let l = if checkpoints.len() > 1 {
            load(c, tokenizer, device).with_context(|| format!("ensemble member {}", c.display()))?
        } else {
            load(c, tokenizer, device)?
        };
        if let Some(l0) = out.first() {
            let (m, m0) = (&l.meta.config, &l0.meta.config);
            if m.data.vocab_size != m0.data.vocab_size {
                bail!(
                    "{}: a vocabulary of {} tokens, but {} has {}; the checkpoints of an ensemble need one tokenizer",
                    c.display(),
                    m.data.vocab_size,
                    first.display(),
                    m0.data.vocab_size
                );
            }
            if architecture(&m.model) != architecture(&m0.model) {
                bail!(
                    "{}: architecture ({}) differs from {}'s ({}); the checkpoints of an ensemble need one architecture",
                    c.display(),
                    describe(&m.model),
                    first.display(),
                    describe(&m0.model)
                );
            }
            if l.meta.tokenizer_sha256 != l0.meta.tokenizer_sha256 {
                bail!(
                    "{}: trained with tokenizer {}, but {} with {}; the checkpoints of an ensemble need one tokenizer",
                    c.display(),
                    &l.meta.tokenizer_sha256[..12.min(l.meta.tokenizer_sha256.len())],
                    first.display(),
                    &l0.meta.tokenizer_sha256[..12.min(l0.meta.tokenizer_sha256.len())]
                );
            }
        }
        out.push(l);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use std::path::PathBuf;
    use tch::nn;

    const VOCAB: i64 = 50;
    /// One distinct character per token of the tiny model, so that text offsets are token counts.
    const ALPHABET: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX";

    fn chars(t: &[u32]) -> Result<String> {
        Ok(t.iter().map(|&i| ALPHABET.as_bytes()[i as usize] as char).collect())
    }

    /// A randomly initialised model (fixed seed; a large init so that its argmax moves).
    fn tiny() -> (nn::VarStore, Gpt) {
        tiny_with(11, VOCAB, 2)
    }

    fn tiny_config(n_layers: i64) -> ModelConfig {
        ModelConfig {
            d_model: 32,
            n_layers,
            n_heads: 4,
            d_ff: 64,
            context: 32,
            rope_theta: 10000.0,
            norm_eps: 1e-5,
            init_std: 0.5,
            dropout: 0.0,
        }
    }

    /// [`tiny`] with another seed, vocabulary or depth.
    fn tiny_with(seed: i64, vocab: i64, n_layers: i64) -> (nn::VarStore, Gpt) {
        let _rng = crate::train::rng_lock();
        tch::manual_seed(seed);
        let vs = nn::VarStore::new(Device::Cpu);
        let m = Gpt::new(&vs.root(), &tiny_config(n_layers), vocab);
        (vs, m)
    }

    /// Prompts of lengths 1, 3, 7, 12 and 20 (fixed, no RNG).
    fn prompts() -> Vec<Vec<u32>> {
        [1usize, 7, 3, 20, 12]
            .iter()
            .map(|&n| (0..n).map(|i| ((i * 17 + n * 5) % VOCAB as usize) as u32).collect())
            .collect()
    }

    fn opts(max_new_tokens: usize, cache: bool) -> Options {
        Options { max_new_tokens, until: vec![], batch_size: 16, cache }
    }

    fn run(m: &Gpt, p: &[Vec<u32>], o: &Options) -> Vec<Generation> {
        generate_ids(m, p, o, None, chars, Device::Cpu).unwrap()
    }

    /// The plain training forward (no padding, no mask, no cache) re-run on the whole sequence
    /// at each step: an independent reference for one prompt.
    fn naive(m: &Gpt, prompt: &[u32], new: usize) -> Vec<u32> {
        let mut seq: Vec<i64> = prompt.iter().map(|&t| t as i64).collect();
        let mut out = Vec::new();
        for _ in 0..new {
            let logits = tch::no_grad(|| m.forward(&Tensor::from_slice(&seq).view([1, -1]), false));
            let next = i64::try_from(logits.get(0).get(seq.len() as i64 - 1).argmax(-1, false)).unwrap();
            seq.push(next);
            out.push(next as u32);
        }
        out
    }

    fn assert_same_tokens(a: &[Generation], b: &[Generation], what: &str) {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert_eq!(x.tokens, y.tokens, "{what}: prompt {i}");
            assert_eq!(x.text, y.text, "{what}: prompt {i}");
        }
    }

    #[test]
    fn generate_cached_and_uncached_give_identical_tokens_in_a_padded_batch() {
        let (_vs, m) = tiny();
        let p = prompts();
        let cached = run(&m, &p, &opts(12, true));
        let uncached = run(&m, &p, &opts(12, false));
        assert_same_tokens(&cached, &uncached, "cached vs uncached");
        // 5 prompts up to 20 tokens + 12 new = the context of 32: nothing truncated
        for (g, p) in cached.iter().zip(&p) {
            assert_eq!(
                (g.tokens.len(), g.stop.clone(), g.prompt_tokens, g.truncated),
                (12, Stop::MaxNewTokens, p.len(), 0)
            );
        }
        // not a degenerate model: the rows do not all repeat one token
        assert!(cached.iter().any(|g| g.tokens.iter().any(|&t| t != g.tokens[0])));
    }

    #[test]
    fn generate_batched_equals_each_prompt_alone_and_the_plain_forward() {
        let (_vs, m) = tiny();
        let p = prompts();
        let batched = run(&m, &p, &opts(12, true));
        for (i, q) in p.iter().enumerate() {
            let alone = run(&m, std::slice::from_ref(q), &opts(12, true));
            assert_same_tokens(&batched[i..i + 1], &alone, &format!("batched vs alone, prompt {i}"));
            assert_eq!(batched[i].tokens, naive(&m, q, 12), "cache vs plain forward, prompt {i}");
        }
        // batches of two (sorted longest first, then put back in prompt order) give the same
        let pairs = run(&m, &p, &Options { batch_size: 2, ..opts(12, true) });
        assert_same_tokens(&batched, &pairs, "batch 16 vs batch 2");
    }

    /// The cache path's logits equal the full forward's, not only their argmax.
    #[test]
    fn generate_cached_logits_match_the_full_forward() {
        let (_vs, m) = tiny();
        let seq = Tensor::from_slice(&[3i64, 14, 15, 9, 2, 6, 5, 35, 8, 9]).view([1, -1]);
        let full = tch::no_grad(|| m.forward(&seq, false)).get(0);
        let mut cache = m.kv_cache(1, 10);
        let pos = Tensor::arange(10, (Kind::Int64, Device::Cpu)).view([1, -1]);
        let ones = |q: i64, k: i64| Tensor::ones([1, q, k], (Kind::Bool, Device::Cpu));
        // 4 prompt tokens at once, then one at a time
        let mut rows = vec![tch::no_grad(|| {
            m.head(&m.hidden_cached(&seq.narrow(1, 0, 4), &pos.narrow(1, 0, 4), &ones(4, 4).tril(0), &mut cache))
        })
        .get(0)];
        for t in 4..10 {
            let h = tch::no_grad(|| {
                m.hidden_cached(&seq.narrow(1, t, 1), &pos.narrow(1, t, 1), &ones(1, t + 1), &mut cache)
            });
            rows.push(m.head(&h).get(0));
        }
        assert_eq!(cache.len(), 10);
        let cached = Tensor::cat(&rows, 0);
        // relative to the logits' scale (about 9 here): fp32 rounding, 1.6e-6 of it
        let diff = f64::try_from((&cached - &full).abs().max()).unwrap();
        let scale = f64::try_from(full.abs().max()).unwrap();
        assert!(diff <= 1e-5 * scale, "cached logits differ from the full forward's by {diff} (scale {scale})");
    }

    #[test]
    fn generate_stops_at_a_stop_string_and_cuts_the_text_before_it() {
        let (_vs, m) = tiny();
        let p = prompts();
        let free = run(&m, &p, &opts(12, true));
        // a two-token stop string taken from row 2's continuation, at its first occurrence
        let text = &free[2].text;
        let stop = text[5..7].to_string();
        let at = text.find(&stop).unwrap();
        for cache in [true, false] {
            let o = Options { until: vec!["Z!".into(), stop.clone()], ..opts(12, cache) };
            let got = run(&m, &p, &o);
            assert_eq!(got[2].text, text[..at], "cache {cache}");
            assert_eq!(got[2].stop, Stop::Until(stop.clone()));
            // decoding stopped at the token that completed it (one character per token)
            assert_eq!(got[2].tokens, free[2].tokens[..at + 2], "cache {cache}");
            for (g, f) in got.iter().zip(&free) {
                match f.text.find(&stop) {
                    Some(q) => assert_eq!((g.text.as_str(), g.tokens.len()), (&f.text[..q], q + 2)),
                    // rows without it run on, unaffected by the row that stopped
                    None => assert_eq!(g, f),
                }
            }
        }
        // of two stop strings, the one occurring first cuts (whatever the order they are given in)
        let (early, late) = (text[0..1].to_string(), text[3..5].to_string());
        let o = Options { until: vec![late, early.clone()], ..opts(12, true) };
        let g = &run(&m, &p[2..3], &o)[0];
        assert_eq!((g.text.as_str(), g.stop.clone(), g.tokens.len()), ("", Stop::Until(early), 1));
    }

    #[test]
    fn generate_runs_to_max_new_tokens_when_no_stop_string_appears() {
        let (_vs, m) = tiny();
        let p = prompts();
        // characters the tiny model's decoder never produces
        let o = Options { until: vec!["\n\n".into(), "zz!".into(), String::new()], ..opts(9, true) };
        let got = run(&m, &p, &o);
        let free = run(&m, &p, &opts(9, true));
        assert_eq!(got, free);
        assert!(got.iter().all(|g| g.tokens.len() == 9 && g.stop == Stop::MaxNewTokens && g.text.len() == 9));
    }

    #[test]
    fn generate_stops_at_the_end_of_text_token_and_leaves_it_out() {
        let (_vs, m) = tiny();
        let p = prompts();
        let free = run(&m, &p[3..4], &opts(12, true)).remove(0);
        let eos = free.tokens[4];
        let first = free.tokens.iter().position(|&t| t == eos).unwrap();
        let g = generate_ids(&m, &p[3..4], &opts(12, true), Some(eos), chars, Device::Cpu).unwrap().remove(0);
        assert_eq!(g.stop, Stop::EndOfText);
        assert_eq!(g.tokens, free.tokens[..first + 1]);
        assert_eq!(g.text, free.text[..first]);
    }

    #[test]
    fn generate_truncates_long_prompts_from_the_left() {
        let (_vs, m) = tiny();
        // context 32, 8 new tokens: a prompt keeps its last 24 tokens
        let long: Vec<u32> = (0..45).map(|i| (i * 7 % VOCAB) as u32).collect();
        let short = vec![5u32, 6, 7];
        for cache in [true, false] {
            let got = run(&m, &[short.clone(), long.clone()], &opts(8, cache));
            assert_eq!((got[1].prompt_tokens, got[1].truncated), (24, 21));
            assert_eq!((got[0].prompt_tokens, got[0].truncated), (3, 0));
            let tail = run(&m, &[long[21..].to_vec()], &opts(8, cache));
            assert_eq!(got[1].tokens, tail[0].tokens, "cache {cache}");
            assert_eq!(got[1].tokens, naive(&m, &long[21..], 8));
        }
        // a prompt exactly as long as the room left is kept whole
        let fits = run(&m, &[long[..24].to_vec()], &opts(8, true));
        assert_eq!((fits[0].prompt_tokens, fits[0].truncated, fits[0].tokens.len()), (24, 0, 8));
        // no room for a prompt, or no prompt
        let e = generate_ids(&m, &[short.clone()], &opts(32, true), None, chars, Device::Cpu).unwrap_err();
        assert!(e.to_string().contains("no room"), "{e}");
        assert!(generate_ids(&m, &[vec![]], &opts(4, true), None, chars, Device::Cpu).is_err());
        // zero new tokens: nothing generated
        let none = run(&m, &[short], &opts(0, true));
        assert_eq!((none[0].text.as_str(), none[0].tokens.len(), none[0].stop.clone()), ("", 0, Stop::MaxNewTokens));
    }

    fn run_ensemble(ms: &[&Gpt], p: &[Vec<u32>], o: &Options) -> Vec<Generation> {
        generate_ids_ensemble(ms, p, o, None, chars, Device::Cpu).unwrap()
    }

    /// k copies of one model (each built anew from the same seed: separate weights, separate
    /// caches) decode exactly what the model decodes alone, batched or one prompt at a time,
    /// with and without the cache, with stop strings.
    #[test]
    fn generate_ensemble_of_k_copies_equals_the_single_model_greedy() {
        let copies: Vec<(nn::VarStore, Gpt)> = (0..3).map(|_| tiny()).collect();
        let (_vs, m) = tiny();
        let p = prompts();
        for cache in [true, false] {
            let single = run(&m, &p, &opts(12, cache));
            assert!(single.iter().any(|g| g.tokens.iter().any(|&t| t != g.tokens[0])));
            for k in 1..=3 {
                let ms: Vec<&Gpt> = copies[..k].iter().map(|(_, m)| m).collect();
                let what = format!("k = {k}, cache {cache}");
                assert_eq!(run_ensemble(&ms, &p, &opts(12, cache)), single, "{what}: batched");
                let pairs = run_ensemble(&ms, &p, &Options { batch_size: 2, ..opts(12, cache) });
                assert_eq!(pairs, single, "{what}: batches of two");
                for (i, q) in p.iter().enumerate() {
                    let alone = run_ensemble(&ms, std::slice::from_ref(q), &opts(12, cache));
                    assert_eq!(alone[0], single[i], "{what}: prompt {i} alone");
                }
                // the same model given k times (shared weights, a cache each) too
                let same: Vec<&Gpt> = vec![&m; k];
                assert_eq!(run_ensemble(&same, &p, &opts(12, cache)), single, "{what}: one model k times");
            }
        }
        // stop strings and truncation go through the same loop
        let stop = run(&m, &p[2..3], &opts(12, true))[0].text[4..6].to_string();
        let long: Vec<u32> = (0..45).map(|i| (i * 7 % VOCAB) as u32).collect();
        let mut q = p.clone();
        q.push(long);
        let o = Options { until: vec![stop], ..opts(8, true) };
        let ms: Vec<&Gpt> = copies.iter().map(|(_, m)| m).collect();
        let (single, ens) = (run(&m, &q, &o), run_ensemble(&ms, &q, &o));
        assert_eq!(ens, single);
        assert!(single.iter().any(|g| matches!(g.stop, Stop::Until(_))));
        assert_eq!(single[5].truncated, 21);
    }

    /// The distribution each step decodes from is the mean of the members' softmaxes, each
    /// computed by the plain forward (no cache, no padding) on the row's prompt and tokens so
    /// far; the token is its argmax. Two (and three) different models, batched with padding,
    /// with and without the cache. In fp64 (the weights cast) the two agree to 1e-12 (measured:
    /// 3e-15); in fp32 to 5e-6 (measured: 1.9e-6): the cached, padded forward's logits differ
    /// from the plain forward's by fp32 rounding (about 1.6e-6 of the logits' scale of ~9 for
    /// these models, see `generate_cached_logits_match_the_full_forward`), which moves a
    /// probability by up to about a quarter of that. A wrong rule (one member's distribution,
    /// or the softmax of the mean logits) is off by more than 0.3.
    #[test]
    fn generate_ensemble_step_distribution_is_the_mean_of_the_members_softmaxes() {
        for (kind, tol) in [(Kind::Double, 1e-12), (Kind::Float, 5e-6)] {
            let mut models: Vec<(nn::VarStore, Gpt)> = [11, 12, 13].map(|seed| tiny_with(seed, VOCAB, 2)).into();
            if kind == Kind::Double {
                models.iter_mut().for_each(|(vs, _)| vs.double());
            }
            let (a, b, c) = (&models[0].1, &models[1].1, &models[2].1);
            for ms in [vec![a, b], vec![a, b, c]] {
                for cache in [true, false] {
                    let what = format!("{kind:?}, k = {}, cache {cache}", ms.len());
                    let (worst, spread, other_rule) = check_step_distributions(&ms, cache);
                    eprintln!("{what}: off by {worst:e}; from a member {spread:e}, from the mean logits' softmax {other_rule:e}");
                    assert!(worst <= tol, "{what}: the step distribution is off by {worst}");
                    // the members disagree: the mean is not any one of them, nor the other pooling
                    assert!(spread > 1e-2, "{what}: members too alike ({spread})");
                    assert!(other_rule > 1e-2, "{what}: mean of probabilities vs of logits ({other_rule})");
                }
            }
        }
    }

    /// Decodes [`prompts`] with the ensemble `ms` (batches of 3, 8 new tokens) and compares every
    /// step's distribution with the mean of the members' softmaxes by the plain forward: the
    /// largest difference, the largest difference to a single member, and to the softmax of the
    /// mean logits. Checks each row sums to 1 and its argmax is the token decoded.
    fn check_step_distributions(ms: &[&Gpt], cache: bool) -> (f64, f64, f64) {
        let p = prompts();
        let mut seen: Vec<(Vec<usize>, Tensor)> = Vec::new();
        let o = Options { batch_size: 3, ..opts(8, cache) };
        let gens = generate_observed(ms, &p, &o, None, chars, Device::Cpu, &mut |rows, d| {
            seen.push((rows.to_vec(), d.shallow_clone()))
        })
        .unwrap();
        assert_eq!(seen.len(), 2 * 8, "two batches of 8 steps");
        let (mut worst, mut spread, mut other_rule) = (0f64, 0f64, 0f64);
        let max_abs = |t: Tensor| f64::try_from(t.abs().max()).unwrap();
        for (j, (rows, d)) in seen.iter().enumerate() {
            let step = j % 8;
            assert_eq!(d.kind(), Kind::Double);
            for (r, &i) in rows.iter().enumerate() {
                let seq: Vec<i64> = p[i].iter().chain(&gens[i].tokens[..step]).map(|&t| t as i64).collect();
                let x = Tensor::from_slice(&seq).view([1, -1]);
                let logits: Vec<Tensor> =
                    ms.iter().map(|m| tch::no_grad(|| m.forward(&x, false)).get(0).get(seq.len() as i64 - 1)).collect();
                let probs: Vec<Tensor> = logits.iter().map(|l| l.softmax(-1, Kind::Double)).collect();
                let mean = Tensor::stack(&probs, 0).mean_dim(0, false, Kind::Double);
                let row = d.get(r as i64);
                worst = worst.max(max_abs(&row - &mean));
                for q in &probs {
                    spread = spread.max(max_abs(&row - q));
                }
                // not the softmax of the mean logits (a product of experts) either
                let pooled = Tensor::stack(&logits, 0).mean_dim(0, false, Kind::Double).softmax(-1, Kind::Double);
                other_rule = other_rule.max(max_abs(&row - &pooled));
                assert!((f64::try_from(row.sum(Kind::Double)).unwrap() - 1.0).abs() < 1e-9);
                assert_eq!(i64::try_from(row.argmax(-1, false)).unwrap(), gens[i].tokens[step] as i64);
            }
        }
        (worst, spread, other_rule)
    }

    #[test]
    fn generate_ensemble_refuses_members_of_another_vocabulary_or_architecture() {
        let (_a, a) = tiny();
        let (_v, other_vocab) = tiny_with(11, VOCAB + 10, 2);
        let (_d, deeper) = tiny_with(11, VOCAB, 3);
        let p = prompts();
        let e = generate_ids_ensemble(&[&a, &a, &other_vocab], &p, &opts(4, true), None, chars, Device::Cpu)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ensemble member 3 of 3") && e.contains("vocabulary of 60 tokens"), "{e}");
        let e = generate_ids_ensemble(&[&a, &deeper], &p, &opts(4, false), None, chars, Device::Cpu)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ensemble member 2 of 2") && e.contains("3 layers") && e.contains("architecture"), "{e}");
        let e = generate_ids_ensemble(&[], &p, &opts(4, true), None, chars, Device::Cpu).unwrap_err().to_string();
        assert!(e.contains("at least one"), "{e}");
    }

    /// The newest checkpoint of the smoke run, if `just reproduce` has left one.
    fn smoke_checkpoint() -> Option<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../runs/smoke/checkpoints");
        let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("step_") && n.ends_with(".json"))
            })
            .collect();
        found.sort();
        found.pop()
    }

    /// On a trained checkpoint (the smoke run's newest, when present): cached and uncached
    /// decoding, batched and alone, give the same tokens for prompts of different lengths, and
    /// stop strings and truncation behave on real text.
    #[test]
    fn generate_on_the_smoke_checkpoint_cached_uncached_batched_and_alone_agree() {
        let Some(ckpt) = smoke_checkpoint() else {
            eprintln!("runs/smoke/checkpoints/ absent: the smoke-checkpoint test checks nothing (the tiny-model tests still do)");
            return;
        };
        let l = load(&ckpt, None, Device::Cpu).unwrap();
        let prompts: Vec<String> = [
            "The",
            "Once upon a time, there was a little girl who",
            "Question: What is the capital of France?\nAnswer:",
            "In the beginning",
            "The results of the experiment showed that the",
            "\n",
            "",
            "She opened the door and saw",
        ]
        .map(String::from)
        .to_vec();
        let o = Options { max_new_tokens: 24, until: vec![], batch_size: 8, cache: true };
        let cached = generate(&l.model, &l.tok, &prompts, &o, Device::Cpu).unwrap();
        let uncached =
            generate(&l.model, &l.tok, &prompts, &Options { cache: false, ..o.clone() }, Device::Cpu).unwrap();
        assert_same_tokens(&cached, &uncached, "smoke: cached vs uncached");
        let lens: std::collections::BTreeSet<usize> = cached.iter().map(|g| g.prompt_tokens).collect();
        assert!(lens.len() >= 4, "prompts of different lengths: {lens:?}");
        for (i, p) in prompts.iter().enumerate() {
            let alone = generate(&l.model, &l.tok, std::slice::from_ref(p), &o, Device::Cpu).unwrap();
            assert_same_tokens(&cached[i..i + 1], &alone, &format!("smoke: batched vs alone, prompt {i}"));
            assert_eq!(cached[i].text, l.tok.decode(&cached[i].tokens).unwrap());
        }
        // a stop string from a continuation: cut before it, stopped at the token completing it
        let g = &cached[1];
        let word = g.text.split_whitespace().nth(2).expect("a few words");
        let at = g.text.find(word).unwrap();
        let cut =
            generate(&l.model, &l.tok, &prompts[1..2], &Options { until: vec![word.into()], ..o.clone() }, Device::Cpu)
                .unwrap()
                .remove(0);
        assert_eq!(cut.text, g.text[..at]);
        assert_eq!(cut.stop, Stop::Until(word.into()));
        assert!(cut.tokens.len() <= g.tokens.len() && cut.tokens[..] == g.tokens[..cut.tokens.len()]);
        assert!(l.tok.decode(&cut.tokens).unwrap().contains(word));
        assert!(!l.tok.decode(&cut.tokens[..cut.tokens.len() - 1]).unwrap().contains(word));
        // a prompt longer than the context: its last context - max_new_tokens tokens
        let long = prompts[1].repeat(30);
        let n = l.tok.encode(&long).unwrap().len();
        let context = l.model.config.context as usize;
        let t = generate(&l.model, &l.tok, &[long], &o, Device::Cpu).unwrap().remove(0);
        assert_eq!((t.prompt_tokens, t.truncated), (context - 24, n - (context - 24)));
        assert_eq!(t.tokens.len(), 24);
        assert_eq!(end_of_text(&l.tok), None, "the run's tokenizer has no special tokens");
    }
}
