//! A LLaMA-style decoder: token embedding (tied with the output layer), pre-norm blocks of
//! RMSNorm -> causal self-attention with rotary positions -> RMSNorm -> SwiGLU MLP, a final
//! RMSNorm. Variable names follow `wte.weight`, `blocks.N.attn.qkv.weight`, ... and are the
//! tensor names in every checkpoint.

use crate::config::ModelConfig;
use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};

/// The tensor kind training's matmuls run in under a config's precision.
pub fn precision_kind(p: crate::config::Precision) -> Kind {
    match p {
        crate::config::Precision::Fp32 => Kind::Float,
        crate::config::Precision::Bf16 => Kind::BFloat16,
    }
}

#[derive(Debug)]
struct RmsNorm {
    weight: Tensor,
    eps: f64,
}

impl RmsNorm {
    fn new(vs: nn::Path, d: i64, eps: f64) -> Self {
        RmsNorm { weight: vs.var("weight", &[d], nn::Init::Const(1.0)), eps }
    }
    fn forward(&self, x: &Tensor) -> Tensor {
        x.rms_norm([x.size()[x.dim() - 1]], Some(&self.weight), self.eps)
    }
}

/// `x W^T` computed in `kind`: for fp32 exactly tch's `Linear`; otherwise `x` and a copy of the
/// (fp32 master) weight cast to `kind`, the cast being part of the graph, so the weight's gradient
/// arrives in fp32.
fn lin(x: &Tensor, l: &nn::Linear, kind: Kind) -> Tensor {
    if kind == Kind::Float {
        x.apply(l)
    } else {
        x.to_kind(kind).matmul(&l.ws.to_kind(kind).tr())
    }
}

fn linear(vs: nn::Path, i: i64, o: i64, std: f64) -> nn::Linear {
    nn::linear(
        vs,
        i,
        o,
        nn::LinearConfig { bias: false, ws_init: nn::Init::Randn { mean: 0.0, stdev: std }, ..Default::default() },
    )
}

#[derive(Debug)]
struct Block {
    attn_norm: RmsNorm,
    qkv: nn::Linear,
    wo: nn::Linear,
    mlp_norm: RmsNorm,
    gate_up: nn::Linear,
    down: nn::Linear,
    n_heads: i64,
    dropout: f64,
}

impl Block {
    fn new(vs: nn::Path, c: &ModelConfig) -> Self {
        let resid_std = c.init_std / (2.0 * c.n_layers as f64).sqrt();
        let (a, m) = (&vs / "attn", &vs / "mlp");
        Block {
            attn_norm: RmsNorm::new(&vs / "attn_norm", c.d_model, c.norm_eps),
            qkv: linear(&a / "qkv", c.d_model, 3 * c.d_model, c.init_std),
            wo: linear(&a / "wo", c.d_model, c.d_model, resid_std),
            mlp_norm: RmsNorm::new(&vs / "mlp_norm", c.d_model, c.norm_eps),
            gate_up: linear(&m / "gate_up", c.d_model, 2 * c.d_ff, c.init_std),
            down: linear(&m / "down", c.d_ff, c.d_model, resid_std),
            n_heads: c.n_heads,
            dropout: c.dropout,
        }
    }

