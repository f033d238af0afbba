//! Checkpoint averaging over safetensors files, streamed.
//!
//! Inputs are memory-mapped; every element is accumulated in f64 (or f32) over the k inputs in
//! order with the given weights and rounded once to the output dtype: the stored one (F32, F64,
//! BF16 or F16), or F32, BF16 or F16 for every tensor ([`Layout`], `--out-dtype`).
//! The work is split across elements into jobs of [`CHUNK`] elements of one tensor, run on the
//! rayon pool; a job sums blocks of elements in registers (16 at a time, across up to 4 inputs
//! per pass over the block), rounds them into a buffer of its thread, and writes the buffer at
//! its place in the output file. The heap holds no tensor. Splitting across elements, never
//! across inputs, leaves every element's operations (0 + w_1 x_1 + ... + w_k x_k, in input
//! order, then one rounding) those of a sequential pass, so the bytes do not depend on the
//! number of threads. A checkpoint is a
//! `.safetensors` file, or a folder holding `model.safetensors` or a sharded Hugging Face
//! checkpoint (`model.safetensors.index.json` and its shards). The output is one file, or shards
//! of at most a given size with an index, split as transformers' `save_pretrained` splits a
//! model ([`plan_shards`]), whatever the inputs' shards. The output files are staged as one
//! [`output::FileSet`] and moved into place together when complete; on any error nothing is
//! left behind.

use anyhow::{bail, Context, Result};
use memmap2::Mmap;
use safetensors::tensor::{Dtype, SafeTensors};
use safetensors::SafeTensorError;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
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
    SafeTensors::deserialize(bytes).map_err(|e: SafeTensorError| {
        anyhow::anyhow!("{}: not a valid safetensors file (truncated or corrupt?): {e}", path.display())
    })
}

