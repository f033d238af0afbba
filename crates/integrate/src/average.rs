//! Checkpoint averaging over safetensors files, streamed tensor by tensor.
//!
//! Inputs are memory-mapped; for each tensor the k inputs are read, accumulated in f64 (or f32)
//! with the given weights, rounded back to the stored dtype (F32, F64, BF16 or F16) and written
//! out, so the heap holds one tensor's accumulator at a time, not k models. A checkpoint is a
//! `.safetensors` file, or a folder holding `model.safetensors` or a sharded Hugging Face
//! checkpoint (`model.safetensors.index.json` and its shards); a sharded output keeps the shard
//! layout of the first input. The output files are staged as one [`output::FileSet`] and moved
//! into place together when complete; on any error nothing is left behind.

use anyhow::{bail, Context, Result};
use memmap2::Mmap;
use safetensors::tensor::{Dtype, SafeTensors, View};
use safetensors::SafeTensorError;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};

use output::{FileSet, FolderLock};

/// Accumulation precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
pub enum Accumulate {
    F32,
    F64,
}

/// One checkpoint: its shard files and which shard holds each tensor.
pub struct Checkpoint {
    /// what the user named: the .safetensors file, or the checkpoint folder
    pub source: PathBuf,
    pub root: PathBuf,
    /// shard file name -> mapped bytes
    maps: BTreeMap<String, Mmap>,
    /// tensor name -> shard file name
    pub weight_map: BTreeMap<String, String>,
    /// tensor name -> (dtype, shape, byte range in its shard), read once from the headers
    layout: HashMap<String, (Dtype, Vec<usize>, std::ops::Range<usize>)>,
    /// the index.json if sharded
    pub index: Option<serde_json::Value>,
}

fn map(path: &Path) -> Result<Mmap> {
    let f = File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    // SAFETY: the file is only read; a concurrent writer could change what we read, which the
    // header/length checks below and the output's own hash make visible, never unsound to Rust
    // code that treats the bytes as plain data.
    unsafe { Mmap::map(&f) }.with_context(|| format!("{}: cannot map", path.display()))
}

fn parse<'a>(path: &Path, bytes: &'a [u8]) -> Result<SafeTensors<'a>> {
    SafeTensors::deserialize(bytes).map_err(|e: SafeTensorError| anyhow::anyhow!("{}: not a valid safetensors file (truncated or corrupt?): {e}", path.display()))
}

impl Checkpoint {
    pub fn open(path: &Path) -> Result<Checkpoint> {
        let (root, files, index) = if path.is_dir() {
            let idx = path.join("model.safetensors.index.json");
            if idx.is_file() {
                let text = std::fs::read_to_string(&idx).with_context(|| format!("{}: cannot read", idx.display()))?;
                let v: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{}: malformed index", idx.display()))?;
                let wm = v.get("weight_map").and_then(|m| m.as_object()).with_context(|| format!("{}: no weight_map", idx.display()))?;
                let mut files: Vec<String> = wm.values().filter_map(|f| f.as_str().map(str::to_owned)).collect();
                files.sort();
                files.dedup();
                (path.to_path_buf(), files, Some(v))
            } else if path.join("model.safetensors").is_file() {
                (path.to_path_buf(), vec!["model.safetensors".to_string()], None)
            } else {
                bail!("{}: neither model.safetensors nor model.safetensors.index.json inside", path.display());
            }
        } else {
            let name = path.file_name().and_then(|n| n.to_str()).with_context(|| format!("{}: not a file name", path.display()))?;
            (path.parent().unwrap_or(Path::new(".")).to_path_buf(), vec![name.to_string()], None)
        };
        let mut maps = BTreeMap::new();
        let mut weight_map = BTreeMap::new();
        let mut layout = HashMap::new();
        for f in files {
            let p = root.join(&f);
            let m = map(&p)?;
            for (name, v) in parse(&p, &m)?.tensors() {
                let start = v.data().as_ptr() as usize - m.as_ptr() as usize;
                layout.insert(name.clone(), (v.dtype(), v.shape().to_vec(), start..start + v.data().len()));
                if weight_map.insert(name.clone(), f.clone()).is_some() {
                    bail!("{}: tensor `{name}` appears in two shards", p.display());
                }
            }
            maps.insert(f, m);
        }
        if let Some(v) = &index {
            let listed = v["weight_map"].as_object().map_or(0, |m| m.len());
            if listed != weight_map.len() {
                bail!("{}: the index lists {listed} tensors, the shards hold {}", root.display(), weight_map.len());
            }
        }
        Ok(Checkpoint { source: path.to_path_buf(), root, maps, weight_map, layout, index })
    }