    /// `kind`: the linear layers and rotary run in it; attention, the residual stream and the
    /// norms stay in the kind of `x` (adding a bf16 branch to an fp32 stream gives fp32).
    /// Attention in fp32 is both more exact and faster on CPU: torch 2.11's bf16 attention
    /// backward is slower than its fp32 one (bench_train: 3,804 -> 4,423 tokens/s).
    fn forward(&self, x: &Tensor, rope: &(Tensor, Tensor), train: bool, kind: Kind) -> Tensor {
        let (b, t, d) = x.size3().unwrap();
        let hd = d / self.n_heads;
        let qkv =
            lin(&self.attn_norm.forward(x), &self.qkv, kind).view([b, t, 3, self.n_heads, hd]).permute([2, 0, 3, 1, 4]);
        // to_kind is a no-op in fp32; it lets bf16 compute (or a model cast to bf16) stay in bf16
        let (cos, sin) = (rope.0.narrow(0, 0, t).to_kind(qkv.kind()), rope.1.narrow(0, 0, t).to_kind(qkv.kind()));
        let (q, k, v) = (qkv.get(0), qkv.get(1), qkv.get(2));
        let (q, k) = (rotate(&q, &cos, &sin), rotate(&k, &cos, &sin));
        let (q, k, v) = (q.to_kind(x.kind()), k.to_kind(x.kind()), v.to_kind(x.kind())); // no-op in fp32
        let y = Tensor::scaled_dot_product_attention::<Tensor>(&q, &k, &v, None, 0.0, true, None, false);
        let y = lin(&y.transpose(1, 2).contiguous().view([b, t, d]), &self.wo, kind).dropout(self.dropout, train);
        let x = x + y;
        let gu = lin(&self.mlp_norm.forward(&x), &self.gate_up, kind);
        let mut halves = gu.chunk(2, -1).into_iter();
        let (g, u) = (halves.next().unwrap(), halves.next().unwrap());
        let y = lin(&(g.silu() * u), &self.down, kind).dropout(self.dropout, train);
        x + y
    }

    /// Inference-only block over rows that pack several sequences: rotary tables gathered per
    /// token ([B, 1, T, hd], `sin_signed` with its first half negated, see [`rotate_signed`]),
    /// an additive float mask [B, 1, T, T] (0 or -inf), in-place residual updates. The same
    /// arithmetic as [`Block::forward`] up to float rounding.
    ///
    /// With `cache` (this layer's keys and values [B, H, capacity, hd] and the number `start`
    /// of columns already filled), the T new keys and values are written at columns
    /// `start..start + T` and the queries attend to columns `0..start + T`; `mask` is then
    /// [B, 1, T, start + T].
    fn forward_packed(
        &self,
        mut x: Tensor,
        cos: &Tensor,
        sin_signed: &Tensor,
        mask: &Tensor,
        cache: Option<(&Tensor, &Tensor, i64)>,
    ) -> Tensor {
        let (b, t, d) = x.size3().unwrap();
        let hd = d / self.n_heads;
        let qkv =
            self.attn_norm.forward(&x).apply(&self.qkv).view([b, t, 3, self.n_heads, hd]).permute([2, 0, 3, 1, 4]);
        let qk = rotate_signed(&qkv.narrow(0, 0, 2), cos, sin_signed);
        let (k, v) = match cache {
            None => (qk.get(1), qkv.get(2)),
            Some((kc, vc, start)) => {
                kc.narrow(2, start, t).copy_(&qk.get(1));
                vc.narrow(2, start, t).copy_(&qkv.get(2));
                (kc.narrow(2, 0, start + t), vc.narrow(2, 0, start + t))
            }
        };
        let y = Tensor::scaled_dot_product_attention(&qk.get(0), &k, &v, Some(mask), 0.0, false, None, false);
        x += y.transpose(1, 2).contiguous().view([b, t, d]).apply(&self.wo);
        let gu = self.mlp_norm.forward(&x).apply(&self.gate_up);
        let mut halves = gu.chunk(2, -1).into_iter();
        let (g, u) = (halves.next().unwrap(), halves.next().unwrap());
        let mut g = g.silu();
        g *= u;
        x += g.apply(&self.down);
        x
    }
}

/// cos and sin tables of shape [context, head_dim], each half repeated (the "rotate half" form).
fn rope_tables(c: &ModelConfig, device: Device) -> (Tensor, Tensor) {
    let hd = c.d_model / c.n_heads;
    let inv_freq = Tensor::arange_start_step(0, hd, 2, (Kind::Double, Device::Cpu)).divide_scalar(hd as f64);
    let inv_freq = Tensor::from(c.rope_theta).pow(&inv_freq).reciprocal();
    let pos = Tensor::arange(c.context, (Kind::Double, Device::Cpu));
    let angles = pos.outer(&inv_freq);
    let angles = Tensor::cat(&[&angles, &angles], -1);
    (angles.cos().to_kind(Kind::Float).to(device), angles.sin().to_kind(Kind::Float).to(device))
}