impl Checkpoint {
    pub fn open(path: &Path) -> Result<Checkpoint> {
        let (root, files, index) = if path.is_dir() {
            let idx = path.join("model.safetensors.index.json");
            if idx.is_file() {
                let text = std::fs::read_to_string(&idx).with_context(|| format!("{}: cannot read", idx.display()))?;
                let v: serde_json::Value =
                    serde_json::from_str(&text).with_context(|| format!("{}: malformed index", idx.display()))?;
                let wm = v
                    .get("weight_map")
                    .and_then(|m| m.as_object())
                    .with_context(|| format!("{}: no weight_map", idx.display()))?;
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
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .with_context(|| format!("{}: not a file name", path.display()))?;
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
        let Some((dtype, shape, range)) = self.layout.get(name) else {
            bail!("{}: tensor `{name}` missing", self.source.display())
        };
        Ok((*dtype, shape.clone(), &self.maps[&self.weight_map[name]][range.clone()]))
    }

    fn shard_path(&self, name: &str) -> PathBuf {
        self.root.join(&self.weight_map[name])
    }
}

/// Elements per parallel job: a contiguous range of one tensor (1 MiB of f32 output), written
/// with one pwrite; large enough to amortise the file system's cost per write (64 Ki elements
/// took 10% longer), small enough for the threads to balance.
pub const CHUNK: usize = 1 << 18;
/// Elements per block inside a job: their sums (16 KiB of f64) stay in L1 until rounded.
const BLOCK: usize = 2048;

/// bf16 to f32 as `half` does it (exact; a NaN gets its quiet bit), in a form that vectorises.
#[inline(always)]
fn bf16_to_f32(b: u16) -> f32 {
    let x = (b as u32) << 16;
    f32::from_bits(if x & 0x7FFF_FFFF > 0x7F80_0000 { x | 0x0040_0000 } else { x })
}

/// `half::bf16::from_f64`, branch-free so that it vectorises, for every `v` whose result is a
/// normal bf16 or a signed zero (rounded from below 2^-141), and whether `v` is such a value
/// (else the caller uses `half` itself: bf16 subnormals, overflow, infinities, NaNs). Like
/// `half`, it rounds the upper 32 bits of `v` to nearest, ties to even: the same bits.
#[inline(always)]
fn bf16_from_f64_fast(v: f64) -> (u16, bool) {
    let x = (v.to_bits() >> 32) as u32;
    let sign = (x >> 16) & 0x8000;
    let y = x & 0x7FFF_FFFF;
    // bf16's exponent bias is 127, f64's 1023: normal results have f64 exponents 897..=1150
    let normal = ((897 << 20)..(1151 << 20)).contains(&y);
    // half: "7 - half_exp > 21" (an f64 exponent below 882), a full underflow to signed zero
    let zero = y < (882 << 20);
    // rebias, then drop the low 13 bits rounding to nearest, ties to even (half's test of its
    // round bit 12 against bits 0-11 and 13, as an addition)
    let z = y.wrapping_sub(896 << 20);
    let rounded = z.wrapping_add(0x0FFF + ((z >> 13) & 1)) >> 13;
    let b = if zero { sign } else { sign | (rounded & 0xFFFF) };
    (b as u16, normal | zero)
}

/// A stored element type, read as the sequential code read it.
trait Elem {
    const SIZE: usize;
    fn f64(b: &[u8]) -> f64;
    fn f32(b: &[u8]) -> f32;
}
struct F32;
struct F64;
struct Bf16;
struct F16;
impl Elem for F32 {
    const SIZE: usize = 4;
    #[inline(always)]
    fn f64(b: &[u8]) -> f64 {
        Self::f32(b) as f64
    }
    #[inline(always)]
    fn f32(b: &[u8]) -> f32 {
        f32::from_le_bytes(b[..4].try_into().unwrap())
    }
}
impl Elem for F64 {
    const SIZE: usize = 8;
    #[inline(always)]
    fn f64(b: &[u8]) -> f64 {
        f64::from_le_bytes(b[..8].try_into().unwrap())
    }
    fn f32(_: &[u8]) -> f32 {
        unreachable!("f64 tensors are refused for f32 accumulation")
    }
}
impl Elem for Bf16 {
    const SIZE: usize = 2;
    #[inline(always)]
    fn f64(b: &[u8]) -> f64 {
        Self::f32(b) as f64
    }
    #[inline(always)]
    fn f32(b: &[u8]) -> f32 {
        bf16_to_f32(u16::from_le_bytes(b[..2].try_into().unwrap()))
    }
}
impl Elem for F16 {
    const SIZE: usize = 2;
    #[inline(always)]
    fn f64(b: &[u8]) -> f64 {
        half::f16::from_bits(u16::from_le_bytes(b[..2].try_into().unwrap())).to_f64()
    }
    #[inline(always)]
    fn f32(b: &[u8]) -> f32 {
        half::f16::from_bits(u16::from_le_bytes(b[..2].try_into().unwrap())).to_f32()
    }
}

/// Lanes summed together in registers.
const LANES: usize = 16;

/// Inputs read together in one pass over a block. Their lines lie at the same offsets of their
/// pages (in the page cache's large folios, of larger blocks too), so they compete for the same
/// cache sets: reading all 16 at once, averaging 16 bf16 checkpoints of 256 MB took 4x longer
/// than 4 at a time (not so at 32 MB); 8 at a time was sometimes as slow.
const STREAMS: usize = 4;

/// acc[i] = 0 + w_1 x_1[first + i] + ... + w_k x_k[first + i], the terms added in input order
/// (the sequential code's operations, element by element), for i < acc.len(). LANES elements at
/// a time, their sums held in registers across up to [`STREAMS`] inputs; with more inputs, the
/// block is passed over again for the next ones, the sums kept in `acc` in between (exactly:
/// stored as they are), so the additions and their order stay those of one pass.
#[inline(always)]
fn sum<T, E: Elem>(inputs: &[&[u8]], weights: &[T], first: usize, acc: &mut [T], read: impl Fn(&[u8]) -> T)
where
    T: Copy + Default + std::ops::Add<Output = T> + std::ops::Mul<Output = T>,
{
    for (pass, (xs, ws)) in inputs.chunks(STREAMS).zip(weights.chunks(STREAMS)).enumerate() {
        let mut groups = acc.chunks_exact_mut(LANES);
        let mut i = first;
        for g in &mut groups {
            let mut s = [T::default(); LANES];
            if pass > 0 {
                s.copy_from_slice(g);
            }
            for (x, &w) in xs.iter().zip(ws) {
                let b = &x[i * E::SIZE..(i + LANES) * E::SIZE];
                for (l, s) in s.iter_mut().enumerate() {
                    *s = *s + w * read(&b[l * E::SIZE..]);
                }
            }
            g.copy_from_slice(&s);
            i += LANES;
        }
        for o in groups.into_remainder() {
            let mut s = if pass > 0 { *o } else { T::default() };
            for (x, &w) in xs.iter().zip(ws) {
                s = s + w * read(&x[i * E::SIZE..]);
            }
            *o = s;
            i += 1;
        }
    }
}

/// Rounds a block of f64 values to `dtype` into `out` (as the sequential code did, through f64).
#[inline(always)]
fn encode(dtype: Dtype, acc: &[f64], out: &mut [u8]) {
    match dtype {
        Dtype::F32 => out.chunks_exact_mut(4).zip(acc).for_each(|(o, &v)| o.copy_from_slice(&(v as f32).to_le_bytes())),
        Dtype::F64 => out.chunks_exact_mut(8).zip(acc).for_each(|(o, &v)| o.copy_from_slice(&v.to_le_bytes())),
        Dtype::BF16 => {
            let mut all_fast = true;
            for (o, &v) in out.chunks_exact_mut(2).zip(acc) {
                let (b, fast) = bf16_from_f64_fast(v);
                o.copy_from_slice(&b.to_le_bytes());
                all_fast &= fast;
            }
            if !all_fast {
                // bf16 subnormals, overflow, infinities and NaNs: half's own conversion
                for (o, &v) in out.chunks_exact_mut(2).zip(acc) {
                    if !bf16_from_f64_fast(v).1 {
                        o.copy_from_slice(&half::bf16::from_f64(v).to_le_bytes());
                    }
                }
            }
        }
        Dtype::F16 => out
            .chunks_exact_mut(2)
            .zip(acc)
            .for_each(|(o, &v)| o.copy_from_slice(&half::f16::from_f64(v).to_le_bytes())),
        _ => unreachable!("dtypes are checked before writing"),
    }
}

/// One output tensor: its inputs' dtype, the dtype it is written in, its inputs' bytes, and
/// whether they are all identical (with weights summing to one and no change of dtype, the
/// output is then the input itself, bit for bit).
struct Plan<'a> {
    dtype: Dtype,
    out: Dtype,
    inputs: Vec<&'a [u8]>,
    copy: bool,
}

/// Computes elements `range` of one tensor into `out`, block by block: for every element the
/// accumulator starts at zero and takes w_j * x_j for j = 1..k in input order, then is rounded
/// to the stored dtype. Neither the block nor the job boundaries change any element's
/// operations, so the bytes are those of a sequential pass whatever the threads.
#[inline(always)]
fn compute_range(plan: &Plan, weights: &[f64], acc: Accumulate, range: std::ops::Range<usize>, out: &mut [u8]) {
    let size = plan.out.bitsize() / 8;
    if plan.copy {
        out.copy_from_slice(&plan.inputs[0][range.start * size..range.end * size]);
        return;
    }
    let weights32: Vec<f32> = weights.iter().map(|&w| w as f32).collect();
    let (mut a64, mut a32) = ([0f64; BLOCK], [0f32; BLOCK]);
    let mut start = range.start;
    let mut o = 0;
    while start < range.end {
        let end = (start + BLOCK).min(range.end);
        let n = end - start;
        let a64 = &mut a64[..n];
        match acc {
            Accumulate::F64 => match plan.dtype {
                Dtype::F32 => sum::<f64, F32>(&plan.inputs, weights, start, a64, F32::f64),
                Dtype::F64 => sum::<f64, F64>(&plan.inputs, weights, start, a64, F64::f64),
                Dtype::BF16 => sum::<f64, Bf16>(&plan.inputs, weights, start, a64, Bf16::f64),
                Dtype::F16 => sum::<f64, F16>(&plan.inputs, weights, start, a64, F16::f64),
                _ => unreachable!("dtypes are checked before writing"),
            },
            Accumulate::F32 => {
                let a32 = &mut a32[..n];
                match plan.dtype {
                    Dtype::F32 => sum::<f32, F32>(&plan.inputs, &weights32, start, a32, F32::f32),
                    Dtype::BF16 => sum::<f32, Bf16>(&plan.inputs, &weights32, start, a32, Bf16::f32),
                    Dtype::F16 => sum::<f32, F16>(&plan.inputs, &weights32, start, a32, F16::f32),
                    _ => unreachable!("dtypes are checked before writing"),
                }
                a64.iter_mut().zip(a32.iter()).for_each(|(d, &s)| *d = s as f64);
            }
        }
        encode(plan.out, a64, &mut out[o..o + n * size]);
        o += n * size;
        start = end;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn compute_range_avx2(
    plan: &Plan,
    weights: &[f64],
    acc: Accumulate,
    range: std::ops::Range<usize>,
    out: &mut [u8],
) {
    compute_range(plan, weights, acc, range, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn compute_range_avx512(
    plan: &Plan,
    weights: &[f64],
    acc: Accumulate,
    range: std::ops::Range<usize>,
    out: &mut [u8],
) {
    compute_range(plan, weights, acc, range, out)
}

/// [`compute_range`] built for the widest vectors the CPU has. The arithmetic is the same in
/// every build: element-wise IEEE operations, and Rust never fuses a * b + c into an FMA.
fn compute_job(plan: &Plan, weights: &[f64], acc: Accumulate, range: std::ops::Range<usize>, out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") && has!("avx512bw") && has!("avx512dq") && has!("avx512vl") {
            // SAFETY: the CPU has these features, checked just above
            return unsafe { compute_range_avx512(plan, weights, acc, range, out) };
        }
        if has!("avx2") {
            // SAFETY: as above
            return unsafe { compute_range_avx2(plan, weights, acc, range, out) };
        }
    }
    compute_range(plan, weights, acc, range, out)
}

/// The safetensors header `serialize_to_file` writes for these tensors (sorted by descending
/// dtype alignment, then name; JSON padded with spaces to 8 bytes), and each tensor's byte
/// offset in the data, in that order.
fn header(tensors: &mut [(&str, Dtype, Vec<usize>)]) -> Result<(Vec<u8>, Vec<usize>)> {
    tensors.sort_by(|(ln, ld, _), (rn, rd, _)| rd.cmp(ld).then(ln.cmp(rn)));
    let (mut infos, mut offsets, mut offset) = (Vec::new(), Vec::new(), 0);
    for (name, dtype, shape) in tensors.iter() {
        let n = shape.iter().product::<usize>() * dtype.bitsize() / 8;
        infos.push((
            name.to_string(),
            safetensors::tensor::TensorInfo { dtype: *dtype, shape: shape.clone(), data_offsets: (offset, offset + n) },
        ));
        offsets.push(offset);
        offset += n;
    }
    offsets.push(offset);
    let meta: HashMap<String, String> = [("format".to_string(), "pt".to_string())].into();
    let metadata = safetensors::tensor::Metadata::new(Some(meta), infos).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut json = serde_json::to_string(&metadata)?.into_bytes();
    json.resize(json.len().next_multiple_of(8), b' ');
    let mut head = (json.len() as u64).to_le_bytes().to_vec();
    head.extend(json);
    Ok((head, offsets))
}

/// The dtype an average's tensors are written in (`--out-dtype`, mergekit's `out_dtype`);
/// without one, every tensor keeps its inputs' dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum OutDtype {
    F32,
    Bf16,
    F16,
}

impl OutDtype {
    pub fn dtype(self) -> Dtype {
        match self {
            OutDtype::F32 => Dtype::F32,
            OutDtype::Bf16 => Dtype::BF16,
            OutDtype::F16 => Dtype::F16,
        }
    }

    /// A dtype named as mergekit names it (`float32`, `bfloat16`, `float16`, with or without
    /// `torch.`), or as `--out-dtype` does (`f32`, `bf16`, `f16`).
    pub fn from_name(name: &str) -> Option<OutDtype> {
        match name.strip_prefix("torch.").unwrap_or(name) {
            "float32" | "f32" => Some(OutDtype::F32),
            "bfloat16" | "bf16" => Some(OutDtype::Bf16),
            "float16" | "f16" => Some(OutDtype::F16),
            _ => None,
        }
    }
}

/// transformers' and huggingface_hub's default `max_shard_size`: 5 GB (5 x 10^9 bytes).
pub const DEFAULT_SHARD_SIZE: u64 = 5_000_000_000;

/// How an average is written: the dtype of its tensors, and at most how many tensor bytes go
/// into one file before the output is split into shards with an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// None: every tensor in its inputs' dtype
    pub dtype: Option<OutDtype>,
    /// as transformers' `max_shard_size`: a tensor larger than this gets a shard of its own;
    /// `u64::MAX` for one file whatever the size
    pub max_shard_size: u64,
}

impl Default for Layout {
    fn default() -> Self {
        Layout { dtype: None, max_shard_size: DEFAULT_SHARD_SIZE }
    }
}

impl Layout {
    /// One file, every tensor in its inputs' dtype.
    pub const ONE_FILE: Layout = Layout { dtype: None, max_shard_size: u64::MAX };
}

/// A size as transformers' `max_shard_size` takes it (its `convert_file_size_to_int`): an integer
/// number of bytes, or an integer followed by KB, MB, GB or TB (powers of 1000; a final lower-case
/// `b`, as in "5Gb", counts bits) or KiB, MiB, GiB or TiB (powers of 1024), the unit in any case.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let upper = t.to_ascii_uppercase();
    let units: [(&str, u64); 8] = [
        ("KIB", 1 << 10),
        ("MIB", 1 << 20),
        ("GIB", 1 << 30),
        ("TIB", 1 << 40),
        ("KB", 1_000),
        ("MB", 1_000_000),
        ("GB", 1_000_000_000),
        ("TB", 1_000_000_000_000),
    ];
    let (digits, factor, bits) = match units.iter().find(|(u, _)| upper.ends_with(u)) {
        Some((u, f)) => (&t[..t.len() - u.len()], *f, u.len() == 2 && t.ends_with('b')),
        None => (t, 1, false),
    };
    let bad = || {
        anyhow::anyhow!(
            "{text:?} is not a size: give a whole number of bytes, or one followed by a unit (5GB, 500MB, 2GiB)"
        )
    };
    let n: u64 = digits.trim().parse().map_err(|_| bad())?;
    let bytes = n.checked_mul(factor).ok_or_else(bad)? / if bits { 8 } else { 1 };
    if bytes == 0 {
        bail!("{text:?}: a shard size must be at least one byte");
    }
    Ok(bytes)
}

