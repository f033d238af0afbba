//! The variance-reduction theory checked through the real code: integrate's streaming
//! averaging of safetensors files and its ensembling of stored log-likelihoods, against the
//! closed forms of `theory` (which has no copy of either).

use integrate::average::{average, uniform, Accumulate, Checkpoint};
use integrate::ensemble::{ensemble_rows, Rule};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use records::ExampleRecord;
use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;
use std::path::{Path, PathBuf};
use theory::noise::std_normal;
use theory::weights::{expected_sq_step_averaged, expected_sq_step_raw};

fn write_f64(path: &Path, v: &[f64]) {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let view = TensorView::new(Dtype::F64, vec![v.len()], &bytes).unwrap();
    safetensors::serialize_to_file(vec![("w".to_string(), view)], None, path).unwrap();
}

fn read_f64(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.tensor("w").unwrap().data().chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Noise model [notes T4]: theta_t = mu_0 + t v + eps_t, eps i.i.d. N(0, sigma^2 I_d). The mean
/// squared step between consecutive k-window averages, each built by `integrate::average` from
/// real files, matches ||v||^2 + 2 d sigma^2 / k^2 (k = 1: the raw checkpoints). With d = 4,000
/// each squared step has relative sd about sqrt(2/d) = 2.2%, and the mean of 30 steps (steps k
/// apart are correlated, so count 30/k independent ones) stays within 10% with probability
/// above 1 - 1e-6 even at k = 8; a formula off by one power of k is off by a factor k there.
#[test]
fn window_averages_built_from_files_shrink_the_noise_by_k_squared() {
    let dir = tempfile::tempdir().unwrap();
    let (d, m, sigma) = (4000usize, 40usize, 0.05f64);
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let mu0: Vec<f64> = (0..d).map(|_| std_normal(&mut rng)).collect();
    let v: Vec<f64> = (0..d).map(|i| 2e-3 * ((i % 7) as f64 - 3.0)).collect();
    let paths: Vec<PathBuf> = (0..m)
        .map(|t| {
            let theta: Vec<f64> = (0..d).map(|i| mu0[i] + t as f64 * v[i] + sigma * std_normal(&mut rng)).collect();
            let p = dir.path().join(format!("c{t}.safetensors"));
            write_f64(&p, &theta);
            p
        })
        .collect();
    let ckpts: Vec<Checkpoint> = paths.iter().map(|p| Checkpoint::open(p).unwrap()).collect();
    for k in [1usize, 4, 8] {
        let avgs: Vec<Vec<f64>> = (k - 1..m)
            .map(|end| {
                let out = dir.path().join(format!("avg_k{k}_{end}.safetensors"));
                average(&ckpts[end + 1 - k..=end], &uniform(k), Accumulate::F64, &out).unwrap();
                read_f64(&out)
            })
            .collect();
        let steps: Vec<f64> =
            avgs.windows(2).map(|w| w[0].iter().zip(&w[1]).map(|(a, b)| (b - a).powi(2)).sum()).collect();
        let observed = steps.iter().sum::<f64>() / steps.len() as f64;
        let expected = if k == 1 {
            expected_sq_step_raw(&v, sigma * sigma)
        } else {
            expected_sq_step_averaged(&v, sigma * sigma, k)
        };
        assert!((observed / expected - 1.0).abs() < 0.10, "k = {k}: observed {observed}, theory {expected}");
        // the drift is kept exactly: the mean of the steps' differences is v
        let drift: Vec<f64> =
            (0..d).map(|i| (avgs[avgs.len() - 1][i] - avgs[0][i]) / (avgs.len() - 1) as f64).collect();
        let err = drift.iter().zip(&v).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        // per coordinate the error is (noise of the last average - noise of the first) / steps,
        // sd sigma sqrt(2/k) / steps; the largest of 4,000 stays below 6 sd
        assert!(err < 6.0 * sigma * (2.0 / k as f64).sqrt() / (avgs.len() - 1) as f64, "k = {k}: drift off by {err}");
    }
}

fn row(step: u64, ll: Vec<f64>) -> ExampleRecord {
    let n = ll.len();
    let pred = records::argmax(&ll) as u32;
    ExampleRecord {
        step,
        task: "t".into(),
        example_id: "t/0".into(),
        gold: 0,
        predicted: pred,
        predicted_norm: pred,
        correct: pred == 0,
        correct_norm: pred == 0,
        logliks: ll,
        lengths_chars: vec![3; n],
        lengths_tokens: vec![1; n],
        lengths_bytes: vec![4; n],
        gold_is_greedy: false,
        output: pred.to_string(),
        item_hash: String::new(),
        targets: Vec::new(),
        score_names: Vec::new(),
        score_values: Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Jensen [notes T6] through the real ensembling: the ensemble's log-likelihood of the gold
    /// continuation, log mean_j p_j, is at least the members' mean log-likelihood (its NLL at most
    /// their mean NLL), with equality when the members agree.
    #[test]
    fn ensemble_nll_is_at_most_the_members_mean_nll(ms in prop::collection::vec(prop::collection::vec(-40.0..0.0f64, 3), 1..9)) {
        let k = ms.len();
        let rows: Vec<ExampleRecord> = ms.iter().enumerate().map(|(t, ll)| row(t as u64, ll.clone())).collect();
        let e = ensemble_rows(&rows, k, Rule::Distribution).unwrap();
        prop_assert_eq!(e.len(), 1);
        let mean_ll = ms.iter().map(|ll| ll[0]).sum::<f64>() / k as f64;
        prop_assert!(e[0].logliks[0] >= mean_ll - 1e-9, "{} < {}", e[0].logliks[0], mean_ll);
        let same: Vec<ExampleRecord> = (0..k).map(|t| row(t as u64, ms[0].clone())).collect();
        let e = ensemble_rows(&same, k, Rule::Distribution).unwrap();
        prop_assert!((e[0].logliks[0] - ms[0][0]).abs() < 1e-9);
    }
}