/// Rotates pairs (x_i, x_{i + hd/2}) of a [B, H, T, hd] tensor by position-dependent angles
/// (positions 0..T; the blocks call [`rotate`] with the tables laid out for their rows).
#[cfg(test)]
fn apply_rope(x: &Tensor, (cos, sin): &(Tensor, Tensor)) -> Tensor {
    let t = x.size()[2];
    rotate(x, &cos.narrow(0, 0, t), &sin.narrow(0, 0, t))
}

/// The rotation of [`apply_rope`] with tables that broadcast against `x` [B, H, T, hd].
fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Tensor {
    let hd = x.size()[x.dim() - 1];
    let x1 = x.narrow(-1, 0, hd / 2);
    let x2 = x.narrow(-1, hd / 2, hd / 2);
    let rotated = Tensor::cat(&[&(-&x2), &x1], -1);
    x * cos + rotated * sin
}

/// [`rotate`] in three passes instead of five, over q and k at once ([2, B, H, T, hd]):
/// `rotate_half(x) * sin` is `swap_halves(x) * sin_signed`, `sin_signed` being `sin` with its
/// first half negated (both halves of the tables are equal).
fn rotate_signed(x: &Tensor, cos: &Tensor, sin_signed: &Tensor) -> Tensor {
    let hd = x.size()[x.dim() - 1];
    let swapped = Tensor::cat(&[x.narrow(-1, hd / 2, hd / 2), x.narrow(-1, 0, hd / 2)], -1);
    let mut out = x * cos;
    let _ = out.addcmul_(&swapped, sin_signed);
    out
}

/// Keys and values of every layer for incremental decoding ([`Gpt::hidden_cached`]): per
/// layer two [B, H, capacity, hd] tensors in the weights' kind and device, of which the first
/// `len()` columns (token slots, the same for every row) are filled.
#[derive(Debug)]
pub struct KvCache {
    layers: Vec<(Tensor, Tensor)>,
    len: i64,
}

impl KvCache {
    /// Columns filled so far.
    pub fn len(&self) -> i64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The decoder. Build it inside a `VarStore` so its weights can be saved, loaded and averaged.
#[derive(Debug)]
pub struct Gpt {
    wte: nn::Embedding,
    blocks: Vec<Block>,
    norm_f: RmsNorm,
    rope: (Tensor, Tensor),
    /// The kind training's forward and backward compute in (see [`Gpt::set_train_compute`]).
    train_compute: Kind,
    pub config: ModelConfig,
}

impl Gpt {
    pub fn new(vs: &nn::Path, c: &ModelConfig, vocab_size: i64) -> Gpt {
        let emb =
            nn::EmbeddingConfig { ws_init: nn::Init::Randn { mean: 0.0, stdev: c.init_std }, ..Default::default() };
        Gpt {
            wte: nn::embedding(vs / "wte", vocab_size, c.d_model, emb),
            blocks: (0..c.n_layers).map(|i| Block::new(vs / "blocks" / i, c)).collect(),
            norm_f: RmsNorm::new(vs / "norm_f", c.d_model, c.norm_eps),
            rope: rope_tables(c, vs.device()),
            train_compute: Kind::Float,
            config: c.clone(),
        }
    }

    /// Mixed precision for training: with `BFloat16`, the forward and backward passes of
    /// `train = true` run their linear layers (the output layer too) and rotary in bf16 on bf16
    /// copies of the fp32 weights (the copies are made in the graph, so gradients, and with
    /// them AdamW's state, stay fp32); attention, the residual stream, norms and loss stay fp32. Inference (`train = false`:
    /// validation, scoring) computes in the weights' own kind, as before. `Float` (the default)
    /// is plain fp32 training.
    pub fn set_train_compute(&mut self, kind: Kind) {
        self.train_compute = kind;
    }

    fn compute(&self, train: bool) -> Kind {
        if train {
            self.train_compute
        } else {
            Kind::Float
        }
    }

    /// Final hidden states [B, T, d_model] (after the last norm) for tokens [B, T], T <= context.
    pub fn hidden(&self, tokens: &Tensor, train: bool) -> Tensor {
        let kind = self.compute(train);
        let mut x = self.wte.forward(tokens);
        for block in &self.blocks {
            x = block.forward(&x, &self.rope, train, kind);
        }
        self.norm_f.forward(&x)
    }