/// The files an average is written to: each file's name and the tensors it holds, and the
/// tensors' bytes in all (the index's `metadata.total_size`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardPlan {
    pub files: Vec<(String, Vec<String>)>,
    pub total_size: u64,
}

impl ShardPlan {
    /// Whether the output is sharded (more than one file, with an index).
    pub fn sharded(&self) -> bool {
        self.files.len() > 1
    }
}

/// Splits the tensors of `first` (in its order: shard by shard, each in file order), written in
/// `out` (or each in its own dtype), as huggingface_hub's `split_torch_state_dict_into_shards`
/// does for transformers' `save_pretrained`: tensors are added to the current shard until the
/// next would take it over `max_shard_size` bytes; a tensor larger than that gets a shard of its
/// own. One shard is the file `file` itself; several are `<stem>-00001-of-0000N.safetensors`
/// (stem: `file` less `.safetensors`, as `model` in `model.safetensors`).
pub fn plan_shards(first: &Checkpoint, out: Option<OutDtype>, max_shard_size: u64, file: &str) -> ShardPlan {
    let mut order: Vec<(&String, &String, usize, Dtype, usize)> = first
        .layout
        .iter()
        .map(|(name, (dtype, shape, range))| {
            (&first.weight_map[name], name, range.start, out.map_or(*dtype, OutDtype::dtype), shape.iter().product())
        })
        .collect();
    order.sort_by(|a, b| (a.0, a.2, a.1).cmp(&(b.0, b.2, b.1)));
    let (mut shards, mut current, mut current_size, mut total) = (Vec::new(), Vec::new(), 0u64, 0u64);
    for (_, name, _, dtype, numel) in order {
        let size = (numel * dtype.bitsize() / 8) as u64;
        total += size;
        if size > max_shard_size {
            shards.push(vec![name.clone()]);
            continue;
        }
        if current_size + size > max_shard_size {
            shards.push(std::mem::take(&mut current));
            current_size = 0;
        }
        current.push(name.clone());
        current_size += size;
    }
    if !current.is_empty() || shards.is_empty() {
        shards.push(current);
    }
    let n = shards.len();
    let files = if n == 1 {
        vec![(file.to_string(), shards.pop().unwrap())]
    } else {
        let stem = file.strip_suffix(".safetensors").unwrap_or(file);
        shards.into_iter().enumerate().map(|(i, s)| (format!("{stem}-{:05}-of-{n:05}.safetensors", i + 1), s)).collect()
    };
    ShardPlan { files, total_size: total }
}

