//! Log-likelihood scoring of (context, continuation) requests, as lm-evaluation-harness does it:
//! the summed log-probability of the continuation's tokens given the context (left-truncated to
//! the model's context), and whether greedy decoding would produce exactly those tokens.
//!
//! Requests are sorted by length and packed into batches of at most `batch_tokens` tokens,
//! right-padded (padding after a sequence cannot change a causal model's earlier outputs); only
//! the continuation positions go through the output layer.

use anyhow::{bail, Result};
use tch::{Device, Kind, Tensor};

use crate::model::Gpt;

/// One request, already tokenized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub context: Vec<u32>,
    pub continuation: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// Sum of log p(continuation token | everything before it).
    pub loglik: f64,
    /// Every continuation token is the argmax of its distribution.
    pub greedy: bool,
    /// The argmax token at each continuation position.
    pub argmax: Vec<u32>,
}

/// Input tokens and the number of continuation positions at the end of the input. A
/// continuation longer than the context is scored on its last `context` tokens.
fn layout(r: &Request, context: usize) -> Result<(Vec<i64>, Vec<i64>, usize)> {
    let n = r.continuation.len().min(context);
    if n == 0 {
        bail!("empty continuation");
    }
    let full: Vec<i64> = r.context.iter().chain(&r.continuation).map(|&t| t as i64).collect();
    if full.len() < 2 {
        bail!("a request needs at least one context token");
    }
    let start = full.len().saturating_sub(context + 1);
    let window = &full[start..];
    Ok((window[..window.len() - 1].to_vec(), window[1..].to_vec(), n))
}