    fn tensor(&self, name: &str) -> Result<(Dtype, Vec<usize>, &[u8])> {
        let Some((dtype, shape, range)) = self.layout.get(name) else { bail!("{}: tensor `{name}` missing", self.source.display()) };
        Ok((*dtype, shape.clone(), &self.maps[&self.weight_map[name]][range.clone()]))
    }

    fn shard_path(&self, name: &str) -> PathBuf {
        self.root.join(&self.weight_map[name])
    }
}

fn read_as_f64(dtype: Dtype, bytes: &[u8], out: &mut [f64], w: f64) -> Result<()> {
    match dtype {
        Dtype::F32 => bytes.chunks_exact(4).zip(out).for_each(|(c, o)| *o += w * f32::from_le_bytes(c.try_into().unwrap()) as f64),
        Dtype::F64 => bytes.chunks_exact(8).zip(out).for_each(|(c, o)| *o += w * f64::from_le_bytes(c.try_into().unwrap())),
        Dtype::BF16 => bytes.chunks_exact(2).zip(out).for_each(|(c, o)| *o += w * half::bf16::from_le_bytes([c[0], c[1]]).to_f64()),
        Dtype::F16 => bytes.chunks_exact(2).zip(out).for_each(|(c, o)| *o += w * half::f16::from_le_bytes([c[0], c[1]]).to_f64()),
        other => bail!("dtype {other:?} cannot be averaged (only F32, F64, BF16, F16)"),
    }
    Ok(())
}

fn read_as_f32(dtype: Dtype, bytes: &[u8], out: &mut [f32], w: f32) -> Result<()> {
    match dtype {
        Dtype::F32 => bytes.chunks_exact(4).zip(out).for_each(|(c, o)| *o += w * f32::from_le_bytes(c.try_into().unwrap())),
        Dtype::BF16 => bytes.chunks_exact(2).zip(out).for_each(|(c, o)| *o += w * half::bf16::from_le_bytes([c[0], c[1]]).to_f32()),
        Dtype::F16 => bytes.chunks_exact(2).zip(out).for_each(|(c, o)| *o += w * half::f16::from_le_bytes([c[0], c[1]]).to_f32()),
        other => bail!("dtype {other:?} cannot be accumulated in f32 (use f64)"),
    }
    Ok(())
}

fn encode<T: Copy>(dtype: Dtype, acc: &[T], to_f64: impl Fn(T) -> f64) -> Vec<u8> {
    match dtype {
        Dtype::F32 => acc.iter().flat_map(|&v| (to_f64(v) as f32).to_le_bytes()).collect(),
        Dtype::F64 => acc.iter().flat_map(|&v| to_f64(v).to_le_bytes()).collect(),
        Dtype::BF16 => acc.iter().flat_map(|&v| half::bf16::from_f64(to_f64(v)).to_le_bytes()).collect(),
        Dtype::F16 => acc.iter().flat_map(|&v| half::f16::from_f64(to_f64(v)).to_le_bytes()).collect(),
        _ => unreachable!("checked when reading"),
    }
}