/// Writes the weighted mean of the tensors `names` of `inputs` to `path` as one safetensors
/// file, each tensor in `out` (or its inputs' dtype), in parallel on the current rayon pool:
/// jobs of [`CHUNK`] elements of one tensor.
fn write_mean(
    inputs: &[Checkpoint],
    weights: &[f64],
    acc: Accumulate,
    out: Option<Dtype>,
    names: &[&str],
    path: &Path,
) -> Result<()> {
    use rayon::prelude::*;
    let first = &inputs[0];
    let mut tensors = Vec::with_capacity(names.len());
    for name in names {
        let (dtype, shape, _) = first.tensor(name)?;
        if let Err(why) = averageable(dtype, acc) {
            bail!("{}: tensor `{name}`: {why}", first.shard_path(name).display());
        }
        tensors.push((*name, out.unwrap_or(dtype), shape));
    }
    let (head, offsets) = header(&mut tensors)?;
    let sums_to_one = (weights.iter().sum::<f64>() - 1.0).abs() < 1e-12;
    let mut plans = Vec::with_capacity(tensors.len());
    for (name, out_dtype, _) in &tensors {
        let dtype = first.tensor(name)?.0;
        let bytes: Vec<&[u8]> = inputs.iter().map(|c| c.tensor(name).map(|t| t.2)).collect::<Result<_>>()?;
        let copy = sums_to_one && dtype == *out_dtype && bytes[1..].iter().all(|b| *b == bytes[0]);
        plans.push(Plan { dtype, out: *out_dtype, inputs: bytes, copy });
    }
    let file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(path)?;
    file.set_len((head.len() + offsets[offsets.len() - 1]) as u64)?;
    file.write_all_at(&head, 0)?;
    let mut jobs = Vec::new();
    for (t, plan) in plans.iter().enumerate() {
        let size = plan.out.bitsize() / 8;
        let n = (offsets[t + 1] - offsets[t]) / size;
        for start in (0..n).step_by(CHUNK) {
            jobs.push((plan, start..(start + CHUNK).min(n), (head.len() + offsets[t] + start * size) as u64));
        }
    }
    // each job computes into a buffer of its thread and writes it at its place with pwrite (a
    // write error is an error, where a memory-mapped output would die of SIGBUS)
    jobs.into_par_iter().try_for_each_init(Vec::new, |buf: &mut Vec<u8>, (plan, range, at)| {
        buf.resize(range.len() * (plan.out.bitsize() / 8), 0);
        compute_job(plan, weights, acc, range, buf);
        file.write_all_at(buf, at)
    })?;
    Ok(())
}

