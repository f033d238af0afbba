//! Checkpoint averaging on hand-made safetensors files.

use integrate::average::{average, average_with, exponential, uniform, Accumulate, Checkpoint, Layout};
use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;
use std::path::{Path, PathBuf};

fn bytes_of(dtype: Dtype, v: &[f64]) -> Vec<u8> {
    match dtype {
        Dtype::F32 => v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
        Dtype::F64 => v.iter().flat_map(|&x| x.to_le_bytes()).collect(),
        Dtype::BF16 => v.iter().flat_map(|&x| half::bf16::from_f64(x).to_le_bytes()).collect(),
        Dtype::F16 => v.iter().flat_map(|&x| half::f16::from_f64(x).to_le_bytes()).collect(),
        _ => unreachable!(),
    }
}

fn values_of(dtype: Dtype, b: &[u8]) -> Vec<f64> {
    match dtype {
        Dtype::F32 => b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
        Dtype::F64 => b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect(),
        Dtype::BF16 => b.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
        Dtype::F16 => b.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
        _ => unreachable!(),
    }
}

/// Writes named tensors (dtype, shape, values) to a safetensors file.
fn write(path: &Path, tensors: &[(&str, Dtype, Vec<usize>, Vec<f64>)]) {
    let data: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> =
        tensors.iter().map(|(n, d, s, v)| (n.to_string(), *d, s.clone(), bytes_of(*d, v))).collect();
    let views: Vec<(String, TensorView)> =
        data.iter().map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap())).collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn read(path: &Path, name: &str) -> (Dtype, Vec<f64>) {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor(name).unwrap();
    (t.dtype(), values_of(t.dtype(), t.data()))
}

fn open(paths: &[PathBuf]) -> Vec<Checkpoint> {
    paths.iter().map(|p| Checkpoint::open(p).unwrap()).collect()
}

#[test]
fn averaging_k_identical_checkpoints_returns_them_bit_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let vals: Vec<f64> = (0..101).map(|i| (i as f64 * 0.37).sin() * 1e-3 + 1.0 / 3.0).collect();
    let paths: Vec<PathBuf> = (0..5).map(|i| dir.path().join(format!("c{i}.safetensors"))).collect();
    for p in &paths {
        write(p, &[("w", Dtype::F32, vec![101], vals.clone()), ("h", Dtype::BF16, vec![1, 101], vals.clone())]);
    }
    let out = dir.path().join("avg.safetensors");
    for acc in [Accumulate::F64, Accumulate::F32] {
        average(&open(&paths), &uniform(5), acc, &out).unwrap();
        let (a, b) = (std::fs::read(&paths[0]).unwrap(), std::fs::read(&out).unwrap());
        let (sa, sb) = (SafeTensors::deserialize(&a).unwrap(), SafeTensors::deserialize(&b).unwrap());
        for n in ["w", "h"] {
            assert_eq!(sa.tensor(n).unwrap().data(), sb.tensor(n).unwrap().data(), "{n} changed");
        }
    }
}

#[test]
fn the_average_of_two_known_tensors_is_the_hand_result_in_every_dtype() {
    let dir = tempfile::tempdir().unwrap();
    // values exactly representable in every dtype, and so are their means
    let a = vec![1.0, -2.0, 0.5, 8.0, 0.0, -0.25];
    let b = vec![3.0, 2.0, 1.5, -4.0, 1.0, -0.75];
    let want = vec![2.0, 0.0, 1.0, 2.0, 0.5, -0.5];
    for dtype in [Dtype::F32, Dtype::F64, Dtype::BF16, Dtype::F16] {
        let (pa, pb) = (dir.path().join("a.safetensors"), dir.path().join("b.safetensors"));
        write(&pa, &[("x", dtype, vec![2, 3], a.clone())]);
        write(&pb, &[("x", dtype, vec![2, 3], b.clone())]);
        let out = dir.path().join("o.safetensors");
        average(&open(&[pa, pb]), &uniform(2), Accumulate::F64, &out).unwrap();
        assert_eq!(read(&out, "x"), (dtype, want.clone()), "{dtype:?}");
    }
    // weighted and exponential weights, by hand: 0.25 a + 0.75 b
    let (pa, pb) = (dir.path().join("a.safetensors"), dir.path().join("b.safetensors"));
    write(&pa, &[("x", Dtype::F64, vec![6], a.clone())]);
    write(&pb, &[("x", Dtype::F64, vec![6], b.clone())]);
    let out = dir.path().join("w.safetensors");
    average(&open(&[pa.clone(), pb.clone()]), &[0.25, 0.75], Accumulate::F64, &out).unwrap();
    let hand: Vec<f64> = a.iter().zip(&b).map(|(x, y)| 0.25 * x + 0.75 * y).collect();
    assert_eq!(read(&out, "x").1, hand);
    let e = exponential(2, 2.0 / 3.0);
    assert!((e[0] - 0.25).abs() < 1e-12 && (e[1] - 0.75).abs() < 1e-12);
}