/// Scores every request; results come back in request order.
pub fn score(model: &Gpt, requests: &[Request], batch_tokens: usize, device: Device) -> Result<Vec<Scored>> {
    let context = model.config.context as usize;
    let laid: Vec<(Vec<i64>, Vec<i64>, usize)> = requests.iter().map(|r| layout(r, context)).collect::<Result<_>>()?;
    let mut order: Vec<usize> = (0..laid.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(laid[i].0.len()));
    let mut out: Vec<Option<Scored>> = vec![None; laid.len()];
    let mut i = 0;
    while i < order.len() {
        let width = laid[order[i]].0.len();
        let rows = (batch_tokens / width).max(1).min(order.len() - i);
        let batch = &order[i..i + rows];
        let mut tokens = vec![0i64; rows * width];
        let (mut positions, mut targets) = (Vec::new(), Vec::new());
        for (b, &r) in batch.iter().enumerate() {
            let (input, target, n) = &laid[r];
            tokens[b * width..b * width + input.len()].copy_from_slice(input);
            for p in input.len() - n..input.len() {
                positions.push((b * width + p) as i64);
                targets.push(target[p]);
            }
        }
        let (lp, hit, am) = tch::no_grad(|| {
            let x = Tensor::from_slice(&tokens).view([rows as i64, width as i64]).to(device);
            let h = model.hidden(&x, false).view([-1, model.config.d_model]);
            let h = h.index_select(0, &Tensor::from_slice(&positions).to(device));
            let logp = model.head(&h).log_softmax(-1, Kind::Float);
            let t = Tensor::from_slice(&targets).to(device);
            let lp = logp.gather(1, &t.unsqueeze(1), false).squeeze_dim(1).to_kind(Kind::Double);
            let am = logp.argmax(1, false);
            (Vec::<f64>::try_from(lp.to(Device::Cpu)), Vec::<bool>::try_from(am.eq_tensor(&t).to(Device::Cpu)), Vec::<i64>::try_from(am.to(Device::Cpu)))
        });
        let (lp, hit, am) = (lp?, hit?, am?);
        let mut k = 0;
        for &r in batch {
            let n = laid[r].2;
            out[r] = Some(Scored { loglik: lp[k..k + n].iter().sum(), greedy: hit[k..k + n].iter().all(|&h| h), argmax: am[k..k + n].iter().map(|&t| t as u32).collect() });
            k += n;
        }
        i += rows;
    }
    Ok(out.into_iter().map(Option::unwrap).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use tch::nn;

    fn tiny() -> (nn::VarStore, Gpt) {
        tch::manual_seed(3);
        let vs = nn::VarStore::new(Device::Cpu);
        let c = ModelConfig { d_model: 32, n_layers: 2, n_heads: 4, d_ff: 64, context: 12, rope_theta: 10000.0, norm_eps: 1e-5, init_std: 0.3, dropout: 0.0 };
        let m = Gpt::new(&vs.root(), &c, 40);
        (vs, m)
    }

    /// The summed log-likelihood equals a hand computation from the full logits.
    #[test]
    fn loglik_equals_hand_computation_from_full_logits() {
        let (_vs, m) = tiny();
        let r = Request { context: vec![5, 9, 2], continuation: vec![7, 1] };
        let got = score(&m, std::slice::from_ref(&r), 64, Device::Cpu).unwrap().remove(0);
        let logits = tch::no_grad(|| m.forward(&Tensor::from_slice(&[5i64, 9, 2, 7]).view([1, 4]), false));
        let logp = logits.log_softmax(-1, Kind::Double);
        let by_hand = f64::try_from(logp.get(0).get(2).get(7)).unwrap() + f64::try_from(logp.get(0).get(3).get(1)).unwrap();
        assert!((got.loglik - by_hand).abs() < 1e-5, "{} vs {by_hand}", got.loglik);
        let am2 = i64::try_from(logits.get(0).get(2).argmax(0, false)).unwrap() as u32;
        assert_eq!(got.argmax[0], am2);
        assert_eq!(got.greedy, got.argmax == vec![7, 1]);
    }

    #[test]
    fn batched_and_unbatched_scoring_agree() {
        let (_vs, m) = tiny();
        let reqs: Vec<Request> = (0..17u32)
            .map(|i| Request { context: (0..(i % 9 + 1)).map(|j| (i * 7 + j * 3) % 40).collect(), continuation: (0..(i % 3 + 1)).map(|j| (i + j * 11) % 40).collect() })
            .collect();
        let batched = score(&m, &reqs, 200, Device::Cpu).unwrap();
        for (r, b) in reqs.iter().zip(&batched) {
            let one = score(&m, std::slice::from_ref(r), 1, Device::Cpu).unwrap().remove(0);
            assert!((one.loglik - b.loglik).abs() < 1e-5, "{} vs {}", one.loglik, b.loglik);
            assert_eq!(one.argmax, b.argmax);
        }
    }

    #[test]
    fn long_contexts_are_left_truncated() {
        let (_vs, m) = tiny();
        let long = Request { context: (0..30).map(|i| i % 40).collect(), continuation: vec![3, 4] };
        let cut = Request { context: long.context[long.context.len() - 11..].to_vec(), continuation: vec![3, 4] };
        let a = score(&m, &[long, cut], 64, Device::Cpu).unwrap();
        assert!((a[0].loglik - a[1].loglik).abs() < 1e-6);
        // a continuation longer than the context: its last `context` tokens are scored
        let over = score(&m, &[Request { context: vec![1], continuation: (0..14).collect() }], 64, Device::Cpu).unwrap();
        let tail = score(&m, &[Request { context: vec![1], continuation: (1..14).collect() }], 64, Device::Cpu).unwrap();
        assert_eq!(over[0].argmax.len(), 12);
        assert!((over[0].loglik - score(&m, &[Request { context: vec![0, 1], continuation: (2..14).collect() }], 64, Device::Cpu).unwrap()[0].loglik).abs() < 1e-6);
        assert!(tail[0].loglik.is_finite());
        assert!(score(&m, &[Request { context: vec![1], continuation: vec![] }], 64, Device::Cpu).is_err());
    }
}