/// Whether tensors of `dtype` can be averaged with accumulator `acc`, and if not, why.
fn averageable(dtype: Dtype, acc: Accumulate) -> std::result::Result<(), String> {
    match acc {
        Accumulate::F64 if matches!(dtype, Dtype::F32 | Dtype::F64 | Dtype::BF16 | Dtype::F16) => Ok(()),
        Accumulate::F32 if matches!(dtype, Dtype::F32 | Dtype::BF16 | Dtype::F16) => Ok(()),
        Accumulate::F64 => Err(format!("dtype {dtype:?} cannot be averaged (only F32, F64, BF16, F16)")),
        Accumulate::F32 => Err(format!("dtype {dtype:?} cannot be accumulated in f32 (use f64)")),
    }
}

/// Checks, before anything is written, that every tensor of the first input (the others match
/// it: [`check_compatible`]) has a dtype that can be averaged with `acc`, naming the file and the
/// tensor of the first that cannot (an integer tensor, say).
pub fn check_dtypes(inputs: &[Checkpoint], acc: Accumulate) -> Result<()> {
    let Some(first) = inputs.first() else { return Ok(()) };
    for name in first.weight_map.keys() {
        let (dtype, _, _) = first.tensor(name)?;
        if let Err(why) = averageable(dtype, acc) {
            bail!("{}: tensor `{name}`: {why}", first.shard_path(name).display());
        }
    }
    Ok(())
}

