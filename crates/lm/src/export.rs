//! `lm export`: a checkpoint as a Hugging Face folder that `transformers` loads as
//! `LlamaForCausalLM` with no custom code (and so `lm_eval --model hf`, vLLM, ...).
//!
//! - `model.safetensors`: the weights under Llama's names. `blocks.N.attn.qkv` is split by rows
//!   into `q_proj`, `k_proj`, `v_proj` (the model views it as `[3, heads, head_dim]`) and
//!   `blocks.N.mlp.gate_up` into `gate_proj`, `up_proj`; the embedding is tied to the output
//!   layer (`tie_word_embeddings`, no `lm_head.weight`). Our rotary embedding rotates the pairs
//!   `(x_i, x_{i + head_dim/2})` (`model::apply_rope`), which is Llama's `rotate_half`, so q and
//!   k rows need no permutation. Tensors keep their dtype; read memory-mapped, never in libtorch.
//! - `config.json`: sizes, `rope_theta`, `rms_norm_eps`, `max_position_embeddings` = the training
//!   context (lm_eval truncates contexts to it, as `lm eval` does), bos/eos ids.
//! - `tokenizer.json` (the run's tokenizer, byte for byte), `tokenizer_config.json` and
//!   `special_tokens_map.json`: the tokenizer has no special tokens, so the newline token `Ċ`,
//!   which `lm eval` scores empty contexts after ([`crate::tokenize::Tok::prefix_token`]), is
//!   declared bos and eos: lm_eval's HF backend then scores empty contexts after the same token.
//! - `generation_config.json`, and `provenance.json` (source sidecar and weights with their
//!   sha256, step, tokenizer sha256, git commit).
//!
//! The folder is written as one [`output::FileSet`] under its lock; a non-empty folder is refused
//! unless `force`.

use anyhow::{bail, Context, Result};
use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::checkpoint::{read_sidecar, Sidecar};
use crate::tokenize::Tok;
use output::provenance::sha256_file;

/// The sidecar of a checkpoint named by its sidecar (`step_N.json`) or its weights
/// (`step_N.safetensors`, the sidecar beside it).
pub fn sidecar_of(path: &Path) -> Result<PathBuf> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with(".json") {
        return Ok(path.to_path_buf());
    }
    if name.ends_with(".optim.safetensors") {
        bail!("{}: optimizer state, not model weights; name the checkpoint's .json or .safetensors", path.display());
    }
    if let Some(stem) = name.strip_suffix(".safetensors") {
        let s = path.with_file_name(format!("{stem}.json"));
        if s.is_file() {
            return Ok(s);
        }
        bail!(
            "{}: no sidecar {} beside it (the config and tokenizer are taken from there)",
            path.display(),
            s.display()
        );
    }
    bail!("{}: name a checkpoint's sidecar (step_N.json) or weights (step_N.safetensors)", path.display())
}

/// A checkpoint with its verified weights file and tokenizer.
pub struct Source {
    pub sidecar_path: PathBuf,
    pub meta: Sidecar,
    pub weights: PathBuf,
    pub tokenizer: Tok,
}

/// Reads a checkpoint's sidecar, checks its weights against the recorded sha256 and finds its
/// tokenizer (`tokenizer`, else the one its config names), which must be the one it was trained
/// with.
pub fn open_source(checkpoint: &Path, tokenizer: Option<&Path>) -> Result<Source> {
    let sidecar_path = sidecar_of(checkpoint)?;
    let meta = read_sidecar(&sidecar_path)?;
    let dir = sidecar_path.parent().unwrap_or(Path::new("."));
    let weights = dir.join(&meta.weights_file);
    let sha = sha256_file(&weights)?;
    if sha != meta.weights_sha256 {
        bail!(
            "{}: corrupt or truncated (sha256 {} differs from {} recorded in {})",
            weights.display(),
            &sha[..12],
            &meta.weights_sha256[..12.min(meta.weights_sha256.len())],
            sidecar_path.display()
        );
    }
    let tok_path = match tokenizer {
        Some(p) => p.to_path_buf(),
        None => crate::eval::resolve_tokenizer(&meta.config.data.tokenizer, dir)?,
    };
    let tok = Tok::load(&tok_path)?;
    if tok.sha256 != meta.tokenizer_sha256 {
        bail!(
            "{}: trained with tokenizer {}, but {} has sha256 {}; pass the tokenizer of this run",
            sidecar_path.display(),
            &meta.tokenizer_sha256[..12.min(meta.tokenizer_sha256.len())],
            tok_path.display(),
            &tok.sha256[..12]
        );
    }
    Ok(Source { sidecar_path, meta, weights, tokenizer: tok })
}