    /// Final hidden states [B, T, d_model] of rows that pack several sequences: `positions`
    /// [B, T] (int64, each < context) are the rotary positions of the tokens, and `mask`
    /// [B, T, T] (bool, true: query row may attend to key column) replaces the causal mask;
    /// every query must be allowed at least one key. Inference only (no dropout); `hidden`
    /// is the fast path for plain causal rows.
    pub fn hidden_masked(&self, tokens: &Tensor, positions: &Tensor, mask: &Tensor) -> Tensor {
        let (cos, sin_signed, mask) = self.packed_inputs(tokens, positions, mask);
        let mut x = self.wte.forward(tokens);
        for block in &self.blocks {
            x = block.forward_packed(x, &cos, &sin_signed, &mask, None);
        }
        self.norm_f.forward(&x)
    }

    /// The rotary tables of `positions` [B, T] ([B, 1, T, hd]: cos, and sin with its first half
    /// negated) and the bool `mask` [B, T, K] as an additive one [B, 1, T, K], in the weights'
    /// kind (so that a model cast to bf16 computes in bf16), made once for all layers.
    fn packed_inputs(&self, tokens: &Tensor, positions: &Tensor, mask: &Tensor) -> (Tensor, Tensor, Tensor) {
        let (b, t) = tokens.size2().unwrap();
        let hd = self.config.d_model / self.config.n_heads;
        let idx = positions.reshape([-1]);
        let kind = self.wte.ws.kind();
        let cos = self.rope.0.index_select(0, &idx).view([b, 1, t, hd]).to_kind(kind);
        let sin = self.rope.1.index_select(0, &idx).view([b, 1, t, hd]).to_kind(kind);
        let sin_signed = Tensor::cat(&[-sin.narrow(-1, 0, hd / 2), sin.narrow(-1, hd / 2, hd / 2)], -1);
        let mask = Tensor::zeros(mask.size(), (kind, mask.device()))
            .masked_fill(&mask.logical_not(), f64::NEG_INFINITY)
            .unsqueeze(1);
        (cos, sin_signed, mask)
    }

    /// An empty key/value cache for `batch` rows of at most `capacity` tokens (<= context).
    pub fn kv_cache(&self, batch: i64, capacity: i64) -> KvCache {
        let (h, hd) = (self.config.n_heads, self.config.d_model / self.config.n_heads);
        let opts = (self.wte.ws.kind(), self.wte.ws.device());
        let layers = (0..self.blocks.len())
            .map(|_| (Tensor::zeros([batch, h, capacity, hd], opts), Tensor::zeros([batch, h, capacity, hd], opts)))
            .collect();
        KvCache { layers, len: 0 }
    }

    /// [`Gpt::hidden_masked`] for the next `T` tokens [B, T] of rows whose earlier tokens'
    /// keys and values are in `cache` (`cache.len()` columns, the same for every row; padding
    /// columns are masked out): `positions` [B, T] are their rotary positions, `mask`
    /// [B, T, cache.len() + T] (bool, true: may attend) says which cached and new columns each
    /// new token sees. Their keys and values are appended to the cache. Inference only.
    pub fn hidden_cached(&self, tokens: &Tensor, positions: &Tensor, mask: &Tensor, cache: &mut KvCache) -> Tensor {
        let t = tokens.size()[1];
        let capacity = cache.layers.first().map_or(0, |(k, _)| k.size()[2]);
        assert!(cache.len + t <= capacity, "KV cache full: {} + {t} tokens > capacity {capacity}", cache.len);
        let (cos, sin_signed, mask) = self.packed_inputs(tokens, positions, mask);
        let mut x = self.wte.forward(tokens);
        for (block, (k, v)) in self.blocks.iter().zip(&cache.layers) {
            x = block.forward_packed(x, &cos, &sin_signed, &mask, Some((k, v, cache.len)));
        }
        cache.len += t;
        self.norm_f.forward(&x)
    }

    /// The tied output layer: logits [.., vocab] of hidden states [.., d_model].
    pub fn head(&self, hidden: &Tensor) -> Tensor {
        hidden.matmul(&self.wte.ws.tr())
    }