/// Checks that every input has the same tensor names, shapes and dtypes as the first.
pub fn check_compatible(inputs: &[Checkpoint]) -> Result<()> {
    let first = &inputs[0];
    for c in &inputs[1..] {
        for name in first.weight_map.keys() {
            if !c.weight_map.contains_key(name) {
                bail!(
                    "{}: tensor `{name}` is missing (present in {})",
                    c.source.display(),
                    first.shard_path(name).display()
                );
            }
        }
        if let Some(extra) = c.weight_map.keys().find(|n| !first.weight_map.contains_key(*n)) {
            bail!("{}: tensor `{extra}` is not in {}", c.shard_path(extra).display(), first.source.display());
        }
        for name in first.weight_map.keys() {
            let (da, sa, _) = first.tensor(name)?;
            let (db, sb, _) = c.tensor(name)?;
            if sa != sb {
                bail!(
                    "{}: tensor `{name}` has shape {sb:?}, {} has {sa:?}",
                    c.shard_path(name).display(),
                    first.shard_path(name).display()
                );
            }
            if da != db {
                bail!(
                    "{}: tensor `{name}` has dtype {db:?}, {} has {da:?}",
                    c.shard_path(name).display(),
                    first.shard_path(name).display()
                );
            }
        }
    }
    Ok(())
}

/// Checks one finite weight per input, and that the inputs match.
fn check_weighted_sum(inputs: &[Checkpoint], weights: &[f64]) -> Result<()> {
    if inputs.is_empty() || inputs.len() != weights.len() {
        bail!("need one weight per input ({} inputs, {} weights)", inputs.len(), weights.len());
    }
    if weights.iter().any(|w| !w.is_finite()) {
        bail!("weights must be finite numbers, got {weights:?}");
    }
    check_compatible(inputs)
}

/// As [`check_weighted_sum`], with weights that are non-negative and sum to 1 (an average).
fn check_inputs(inputs: &[Checkpoint], weights: &[f64]) -> Result<()> {
    if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) || (weights.iter().sum::<f64>() - 1.0).abs() > 1e-9 {
        bail!("weights must be non-negative and sum to 1, got {weights:?}");
    }
    check_weighted_sum(inputs, weights)
}

/// The averaging core alone: writes the weighted mean of every tensor of `inputs` to `path` as
/// one safetensors file, created or truncated in place, neither staged nor synced (for
/// benchmarks; [`average`] is the durable, all-or-nothing way). Runs on the current rayon pool.
pub fn average_file(inputs: &[Checkpoint], weights: &[f64], acc: Accumulate, path: &Path) -> Result<()> {
    check_inputs(inputs, weights)?;
    let names: Vec<&str> = inputs[0].weight_map.keys().map(String::as_str).collect();
    write_mean(inputs, weights, acc, None, &names, path)
}

/// Stages the weighted mean of `inputs` into `set` as the one file `file`, every tensor in its
/// inputs' dtype. `weights` must be non-negative and sum to 1. Returns the names written.
pub fn average_into(
    inputs: &[Checkpoint],
    weights: &[f64],
    acc: Accumulate,
    set: &mut FileSet,
    file: &str,
) -> Result<Vec<String>> {
    check_inputs(inputs, weights)?;
    average_into_layout(inputs, weights, acc, &Layout::ONE_FILE, set, file)
}