/// Rows `[from, to)` of a row-major tensor's bytes.
fn rows<'a>(data: &'a [u8], shape: &[usize], dtype: Dtype, from: usize, to: usize) -> &'a [u8] {
    let row = shape[1..].iter().product::<usize>() * dtype.bitsize() / 8;
    &data[from * row..to * row]
}

/// Our tensor names and shapes to Llama's: `(hf name, dtype, shape, bytes)` for every tensor.
/// Every tensor of the model must be present with its shape, and no other.
pub fn hf_tensors<'a>(
    st: &SafeTensors<'a>,
    c: &crate::config::Config,
    path: &Path,
) -> Result<Vec<(String, Dtype, Vec<usize>, &'a [u8])>> {
    let m = &c.model;
    let (d, ff, v) = (m.d_model as usize, m.d_ff as usize, c.data.vocab_size as usize);
    let mut by_name: BTreeMap<String, TensorView<'a>> = st.tensors().into_iter().collect();
    let mut take = |name: &str, shape: &[usize]| -> Result<TensorView<'a>> {
        let t = by_name.remove(name).with_context(|| format!("{}: tensor `{name}` missing", path.display()))?;
        if t.shape() != shape {
            bail!("{}: tensor `{name}` has shape {:?}, the config says {shape:?}", path.display(), t.shape());
        }
        if !matches!(t.dtype(), Dtype::F32 | Dtype::F16 | Dtype::BF16 | Dtype::F64) {
            bail!("{}: tensor `{name}` has dtype {:?}, not a floating-point type", path.display(), t.dtype());
        }
        Ok(t)
    };
    let mut out = Vec::new();
    let whole = |out: &mut Vec<(String, Dtype, Vec<usize>, &'a [u8])>, hf: String, t: TensorView<'a>| {
        out.push((hf, t.dtype(), t.shape().to_vec(), t.data()))
    };
    whole(&mut out, "model.embed_tokens.weight".into(), take("wte.weight", &[v, d])?);
    for i in 0..m.n_layers as usize {
        let p = format!("model.layers.{i}");
        whole(&mut out, format!("{p}.input_layernorm.weight"), take(&format!("blocks.{i}.attn_norm.weight"), &[d])?);
        whole(
            &mut out,
            format!("{p}.post_attention_layernorm.weight"),
            take(&format!("blocks.{i}.mlp_norm.weight"), &[d])?,
        );
        let qkv = take(&format!("blocks.{i}.attn.qkv.weight"), &[3 * d, d])?;
        for (j, n) in ["q_proj", "k_proj", "v_proj"].iter().enumerate() {
            out.push((
                format!("{p}.self_attn.{n}.weight"),
                qkv.dtype(),
                vec![d, d],
                rows(qkv.data(), qkv.shape(), qkv.dtype(), j * d, (j + 1) * d),
            ));
        }
        whole(&mut out, format!("{p}.self_attn.o_proj.weight"), take(&format!("blocks.{i}.attn.wo.weight"), &[d, d])?);
        let gu = take(&format!("blocks.{i}.mlp.gate_up.weight"), &[2 * ff, d])?;
        out.push((
            format!("{p}.mlp.gate_proj.weight"),
            gu.dtype(),
            vec![ff, d],
            rows(gu.data(), gu.shape(), gu.dtype(), 0, ff),
        ));
        out.push((
            format!("{p}.mlp.up_proj.weight"),
            gu.dtype(),
            vec![ff, d],
            rows(gu.data(), gu.shape(), gu.dtype(), ff, 2 * ff),
        ));
        whole(&mut out, format!("{p}.mlp.down_proj.weight"), take(&format!("blocks.{i}.mlp.down.weight"), &[d, ff])?);
    }
    whole(&mut out, "model.norm.weight".into(), take("norm_f.weight", &[d])?);
    if let Some(extra) = by_name.keys().next() {
        bail!("{}: tensor `{extra}` is not part of the model the config describes", path.display());
    }
    Ok(out)
}