fn only_inputs_left(dir: &Path, n: usize) {
    let left: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left.len(), n, "something partial left behind: {left:?}");
}

#[test]
fn mismatches_and_truncation_are_refused_clearly_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = d.join("base.safetensors");
    write(&base, &[("a", Dtype::F32, vec![2, 2], vec![1.0; 4]), ("b", Dtype::F32, vec![3], vec![2.0; 3])]);
    let cases: Vec<(&str, Vec<(&str, Dtype, Vec<usize>, Vec<f64>)>, &str)> = vec![
        (
            "shape",
            vec![("a", Dtype::F32, vec![4], vec![1.0; 4]), ("b", Dtype::F32, vec![3], vec![2.0; 3])],
            "tensor `a` has shape [4]",
        ),
        (
            "name",
            vec![("a", Dtype::F32, vec![2, 2], vec![1.0; 4]), ("c", Dtype::F32, vec![3], vec![2.0; 3])],
            "tensor `b` is missing",
        ),
        (
            "dtype",
            vec![("a", Dtype::F32, vec![2, 2], vec![1.0; 4]), ("b", Dtype::F16, vec![3], vec![2.0; 3])],
            "tensor `b` has dtype F16",
        ),
    ];
    for (what, tensors, msg) in cases {
        let other = d.join(format!("{what}.safetensors"));
        write(&other, &tensors);
        let out = d.join("out.safetensors");
        let err = format!(
            "{:#}",
            average(&open(&[base.clone(), other.clone()]), &uniform(2), Accumulate::F64, &out).unwrap_err()
        );
        assert!(err.contains(msg) && err.contains(&format!("{what}.safetensors")), "{what}: {err}");
        assert!(!out.exists());
        std::fs::remove_file(&other).unwrap();
    }
    // a truncated input is refused when opened, naming the file
    let t = d.join("trunc.safetensors");
    let bytes = std::fs::read(&base).unwrap();
    std::fs::write(&t, &bytes[..bytes.len() - 5]).unwrap();
    let err = format!("{:#}", Checkpoint::open(&t).err().unwrap());
    assert!(err.contains("trunc.safetensors") && err.contains("truncated or corrupt"), "{err}");
    std::fs::remove_file(&t).unwrap();
    // wrong weights
    assert!(
        average(&open(&[base.clone(), base.clone()]), &[0.5, 0.6], Accumulate::F64, &d.join("o.safetensors")).is_err()
    );
    only_inputs_left(d, 1);
}

/// Sharded inputs are read through their index; the output is laid out as transformers'
/// `save_pretrained` lays out a model, whatever the inputs' shards: one model.safetensors when it
/// fits in 5 GB, else shards of at most the limit with an index.
#[test]
fn sharded_hugging_face_checkpoints_are_read_and_written_as_save_pretrained_would() {
    let dir = tempfile::tempdir().unwrap();
    let mk = |name: &str, v: f64| {
        let c = dir.path().join(name);
        std::fs::create_dir_all(&c).unwrap();
        write(&c.join("model-00001-of-00002.safetensors"), &[("layers.0.w", Dtype::BF16, vec![4], vec![v; 4])]);
        write(&c.join("model-00002-of-00002.safetensors"), &[("layers.1.w", Dtype::BF16, vec![2], vec![2.0 * v; 2])]);
        let index = serde_json::json!({"metadata": {"total_size": 12}, "weight_map": {"layers.0.w": "model-00001-of-00002.safetensors", "layers.1.w": "model-00002-of-00002.safetensors"}});
        std::fs::write(c.join("model.safetensors.index.json"), index.to_string()).unwrap();
        c
    };
    let (a, b) = (mk("a", 1.0), mk("b", 3.0));
    let out = dir.path().join("avg");
    let files = average(&open(&[a.clone(), b.clone()]), &uniform(2), Accumulate::F32, &out).unwrap();
    assert_eq!(files, [out.join("model.safetensors")], "12 bytes fit in one file");
    assert_eq!(read(&out.join("model.safetensors"), "layers.0.w").1, vec![2.0; 4]);
    assert_eq!(read(&out.join("model.safetensors"), "layers.1.w").1, vec![4.0; 2]);
    // at 8 bytes a shard, the two tensors go to two shards, with an index
    let small = dir.path().join("small");
    let layout = Layout { dtype: None, max_shard_size: 8 };
    let files = average_with(&open(&[a, b]), &uniform(2), Accumulate::F32, &layout, &small).unwrap();
    assert_eq!(files.len(), 3); // two shards and the index
    assert_eq!(read(&small.join("model-00001-of-00002.safetensors"), "layers.0.w").1, vec![2.0; 4]);
    assert_eq!(read(&small.join("model-00002-of-00002.safetensors"), "layers.1.w").1, vec![4.0; 2]);
    let reopened = Checkpoint::open(&small).unwrap();
    assert_eq!(reopened.weight_map.len(), 2);
}