/// Stages `sum_j weights[j] x_j` of `inputs` into `set` in `layout`: one file `file` (e.g.
/// `model.safetensors`) if its tensors fit in one shard, else shards and `<file>.index.json`
/// (`metadata.total_size` and a `weight_map` naming each tensor's shard) as transformers'
/// `save_pretrained` writes them ([`plan_shards`]). `weights` are any finite numbers (mergekit's
/// linear merge without `normalize` is a plain weighted sum); with weights that do not sum to 1
/// nothing is copied through. Returns the names written.
pub fn average_into_layout(
    inputs: &[Checkpoint],
    weights: &[f64],
    acc: Accumulate,
    layout: &Layout,
    set: &mut FileSet,
    file: &str,
) -> Result<Vec<String>> {
    check_weighted_sum(inputs, weights)?;
    check_dtypes(inputs, acc)?;
    let first = &inputs[0];
    let plan = plan_shards(first, layout.dtype, layout.max_shard_size, file);
    let out = layout.dtype.map(OutDtype::dtype);
    let mut written = Vec::new();
    for (target, names) in &plan.files {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        set.write_via(target, |tmp| write_mean(inputs, weights, acc, out, &names, tmp))?;
        written.push(target.clone());
    }
    if plan.sharded() {
        // the index as transformers writes it (keys sorted, two-space indent); other metadata of
        // the first input's index (e.g. `total_parameters`) is kept
        let mut metadata = first
            .index
            .as_ref()
            .and_then(|i| i.get("metadata"))
            .and_then(serde_json::Value::as_object)
            .cloned()
            .unwrap_or_default();
        metadata.insert("total_size".into(), serde_json::json!(plan.total_size));
        let weight_map: BTreeMap<&str, &str> =
            plan.files.iter().flat_map(|(f, names)| names.iter().map(move |n| (n.as_str(), f.as_str()))).collect();
        let index = serde_json::json!({"metadata": metadata, "weight_map": weight_map});
        let name = format!("{file}.index.json");
        set.write(&name, format!("{}\n", serde_json::to_string_pretty(&index)?).as_bytes())?;
        written.push(name);
    }
    Ok(written)
}

/// Writes the weighted mean of `inputs` to `out`, all files or none, the folder written to
/// locked meanwhile: to `out` itself, one file, when it is named `*.safetensors`; else into the
/// folder `out` as a Hugging Face checkpoint (`model.safetensors`, or shards of at most 5 GB and
/// an index). `weights` must be non-negative and sum to 1.
pub fn average(inputs: &[Checkpoint], weights: &[f64], acc: Accumulate, out: &Path) -> Result<Vec<PathBuf>> {
    check_inputs(inputs, weights)?;
    let layout = if is_file_name(out) { Layout::ONE_FILE } else { Layout::default() };
    average_with(inputs, weights, acc, &layout, out)
}

fn is_file_name(out: &Path) -> bool {
    out.extension().is_some_and(|e| e == "safetensors")
}