fn dtype_name(d: Dtype) -> &'static str {
    match d {
        Dtype::F16 => "float16",
        Dtype::BF16 => "bfloat16",
        Dtype::F64 => "float64",
        _ => "float32",
    }
}

/// `config.json` of the exported model.
pub fn hf_config(c: &crate::config::Config, vocab: i64, special: u32, dtype: Dtype) -> serde_json::Value {
    let m = &c.model;
    json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": m.d_model,
        "intermediate_size": m.d_ff,
        "num_hidden_layers": m.n_layers,
        "num_attention_heads": m.n_heads,
        "num_key_value_heads": m.n_heads,
        "head_dim": m.d_model / m.n_heads,
        "hidden_act": "silu",
        "max_position_embeddings": m.context,
        "rms_norm_eps": m.norm_eps,
        "rope_theta": m.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": m.rope_theta},
        "rope_scaling": null,
        "attention_bias": false,
        "attention_dropout": 0.0,
        "mlp_bias": false,
        "tie_word_embeddings": true,
        "initializer_range": m.init_std,
        "bos_token_id": special,
        "eos_token_id": special,
        "pad_token_id": null,
        "use_cache": true,
        "torch_dtype": dtype_name(dtype),
    })
}

/// What [`export`] wrote.
#[derive(Debug)]
pub struct Exported {
    pub files: Vec<String>,
    pub step: u64,
    pub tensors: usize,
}

/// Writes the Hugging Face folder `out` for `checkpoint` (see the module documentation).
pub fn export(checkpoint: &Path, out: &Path, tokenizer: Option<&Path>, force: bool) -> Result<Exported> {
    let src = open_source(checkpoint, tokenizer)?;
    let c = &src.meta.config;
    let file = std::fs::File::open(&src.weights).with_context(|| format!("{}: cannot open", src.weights.display()))?;
    // SAFETY: read only; the hash checked above and the safetensors header checks below catch a
    // file changed underneath, and the bytes are treated as plain data.
    let map = unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("{}: cannot map", src.weights.display()))?;
    let st = SafeTensors::deserialize(&map)
        .map_err(|e| anyhow::anyhow!("{}: not a valid safetensors file: {e}", src.weights.display()))?;
    let tensors = hf_tensors(&st, c, &src.weights)?;
    let vocab = src.tokenizer.vocab_size();
    if vocab > c.data.vocab_size {
        bail!("{}: the tokenizer has {vocab} tokens, the model {}", src.tokenizer.path.display(), c.data.vocab_size);
    }
    let special = src.tokenizer.prefix_token()?;
    let special_text = src.tokenizer.inner.id_to_token(special).context("tokenizer: no text for the prefix token")?;

    // a new or empty folder, or --force; locked before it is looked at
    let lock = output::FolderLock::acquire(out, "lm export")?;
    let stale: Vec<PathBuf> = std::fs::read_dir(out)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n != ".lock"))
        .collect();
    if !stale.is_empty() && !force {
        bail!("{}: not empty; choose a new folder or pass --force to replace what it holds", out.display());
    }
    let mut set = output::FileSet::begin(&lock, out)?;
    let views: Vec<(String, TensorView)> = tensors
        .iter()
        .map(|(n, d, s, b)| {
            Ok((n.clone(), TensorView::new(*d, s.clone(), b).map_err(|e| anyhow::anyhow!("{n}: {e}"))?))
        })
        .collect::<Result<_>>()?;
    let meta: HashMap<String, String> = [("format".to_string(), "pt".to_string())].into();
    set.write_via("model.safetensors", |tmp| {
        safetensors::serialize_to_file(views, Some(meta), tmp).map_err(|e| anyhow::anyhow!("{e}"))
    })?;
    let dtype = tensors[0].1;
    let pretty = |v: serde_json::Value| serde_json::to_string_pretty(&v).map(|s| s + "\n");
    set.write("config.json", pretty(hf_config(c, c.data.vocab_size, special, dtype))?.as_bytes())?;
    set.write("generation_config.json", pretty(json!({"bos_token_id": special, "eos_token_id": special, "max_length": c.model.context, "do_sample": false}))?.as_bytes())?;
    set.write(
        "tokenizer.json",
        &std::fs::read(&src.tokenizer.path)
            .with_context(|| format!("{}: cannot read", src.tokenizer.path.display()))?,
    )?;
    let tok_config = json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": special_text,
        "eos_token": special_text,
        "add_bos_token": false,
        "add_eos_token": false,
        "clean_up_tokenization_spaces": false,
        "model_max_length": c.model.context,
    });
    set.write("tokenizer_config.json", pretty(tok_config)?.as_bytes())?;
    set.write(
        "special_tokens_map.json",
        pretty(json!({"bos_token": special_text, "eos_token": special_text}))?.as_bytes(),
    )?;
    let provenance = json!({
        "exported_by": "lm export",
        "source": {"sidecar": src.sidecar_path, "sidecar_sha256": sha256_file(&src.sidecar_path)?, "weights": src.weights, "weights_sha256": src.meta.weights_sha256},
        "step": src.meta.step, "tokens_seen": src.meta.tokens_seen, "val_loss": src.meta.val_loss, "config_hash": src.meta.config_hash,
        "tokenizer": src.tokenizer.path, "tokenizer_sha256": src.tokenizer.sha256,
        "git_commit": output::provenance::git_commit(),
        "model_safetensors_sha256": sha256_file(&set.staged("model.safetensors"))?,
    });
    set.write("provenance.json", pretty(provenance)?.as_bytes())?;
    let files: Vec<String> = [
        "model.safetensors",
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "provenance.json",
    ]
    .map(String::from)
    .to_vec();
    set.commit()?;
    // files of an earlier export that this one does not have
    for p in stale {
        if !p.file_name().and_then(|n| n.to_str()).is_some_and(|n| files.iter().any(|f| f == n)) {
            let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        }
    }
    Ok(Exported { files, step: src.meta.step, tensors: tensors.len() })
}