/// A tensor whose bytes are computed only when the writer asks for them.
struct Lazy<'a> {
    name: String,
    dtype: Dtype,
    shape: Vec<usize>,
    inputs: &'a [Checkpoint],
    weights: &'a [f64],
    acc: Accumulate,
    error: &'a std::cell::RefCell<Option<anyhow::Error>>,
}

impl Lazy<'_> {
    fn compute(&self) -> Result<Vec<u8>> {
        let n: usize = self.shape.iter().product();
        // bit-exact shortcut: identical inputs with weights summing to one average to themselves
        let first = self.inputs[0].tensor(&self.name)?.2;
        if self.inputs.iter().skip(1).all(|c| c.tensor(&self.name).is_ok_and(|t| t.2 == first)) && (self.weights.iter().sum::<f64>() - 1.0).abs() < 1e-12 {
            return Ok(first.to_vec());
        }
        match self.acc {
            Accumulate::F64 => {
                let mut acc = vec![0f64; n];
                for (c, &w) in self.inputs.iter().zip(self.weights) {
                    let (dt, _, b) = c.tensor(&self.name)?;
                    read_as_f64(dt, b, &mut acc, w).with_context(|| format!("{}: tensor `{}`", c.shard_path(&self.name).display(), self.name))?;
                }
                Ok(encode(self.dtype, &acc, |v| v))
            }
            Accumulate::F32 => {
                let mut acc = vec![0f32; n];
                for (c, &w) in self.inputs.iter().zip(self.weights) {
                    let (dt, _, b) = c.tensor(&self.name)?;
                    read_as_f32(dt, b, &mut acc, w as f32).with_context(|| format!("{}: tensor `{}`", c.shard_path(&self.name).display(), self.name))?;
                }
                Ok(encode(self.dtype, &acc, |v| v as f64))
            }
        }
    }
}

impl View for Lazy<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        match self.compute() {
            Ok(b) => Cow::Owned(b),
            Err(e) => {
                // the writer cannot return our error: remember it, write zeros, and fail after
                let n = self.data_len();
                self.error.borrow_mut().get_or_insert(e);
                Cow::Owned(vec![0; n])
            }
        }
    }
    fn data_len(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.bitsize() / 8
    }
}

/// Checks that every input has the same tensor names, shapes and dtypes as the first.
pub fn check_compatible(inputs: &[Checkpoint]) -> Result<()> {
    let first = &inputs[0];
    for c in &inputs[1..] {
        for name in first.weight_map.keys() {
            if !c.weight_map.contains_key(name) {
                bail!("{}: tensor `{name}` is missing (present in {})", c.source.display(), first.shard_path(name).display());
            }
        }
        if let Some(extra) = c.weight_map.keys().find(|n| !first.weight_map.contains_key(*n)) {
            bail!("{}: tensor `{extra}` is not in {}", c.shard_path(extra).display(), first.source.display());
        }
        for name in first.weight_map.keys() {
            let (da, sa, _) = first.tensor(name)?;
            let (db, sb, _) = c.tensor(name)?;
            if sa != sb {
                bail!("{}: tensor `{name}` has shape {sb:?}, {} has {sa:?}", c.shard_path(name).display(), first.shard_path(name).display());
            }
            if da != db {
                bail!("{}: tensor `{name}` has dtype {db:?}, {} has {da:?}", c.shard_path(name).display(), first.shard_path(name).display());
            }
        }
    }
    Ok(())
}

