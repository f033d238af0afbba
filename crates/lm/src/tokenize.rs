//! Byte-level BPE: trained on the training split (HF `tokenizers`, pure Rust), saved as JSON,
//! identified by the sha256 of that file. The token streams of the corpus splits are cached next
//! to the corpus, keyed by that hash, as little-endian u16.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::models::TrainerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::Tokenizer;

use output::provenance::sha256_file;

/// A loaded tokenizer and the hash of the file it came from.
pub struct Tok {
    pub inner: Tokenizer,
    pub sha256: String,
    pub path: PathBuf,
}

impl Tok {
    pub fn load(path: &Path) -> Result<Tok> {
        let inner = Tokenizer::from_file(path)
            .map_err(|e| anyhow::anyhow!("{}: not a tokenizer JSON file: {e}", path.display()))?;
        Ok(Tok { inner, sha256: sha256_file(path)?, path: path.to_owned() })
    }

    pub fn vocab_size(&self) -> i64 {
        self.inner.get_vocab_size(true) as i64
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.inner.encode(text, false).map_err(|e| anyhow::anyhow!("tokenizer: {e}"))?.get_ids().to_vec())
    }

    /// The token an empty context is scored after. lm-evaluation-harness uses the tokenizer's
    /// end-of-text token; ours have no special tokens, so it is the newline token `Ċ` (text in
    /// the corpus starts after a line break), which `lm export` declares as eos/bos.
    pub fn prefix_token(&self) -> Result<u32> {
        self.inner
            .token_to_id("Ċ")
            .with_context(|| format!("{}: no newline token `Ċ` to score empty contexts after", self.path.display()))
    }

    /// A (context, continuation) pair tokenized as lm-evaluation-harness's `_encode_pair`:
    /// trailing whitespace of the context moves to the continuation, and the continuation's
    /// tokens are the tail of `encode(context + continuation)` after `encode(context)`'s length.
    /// An empty (or all-whitespace) context is the prefix token, the continuation encoded alone.
    /// Returns the context tokens, the continuation tokens and the continuation text as scored.
    pub fn encode_pair(&self, context: &str, continuation: &str) -> Result<(Vec<u32>, Vec<u32>, String)> {
        let kept = context.trim_end();
        let cont = format!("{}{continuation}", &context[kept.len()..]);
        if kept.is_empty() {
            return Ok((vec![self.prefix_token()?], self.encode(&cont)?, cont));
        }
        let whole = self.encode(&format!("{kept}{cont}"))?;
        let ctx = self.encode(kept)?;
        if whole.len() <= ctx.len() {
            bail!("continuation {cont:?} adds no token after context {kept:?}");
        }
        let tail = whole[ctx.len()..].to_vec();
        Ok((ctx, tail, cont))
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(|e| anyhow::anyhow!("tokenizer: {e}"))
    }

    /// Where [`Tok::encode_file_cached`] keeps the token ids of `path`:
    /// `<stem>.<tokenizer12>.<text12>.u16` beside it (little-endian u16).
    pub fn cache_path(&self, path: &Path) -> Result<std::path::PathBuf> {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("text");
        let text_hash = sha256_file(path).with_context(|| format!("{}: cannot read", path.display()))?;
        Ok(path.with_file_name(format!("{stem}.{}.{}.u16", &self.sha256[..12], &text_hash[..12])))
    }

    /// Token ids of a whole text file, cached at [`Tok::cache_path`] (keyed by the tokenizer's
    /// and the text's sha256, so a rebuilt corpus is encoded again).
    pub fn encode_file_cached(&self, path: &Path) -> Result<Vec<u16>> {
        if self.vocab_size() > u16::MAX as i64 + 1 {
            bail!("{}: vocab of {} does not fit u16 token files", self.path.display(), self.vocab_size());
        }
        let cache = self.cache_path(path)?;
        if let Ok(bytes) = std::fs::read(&cache) {
            return Ok(bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect());
        }
        let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
        let docs: Vec<String> = text.split_inclusive("\n\n").map(str::to_owned).collect();
        let mut ids = Vec::with_capacity(text.len() / 3);
        for chunk in docs.chunks(4096) {
            let enc = self
                .inner
                .encode_batch(chunk.to_vec(), false)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            for e in enc {
                ids.extend(e.get_ids().iter().map(|&i| i as u16));
            }
        }
        let bytes: Vec<u8> = ids.iter().flat_map(|i| i.to_le_bytes()).collect();
        output::write_atomic(&cache, &bytes)?;
        Ok(ids)
    }
}

/// Trains a byte-level BPE of `vocab_size` on `train_file` and writes it to `out` (atomically).
pub fn train(train_file: &Path, vocab_size: usize, out: &Path) -> Result<Tok> {
    if !train_file.is_file() {
        bail!("{}: missing; run `just data` first", train_file.display());
    }
    let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
        .vocab_size(vocab_size)
        .min_frequency(2)
        .show_progress(false)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build()
        .into();
    let mut tok = Tokenizer::new(BPE::default());
    tok.with_pre_tokenizer(Some(ByteLevel::default()));
    tok.with_decoder(Some(ByteLevel::default()));
    tok.train_from_files(&mut trainer, vec![train_file.to_string_lossy().into_owned()])
        .map_err(|e| anyhow::anyhow!("{}: BPE training failed: {e}", train_file.display()))?;
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let json = tok.to_string(false).map_err(|e| anyhow::anyhow!("tokenizer: {e}"))?;
    output::write_atomic(out, json.as_bytes())?;
    Tok::load(out)
}