/// The tokens of `text` (the run's tokenizer; the first `context` of them) and the model's
/// logits at every position (`[tokens][vocab]`, float32), computed on the CPU.
pub fn logits(checkpoint: &Path, text: &str, tokenizer: Option<&Path>) -> Result<(Vec<u32>, Vec<Vec<f32>>)> {
    use tch::{nn::VarStore, Device, Kind, Tensor};
    let src = open_source(checkpoint, tokenizer)?;
    let c = &src.meta.config;
    let mut tokens = src.tokenizer.encode(text)?;
    if tokens.is_empty() {
        bail!("--text: no tokens");
    }
    tokens.truncate(c.model.context as usize);
    let mut vs = VarStore::new(Device::Cpu);
    let model = crate::model::Gpt::new(&vs.root(), &c.model, c.data.vocab_size);
    crate::checkpoint::load(&src.sidecar_path, &mut vs, &src.tokenizer.sha256)?;
    let ids: Vec<i64> = tokens.iter().map(|&t| t as i64).collect();
    let out = tch::no_grad(|| model.forward(&Tensor::from_slice(&ids).view([1, -1]), false))
        .squeeze_dim(0)
        .to_kind(Kind::Float);
    let rows: Vec<Vec<f32>> =
        (0..ids.len() as i64).map(|t| Vec::<f32>::try_from(out.get(t))).collect::<std::result::Result<_, _>>()?;
    Ok((tokens, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecars_are_found_from_either_file() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().join("step_000010.safetensors");
        std::fs::write(&w, b"x").unwrap();
        let e = sidecar_of(&w).unwrap_err().to_string();
        assert!(e.contains("step_000010.json"), "{e}");
        std::fs::write(dir.path().join("step_000010.json"), b"{}").unwrap();
        assert_eq!(sidecar_of(&w).unwrap(), dir.path().join("step_000010.json"));
        assert!(sidecar_of(&dir.path().join("step_000010.optim.safetensors"))
            .unwrap_err()
            .to_string()
            .contains("optimizer"));
        assert!(sidecar_of(Path::new("model.bin")).is_err());
    }
}