/// Stages the weighted mean of `inputs` into `set`: as `file` for single-file inputs, or with
/// the shard layout and index of the first input for sharded ones. `weights` must be
/// non-negative and sum to 1. Returns the names written.
pub fn average_into(inputs: &[Checkpoint], weights: &[f64], acc: Accumulate, set: &mut FileSet, file: &str) -> Result<Vec<String>> {
    if inputs.is_empty() || inputs.len() != weights.len() {
        bail!("need one weight per input ({} inputs, {} weights)", inputs.len(), weights.len());
    }
    if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) || (weights.iter().sum::<f64>() - 1.0).abs() > 1e-9 {
        bail!("weights must be non-negative and sum to 1, got {weights:?}");
    }
    check_compatible(inputs)?;
    let first = &inputs[0];
    let mut shards: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, shard) in &first.weight_map {
        shards.entry(shard).or_default().push(name);
    }
    let targets: Vec<(String, Vec<&str>)> = if first.index.is_some() {
        shards.into_iter().map(|(s, names)| (s.to_string(), names)).collect()
    } else {
        vec![(file.to_string(), first.weight_map.keys().map(String::as_str).collect())]
    };
    let mut written = Vec::new();
    for (target, names) in &targets {
        let error = std::cell::RefCell::new(None);
        let mut views = Vec::new();
        for name in names {
            let (dtype, shape, _) = first.tensor(name)?;
            views.push((name.to_string(), Lazy { name: name.to_string(), dtype, shape, inputs, weights, acc, error: &error }));
        }
        let meta: HashMap<String, String> = [("format".to_string(), "pt".to_string())].into();
        set.write_via(target, |tmp| {
            safetensors::serialize_to_file(views, Some(meta), tmp).map_err(|e| anyhow::anyhow!("{e}"))?;
            error.take().map_or(Ok(()), Err)
        })?;
        written.push(target.clone());
    }
    if let Some(index) = &first.index {
        // the first input's index with its total size recomputed (other metadata kept)
        let mut index = index.clone();
        let total: usize = first.layout.values().map(|(_, _, r)| r.len()).sum();
        if !index.get("metadata").is_some_and(serde_json::Value::is_object) {
            index["metadata"] = serde_json::json!({});
        }
        index["metadata"]["total_size"] = serde_json::json!(total);
        index["weight_map"] = serde_json::to_value(&first.weight_map)?;
        set.write("model.safetensors.index.json", serde_json::to_string_pretty(&index)?.as_bytes())?;
        written.push("model.safetensors.index.json".into());
    }
    Ok(written)
}

/// Writes the weighted mean of `inputs` to `out` (a .safetensors file, or a folder for sharded
/// inputs), all files or none; the folder written to is locked meanwhile.
pub fn average(inputs: &[Checkpoint], weights: &[f64], acc: Accumulate, out: &Path) -> Result<Vec<PathBuf>> {
    let sharded = inputs.first().is_some_and(|c| c.index.is_some());
    let (dir, file) = if sharded {
        (out.to_path_buf(), String::new())
    } else {
        let name = out.file_name().and_then(|n| n.to_str()).with_context(|| format!("{}: not a file name", out.display()))?;
        (out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf(), name.to_string())
    };
    let lock = FolderLock::acquire(&dir, "integrate average")?;
    let mut set = FileSet::begin(&lock, &dir)?;
    average_into(inputs, weights, acc, &mut set, &file)?;
    set.commit()
}

/// Every file a checkpoint is made of (shards, and the index if sharded), for hashing.
impl Checkpoint {
    pub fn files(&self) -> Vec<PathBuf> {
        let mut f: Vec<PathBuf> = self.maps.keys().map(|s| self.root.join(s)).collect();
        if self.index.is_some() {
            f.push(self.root.join("model.safetensors.index.json"));
        }
        f
    }
}

/// Uniform weights 1/k.
pub fn uniform(k: usize) -> Vec<f64> {
    vec![1.0 / k as f64; k]
}

/// Exponential weights over k inputs ordered oldest to newest: w_j proportional to
/// (1 - alpha)^(k - 1 - j), normalised (the newest weighs most).
pub fn exponential(k: usize, alpha: f64) -> Vec<f64> {
    let raw: Vec<f64> = (0..k).map(|j| (1.0 - alpha).powi((k - 1 - j) as i32)).collect();
    let s: f64 = raw.iter().sum();
    raw.into_iter().map(|w| w / s).collect()
}