/// `integrate average` on Hugging Face folders as `save_pretrained` writes them (one
/// model.safetensors): the output is a folder that loads the same way (the newest input's config
/// and tokenizer files, weights under the same names) with its record; a sharded one gets an
/// index with the shards' total size.
#[test]
fn the_command_averages_single_file_hugging_face_folders_into_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let mk = |name: &str, v: f64| {
        let c = dir.path().join(name);
        std::fs::create_dir_all(&c).unwrap();
        write(
            &c.join("model.safetensors"),
            &[
                ("model.embed_tokens.weight", Dtype::F32, vec![3, 2], vec![v; 6]),
                ("model.norm.weight", Dtype::F32, vec![2], vec![2.0 * v; 2]),
            ],
        );
        std::fs::write(c.join("config.json"), format!("{{\"model_type\": \"llama\", \"name\": \"{name}\"}}")).unwrap();
        std::fs::write(c.join("tokenizer.json"), format!("{{\"tok\": \"{name}\"}}")).unwrap();
        std::fs::write(c.join("tokenizer_config.json"), "{}").unwrap();
        std::fs::write(c.join("provenance.json"), "{}").unwrap();
        c
    };
    let (a, b, c) = (mk("a", 1.0), mk("b", 2.0), mk("c", 6.0));
    let out = dir.path().join("avg");
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_integrate")).args(args).output().unwrap()
    };
    let o = run(&[
        "average".as_ref(),
        "--window".as_ref(),
        "3".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        c.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(read(&out.join("model.safetensors"), "model.embed_tokens.weight").1, vec![3.0; 6]);
    assert_eq!(read(&out.join("model.safetensors"), "model.norm.weight").1, vec![6.0; 2]);
    assert_eq!(
        std::fs::read_to_string(out.join("config.json")).unwrap(),
        std::fs::read_to_string(c.join("config.json")).unwrap(),
        "the newest input's config"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("tokenizer.json")).unwrap(),
        std::fs::read_to_string(c.join("tokenizer.json")).unwrap()
    );
    assert!(out.join("tokenizer_config.json").is_file());
    assert!(!out.join("provenance.json").exists(), "an input's own provenance is not the average's");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("integration.json")).unwrap()).unwrap();
    assert_eq!(rec["recipe"]["inputs"].as_array().unwrap().len(), 3);
    assert_eq!(rec["recipe"]["inputs"][0]["files"][0]["path"], a.join("model.safetensors").display().to_string());
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".lock")
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["config.json", "integration.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    );
    // the output loads as a checkpoint again, and an output inside an input is refused
    assert_eq!(Checkpoint::open(&out).unwrap().weight_map.len(), 2);
    // the same average again is up to date; once its weights are damaged (truncated) it is not:
    // it is written again, said on stderr, and the weights are whole
    let again = [
        "average".as_ref(),
        "--window".as_ref(),
        "3".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        c.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ];
    let o = run(&again);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("up to date"), "{o:?}");
    let weights = std::fs::read(out.join("model.safetensors")).unwrap();
    std::fs::write(out.join("model.safetensors"), &weights[..weights.len() / 2]).unwrap();
    let o = run(&again);
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && !stdout.contains("up to date"), "{stdout}{stderr}");
    assert!(stderr.contains("model.safetensors does not have the sha256"), "{stderr}");
    assert_eq!(std::fs::read(out.join("model.safetensors")).unwrap(), weights);
    // exponential weights (1 - alpha)^age, newest last: 1/7, 2/7, 4/7 at alpha = 0.5
    let ema = dir.path().join("ema");
    let o = run(&[
        "average".as_ref(),
        "--window".as_ref(),
        "3".as_ref(),
        "--ema".as_ref(),
        "0.5".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        c.as_os_str(),
        "-o".as_ref(),
        ema.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (_, got) = read(&ema.join("model.safetensors"), "model.embed_tokens.weight");
    assert!(got.iter().all(|v| (v - 29.0 / 7.0).abs() < 1e-5), "{got:?}");
    // explicit weights, oldest first; weights that do not sum to 1 are refused, nothing written
    let weighted = dir.path().join("weighted");
    let o = run(&[
        "average".as_ref(),
        "--window".as_ref(),
        "3".as_ref(),
        "--weights".as_ref(),
        "0.5,0.25,0.25".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        c.as_os_str(),
        "-o".as_ref(),
        weighted.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(read(&weighted.join("model.safetensors"), "model.norm.weight").1, vec![2.0 * (0.5 + 0.5 + 1.5); 2]);
    let bad = dir.path().join("bad");
    let o = run(&[
        "average".as_ref(),
        "--window".as_ref(),
        "2".as_ref(),
        "--weights".as_ref(),
        "0.5,0.6".as_ref(),
        b.as_os_str(),
        c.as_os_str(),
        "-o".as_ref(),
        bad.as_os_str(),
    ]);
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("sum to 1") && !bad.exists(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run(&[
        "average".as_ref(),
        "--window".as_ref(),
        "2".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "-o".as_ref(),
        b.join("avg").as_os_str(),
    ]);
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("inside an input"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The index of a sharded output: the total size of the written tensors, each tensor's shard, and
/// the other metadata of the first input's index (a hand-edited one with a wrong total here).
#[test]
fn a_sharded_average_gets_a_new_index_with_the_metadata_of_the_first_input() {
    let dir = tempfile::tempdir().unwrap();
    let mk = |name: &str, v: f64| {
        let c = dir.path().join(name);
        std::fs::create_dir_all(&c).unwrap();
        write(&c.join("model-00001-of-00002.safetensors"), &[("a", Dtype::F32, vec![4], vec![v; 4])]);
        write(&c.join("model-00002-of-00002.safetensors"), &[("b", Dtype::BF16, vec![2], vec![v; 2])]);
        // an index with a wrong total size and extra metadata, as a hand-edited one may have
        let index = serde_json::json!({"metadata": {"total_size": 1, "note": "kept"}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}});
        std::fs::write(c.join("model.safetensors.index.json"), index.to_string()).unwrap();
        c
    };
    let out = dir.path().join("avg");
    let layout = Layout { dtype: None, max_shard_size: 16 };
    average_with(&open(&[mk("x", 1.0), mk("y", 3.0)]), &uniform(2), Accumulate::F64, &layout, &out).unwrap();
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("model.safetensors.index.json")).unwrap()).unwrap();
    assert_eq!(index["metadata"]["total_size"], 4 * 4 + 2 * 2);
    assert_eq!(index["metadata"]["note"], "kept");
    assert_eq!(index["weight_map"]["b"], "model-00002-of-00002.safetensors");
    assert_eq!(read(&out.join("model-00002-of-00002.safetensors"), "b").1, vec![2.0; 2]);
}

/// The averaging of the code before it ran in parallel, written out plainly: for each tensor in
/// turn, a whole-tensor accumulator, the inputs added one after the other, rounded with `half`,
/// serialised by safetensors itself.
fn sequential_reference(paths: &[PathBuf], weights: &[f64], acc: Accumulate, out: &Path) {
    let files: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let sts: Vec<SafeTensors> = files.iter().map(|b| SafeTensors::deserialize(b).unwrap()).collect();
    let mut names = sts[0].names();
    names.sort();
    let mut results: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for name in names {
        let ts: Vec<_> = sts.iter().map(|s| s.tensor(name).unwrap()).collect();
        let (dtype, shape) = (ts[0].dtype(), ts[0].shape().to_vec());
        let n: usize = shape.iter().product();
        let bytes = if ts.iter().all(|t| t.data() == ts[0].data()) && (weights.iter().sum::<f64>() - 1.0).abs() < 1e-12
        {
            ts[0].data().to_vec()
        } else {
            let wide: Vec<f64> = match acc {
                Accumulate::F64 => {
                    let mut a = vec![0f64; n];
                    for (t, &w) in ts.iter().zip(weights) {
                        for (o, x) in a.iter_mut().zip(values_of(dtype, t.data())) {
                            *o += w * x;
                        }
                    }
                    a
                }
                Accumulate::F32 => {
                    let mut a = vec![0f32; n];
                    for (t, &w) in ts.iter().zip(weights) {
                        let xs: Vec<f32> = match dtype {
                            Dtype::F32 => {
                                t.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
                            }
                            Dtype::BF16 => t
                                .data()
                                .chunks_exact(2)
                                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
                                .collect(),
                            Dtype::F16 => t
                                .data()
                                .chunks_exact(2)
                                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                                .collect(),
                            _ => unreachable!(),
                        };
                        for (o, x) in a.iter_mut().zip(xs) {
                            *o += w as f32 * x;
                        }
                    }
                    a.into_iter().map(|v| v as f64).collect()
                }
            };
            bytes_of(dtype, &wide)
        };
        results.push((name.to_string(), dtype, shape, bytes));
    }
    let views: Vec<(String, TensorView)> =
        results.iter().map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap())).collect();
    let meta: std::collections::HashMap<String, String> = [("format".to_string(), "pt".to_string())].into();
    safetensors::serialize_to_file(views, Some(meta), out).unwrap();
}

/// Random weights of a trained model's scale with, in 5% of the places, zeros of both signs,
/// subnormals (of f32 and of bf16), values near the largest finite ones and, in at most one input
/// per element, an infinity or a NaN.
fn random_tensor(rng: &mut impl rand::Rng, dtype: Dtype, n: usize, input: usize, k: usize) -> Vec<f64> {
    let finite: [f64; 10] = [0.0, -0.0, 1e-40, -3e-39, 1.2e-38, 1e-45, 3.3e38, -3.3e38, 65000.0, 6e-8];
    (0..n)
        .map(|i| {
            if rng.gen_bool(0.05) {
                let x = finite[rng.gen_range(0..finite.len())];
                // (f16 would round these to infinities: two of opposite signs make a NaN)
                if dtype == Dtype::F16 && x.abs() > 1e38 {
                    65000.0
                } else {
                    x
                }
            } else if i % 97 == 0 && i / 97 % k == input {
                [f64::INFINITY, f64::NEG_INFINITY, f64::NAN][i / 97 % 3]
            } else {
                let x: f64 = rng.gen_range(-1.0..1.0);
                if dtype == Dtype::F16 {
                    x
                } else {
                    x * 0.05
                }
            }
        })
        .collect()
}

/// The parallel averaging against [`sequential_reference`], byte for byte (header included), on
/// f32, bf16 and f16 tensors of odd sizes (none a multiple of the job or block size; one spans
/// several jobs), for k = 1, 2, 3 and 16, both accumulations, uniform and exponential weights,
/// on pools of 1, 2 and 3 threads.
#[test]
fn the_parallel_average_is_bit_identical_to_a_sequential_reference() {
    use rand::SeedableRng;
    let dir = tempfile::tempdir().unwrap();
    let chunk = integrate::average::CHUNK;
    let sizes: [(&str, Dtype, Vec<usize>); 7] = [
        ("a.bias", Dtype::F32, vec![1]),
        ("b.weight", Dtype::F32, vec![2 * chunk + 4099]),
        ("c.weight", Dtype::BF16, vec![3, 2047]),
        ("d.weight", Dtype::BF16, vec![chunk + 17]),
        ("e.scale", Dtype::BF16, vec![5]),
        ("f.weight", Dtype::F16, vec![2049]),
        ("g.weight", Dtype::F32, vec![31, 33]),
    ];
    let pools: Vec<rayon::ThreadPool> =
        [1, 2, 3].iter().map(|&t| rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap()).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2024);
    for k in [1, 2, 3, 16] {
        let paths: Vec<PathBuf> = (0..k)
            .map(|i| {
                let p = dir.path().join(format!("k{k}_{i}.safetensors"));
                let tensors: Vec<(&str, Dtype, Vec<usize>, Vec<f64>)> = sizes
                    .iter()
                    .map(|(n, d, s)| (*n, *d, s.clone(), random_tensor(&mut rng, *d, s.iter().product(), i, k)))
                    .collect();
                write(&p, &tensors);
                p
            })
            .collect();
        for weights in [uniform(k), exponential(k, 0.3)] {
            for acc in [Accumulate::F64, Accumulate::F32] {
                let want = dir.path().join("reference.safetensors");
                sequential_reference(&paths, &weights, acc, &want);
                let want = std::fs::read(&want).unwrap();
                for pool in &pools {
                    let out = dir.path().join(format!("out{}.safetensors", pool.current_num_threads()));
                    pool.install(|| average(&open(&paths), &weights, acc, &out)).unwrap();
                    let got = std::fs::read(&out).unwrap();
                    assert!(
                        got == want,
                        "k={k} {acc:?} weights {weights:?} on {} threads: the bytes differ",
                        pool.current_num_threads()
                    );
                }
            }
        }
    }
}