    /// Logits [B, T, vocab] for tokens [B, T] (T <= context); fp32 logits also under bf16
    /// training compute (the output matmul in bf16, its result cast up for the softmax).
    pub fn forward(&self, tokens: &Tensor, train: bool) -> Tensor {
        let h = self.hidden(tokens, train);
        match self.compute(train) {
            Kind::Float => self.head(&h),
            kind => h.to_kind(kind).matmul(&self.wte.ws.to_kind(kind).tr()).to_kind(Kind::Float),
        }
    }

    /// Mean next-token cross-entropy of `targets` [B, T] given `tokens` [B, T].
    pub fn loss(&self, tokens: &Tensor, targets: &Tensor, train: bool) -> Tensor {
        let logits = self.forward(tokens, train);
        let v = logits.size()[2];
        logits.view([-1, v]).cross_entropy_for_logits(&targets.view([-1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> ModelConfig {
        ModelConfig {
            d_model: 32,
            n_layers: 2,
            n_heads: 4,
            d_ff: 64,
            context: 16,
            rope_theta: 10000.0,
            norm_eps: 1e-5,
            init_std: 0.02,
            dropout: 0.0,
        }
    }

    #[test]
    fn causal_mask_changing_token_t_plus_1_never_changes_logits_at_or_before_t() {
        tch::manual_seed(0);
        let vs = nn::VarStore::new(Device::Cpu);
        let model = Gpt::new(&vs.root(), &tiny(), 50);
        let tokens = Tensor::randint(50, [2, 16], (Kind::Int64, Device::Cpu));
        let base = tch::no_grad(|| model.forward(&tokens, false));
        for t in 0..15 {
            let changed = tokens.copy();
            let _ = changed.narrow(1, t + 1, 1).fill_((t * 7 + 3) % 50);
            let out = tch::no_grad(|| model.forward(&changed, false));
            let before = base.narrow(1, 0, t + 1);
            assert_eq!(f64::try_from((out.narrow(1, 0, t + 1) - &before).abs().max()).unwrap(), 0.0, "position {t}");
        }
        // and the model is not trivially constant: the changed position's own logits do move
        let changed = tokens.copy();
        let _ = changed.narrow(1, 8, 1).fill_(49);
        let out = tch::no_grad(|| model.forward(&changed, false));
        assert!(f64::try_from((out.narrow(1, 8, 8) - base.narrow(1, 8, 8)).abs().max()).unwrap() > 0.0);
    }

    /// With positions 0.. and the causal mask, the masked forward is the plain one; two
    /// sequences packed in one row (positions restarting, block-diagonal mask) each give what
    /// they give alone.
    #[test]
    fn masked_forward_equals_plain_forward_and_isolates_packed_sequences() {
        tch::manual_seed(2);
        let vs = nn::VarStore::new(Device::Cpu);
        let mut c = tiny();
        c.init_std = 0.3;
        let model = Gpt::new(&vs.root(), &c, 50);
        let tokens = Tensor::randint(50, [2, 10], (Kind::Int64, Device::Cpu));
        let pos = Tensor::arange(10, (Kind::Int64, Device::Cpu)).unsqueeze(0).repeat([2, 1]);
        let causal = Tensor::ones([10, 10], (Kind::Bool, Device::Cpu)).tril(0).unsqueeze(0).repeat([2, 1, 1]);
        let (plain, masked) =
            tch::no_grad(|| (model.hidden(&tokens, false), model.hidden_masked(&tokens, &pos, &causal)));
        assert!(f64::try_from((&plain - &masked).abs().max()).unwrap() < 1e-5);
        // row 0's first 6 tokens and row 1's first 4, packed side by side
        let packed = Tensor::cat(&[tokens.get(0).narrow(0, 0, 6), tokens.get(1).narrow(0, 0, 4)], 0).unsqueeze(0);
        let ppos = Tensor::from_slice(&[0i64, 1, 2, 3, 4, 5, 0, 1, 2, 3]).unsqueeze(0);
        let seg = Tensor::from_slice(&[0i64, 0, 0, 0, 0, 0, 1, 1, 1, 1]);
        let mask = seg
            .unsqueeze(1)
            .eq_tensor(&seg.unsqueeze(0))
            .logical_and(&Tensor::ones([10, 10], (Kind::Bool, Device::Cpu)).tril(0))
            .unsqueeze(0);
        let h = tch::no_grad(|| model.hidden_masked(&packed, &ppos, &mask)).get(0);
        assert!(f64::try_from((h.narrow(0, 0, 6) - plain.get(0).narrow(0, 0, 6)).abs().max()).unwrap() < 1e-5);
        assert!(f64::try_from((h.narrow(0, 6, 4) - plain.get(1).narrow(0, 0, 4)).abs().max()).unwrap() < 1e-5);
    }

    #[test]
    fn rope_is_a_rotation_and_identity_at_position_zero() {
        let c = tiny();
        let rope = rope_tables(&c, Device::Cpu);
        let x = Tensor::randn([1, 4, 16, 8], (Kind::Float, Device::Cpu));
        let y = apply_rope(&x, &rope);
        let norm = |t: &Tensor| t.pow_tensor_scalar(2).sum_dim_intlist(-1, false, Kind::Float);
        assert!(f64::try_from((norm(&x) - norm(&y)).abs().max()).unwrap() < 1e-4);
        assert!(f64::try_from((x.narrow(2, 0, 1) - y.narrow(2, 0, 1)).abs().max()).unwrap() < 1e-7);
        // the packed path's form: sign folded into sin, q and k stacked
        let (cos, sin) = (rope.0.narrow(0, 0, 16), rope.1.narrow(0, 0, 16));
        let sin_signed = Tensor::cat(&[-sin.narrow(-1, 0, 4), sin.narrow(-1, 4, 4)], -1);
        let z = rotate_signed(&Tensor::stack(&[&x, &x], 0), &cos, &sin_signed);
        assert!(f64::try_from((z.get(1) - &y).abs().max()).unwrap() < 1e-6);
    }

    /// bf16 training compute: the loss is the fp32 loss up to bf16 rounding, the gradients are
    /// fp32 and close to fp32's, and inference (train = false) is untouched, to the bit.
    #[test]
    fn bf16_training_compute_keeps_fp32_gradients_and_leaves_inference_alone() {
        let _rng = crate::train::rng_lock();
        tch::manual_seed(3);
        let vs = nn::VarStore::new(Device::Cpu);
        let mut c = tiny();
        c.init_std = 0.1;
        let mut model = Gpt::new(&vs.root(), &c, 50);
        let tokens = Tensor::randint(50, [4, 16], (Kind::Int64, Device::Cpu));
        let targets = tokens.roll([-1], [1]);
        let params = vs.trainable_variables();
        let grads = |model: &Gpt| {
            let loss = model.loss(&tokens, &targets, true);
            let g = Tensor::run_backward(&[&loss], &params, false, false);
            (f64::try_from(&loss).unwrap(), g)
        };
        let before = tch::no_grad(|| model.forward(&tokens, false));
        let (l32, g32) = grads(&model);
        model.set_train_compute(Kind::BFloat16);
        let (l16, g16) = grads(&model);
        assert_ne!(l16, l32, "bf16 compute must not silently run in fp32");
        assert!((l16 - l32).abs() < 0.01 * l32, "{l16} vs {l32}");
        for (a, b) in g32.iter().zip(&g16) {
            assert_eq!(b.kind(), Kind::Float);
            let rel = f64::try_from((a - b).norm()).unwrap() / f64::try_from(a.norm()).unwrap();
            assert!(rel < 0.05, "gradient off by {rel}");
        }
        let after = tch::no_grad(|| model.forward(&tokens, false));
        assert_eq!(f64::try_from((after - before).abs().max()).unwrap(), 0.0);
    }

    #[test]
    fn parameter_count_matches_the_config_formula() {
        let vs = nn::VarStore::new(Device::Cpu);
        let c = tiny();
        let _m = Gpt::new(&vs.root(), &c, 50);
        let n: i64 = vs.trainable_variables().iter().map(|t| t.numel() as i64).sum();
        let per_layer = 4 * 32 * 32 + 3 * 32 * 64 + 2 * 32;
        assert_eq!(n, 50 * 32 + 2 * per_layer + 32);
    }
}