/// [`average`] in `layout` with any finite `weights` (a weighted sum): `out` named
/// `*.safetensors` is the file (its shards, if `layout` splits it, named after it beside it, with
/// `<out>.index.json`); any other `out` is a folder that gets `model.safetensors` or its shards.
pub fn average_with(
    inputs: &[Checkpoint],
    weights: &[f64],
    acc: Accumulate,
    layout: &Layout,
    out: &Path,
) -> Result<Vec<PathBuf>> {
    let (dir, file) = if is_file_name(out) {
        let name =
            out.file_name().and_then(|n| n.to_str()).with_context(|| format!("{}: not a file name", out.display()))?;
        (out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf(), name.to_string())
    } else {
        (out.to_path_buf(), "model.safetensors".to_string())
    };
    let lock = FolderLock::acquire(&dir, "integrate average")?;
    let mut set = FileSet::begin(&lock, &dir)?;
    average_into_layout(inputs, weights, acc, layout, &mut set, &file)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn bf16_is_read_as_half_reads_it_for_all_65536_patterns() {
        for b in 0..=u16::MAX {
            let h = half::bf16::from_bits(b);
            assert_eq!(bf16_to_f32(b).to_bits(), h.to_f32().to_bits(), "{b:#06x} as f32");
            assert_eq!((bf16_to_f32(b) as f64).to_bits(), h.to_f64().to_bits(), "{b:#06x} as f64");
        }
    }

    /// f64 -> bf16 through `encode` against `half::bf16::from_f64` for the upper 32 bits `hi`
    /// of an f64 (all half looks at, besides whether the lower 32 are zero).
    fn check_rounding(his: impl Iterator<Item = u32>) {
        let lows = [0u32, 1, 0x8000_0000, 0xFFFF_FFFF];
        let vals: Vec<f64> =
            his.flat_map(|hi| lows.map(|lo| f64::from_bits(((hi as u64) << 32) | lo as u64))).collect();
        let mut out = vec![0u8; vals.len() * 2];
        for (v, o) in vals.chunks(BLOCK).zip(out.chunks_mut(BLOCK * 2)) {
            encode(Dtype::BF16, v, o);
        }
        for (v, o) in vals.iter().zip(out.chunks_exact(2)) {
            assert_eq!(
                u16::from_le_bytes([o[0], o[1]]),
                half::bf16::from_f64(*v).to_bits(),
                "{v:e} ({:#018x})",
                v.to_bits()
            );
        }
    }

    #[test]
    fn bf16_rounding_matches_half_on_every_exponent_and_rounding_case() {
        // every sign and exponent, with mantissas at and around each rounding boundary (the
        // round bit 12, the sticky bits below it, the last kept bit 13, all ones), and random ones
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mans = [
            0u32, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x2FFF, 0x3000, 0x3001, 0xF_EFFF, 0xF_F000, 0xF_F001,
            0xF_FFFF,
        ];
        let mut his = Vec::new();
        for sign in [0u32, 0x8000_0000] {
            for exp in 0..0x800u32 {
                his.extend(mans.iter().map(|m| sign | exp << 20 | m));
                his.extend((0..8).map(|_| sign | exp << 20 | rng.gen_range(0..0x10_0000)));
            }
        }
        check_rounding(his.into_iter());
    }

    /// All 2^32 upper halves, each with four lower halves (2 minutes on 2 busy cores in
    /// release): `cargo test --release --workspace --lib -- --ignored exhaustively`.
    #[test]
    #[ignore]
    fn bf16_rounding_matches_half_exhaustively() {
        use rayon::prelude::*;
        (0..1u64 << 16)
            .into_par_iter()
            .for_each(|top| check_rounding((0..1u32 << 16).map(|lo| ((top as u32) << 16) | lo)));
    }

    fn random_bytes(rng: &mut impl Rng, dtype: Dtype, n: usize) -> Vec<u8> {
        let specials = [0.0, -0.0, 1e-40, -3e-39, 1e-300, 3.4e38, -3.4e38, 1e-45, 65504.0, 6e-8];
        (0..n)
            .flat_map(|_| {
                let v: f64 = if rng.gen_bool(0.05) {
                    specials[rng.gen_range(0..specials.len())]
                } else {
                    rng.gen_range(-0.1..0.1)
                };
                match dtype {
                    Dtype::F32 => (v as f32).to_le_bytes().to_vec(),
                    Dtype::F64 => v.to_le_bytes().to_vec(),
                    Dtype::BF16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
                    _ => half::f16::from_f64(v).to_le_bytes().to_vec(),
                }
            })
            .collect()
    }

    #[test]
    fn every_vector_build_computes_the_same_bytes() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for dtype in [Dtype::F32, Dtype::BF16, Dtype::F16, Dtype::F64] {
            for k in [1, 2, 3, 16] {
                let n = 3 * BLOCK + 37;
                let data: Vec<Vec<u8>> = (0..k).map(|_| random_bytes(&mut rng, dtype, n)).collect();
                let weights = exponential(k, 0.3);
                // written in the inputs' dtype and in every --out-dtype
                for out in [dtype, Dtype::F32, Dtype::BF16, Dtype::F16] {
                    let plan = Plan { dtype, out, inputs: data.iter().map(Vec::as_slice).collect(), copy: false };
                    for acc in [Accumulate::F64, Accumulate::F32] {
                        if acc == Accumulate::F32 && dtype == Dtype::F64 {
                            continue;
                        }
                        let size = out.bitsize() / 8;
                        let run = |f: &dyn Fn(std::ops::Range<usize>, &mut [u8])| {
                            let mut bytes = vec![0u8; n * size];
                            // in uneven pieces, as jobs would be
                            let mut start = 0;
                            for len in [1, BLOCK + 5, 17, n] {
                                let end = (start + len).min(n);
                                f(start..end, &mut bytes[start * size..end * size]);
                                start = end;
                            }
                            bytes
                        };
                        let what = format!("{dtype:?} -> {out:?} k={k} {acc:?}");
                        let portable = run(&|r, o| compute_range(&plan, &weights, acc, r, o));
                        assert_eq!(portable, run(&|r, o| compute_job(&plan, &weights, acc, r, o)), "{what}");
                        #[cfg(target_arch = "x86_64")]
                        {
                            if std::arch::is_x86_feature_detected!("avx2") {
                                assert_eq!(
                                    portable,
                                    run(&|r, o| unsafe { compute_range_avx2(&plan, &weights, acc, r, o) }),
                                    "avx2 {what}"
                                );
                            }
                            use std::arch::is_x86_feature_detected as has;
                            if has!("avx512f") && has!("avx512bw") && has!("avx512dq") && has!("avx512vl") {
                                assert_eq!(
                                    portable,
                                    run(&|r, o| unsafe { compute_range_avx512(&plan, &weights, acc, r, o) }),
                                    "avx512 {what}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn sizes_are_read_as_transformers_reads_max_shard_size() {
        for (text, bytes) in [
            ("5GB", 5_000_000_000),
            ("500MB", 500_000_000),
            ("2GiB", 2u64 << 30),
            ("10KiB", 10 << 10),
            ("3mib", 3 << 20),
            ("1TB", 1_000_000_000_000),
            ("5Gb", 625_000_000),
            ("123", 123),
        ] {
            assert_eq!(parse_size(text).unwrap(), bytes, "{text}");
        }
        for bad in ["", "GB", "1.5GB", "-1GB", "5 apples", "0", "99999999999TB"] {
            let err = parse_size(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }

    #[test]
    fn out_dtypes_are_named_as_mergekit_and_the_flag_name_them() {
        for (name, want) in [
            ("bfloat16", Some(OutDtype::Bf16)),
            ("torch.float16", Some(OutDtype::F16)),
            ("float32", Some(OutDtype::F32)),
            ("bf16", Some(OutDtype::Bf16)),
            ("int64", None),
            ("float64", None),
        ] {
            assert_eq!(OutDtype::from_name(name), want, "{name}");
        }
    }
}
