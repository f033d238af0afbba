//! `integrate average` at a real checkpoint's size, as mergekit users run it: the output dtype
//! (`--out-dtype`), shards and index as transformers' `save_pretrained` writes them
//! (`--out-shard-size`), and mergekit's YAML config of a linear merge (`--config`).

use integrate::average::{
    average_with, exponential, plan_shards, Accumulate, Checkpoint, Layout, OutDtype, DEFAULT_SHARD_SIZE,
};
use integrate::commands::mergekit;
use rand::{Rng, SeedableRng};
use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

fn bytes_of(dtype: Dtype, v: &[f64]) -> Vec<u8> {
    match dtype {
        Dtype::F32 => v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
        Dtype::F64 => v.iter().flat_map(|&x| x.to_le_bytes()).collect(),
        Dtype::BF16 => v.iter().flat_map(|&x| half::bf16::from_f64(x).to_le_bytes()).collect(),
        Dtype::F16 => v.iter().flat_map(|&x| half::f16::from_f64(x).to_le_bytes()).collect(),
        Dtype::I64 => v.iter().flat_map(|&x| (x as i64).to_le_bytes()).collect(),
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

type Tensors = Vec<(String, Dtype, Vec<usize>, Vec<f64>)>;

fn write(path: &Path, tensors: &Tensors) {
    let data: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> =
        tensors.iter().map(|(n, d, s, v)| (n.clone(), *d, s.clone(), bytes_of(*d, v))).collect();
    let views: Vec<(String, TensorView)> =
        data.iter().map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap())).collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

/// Every tensor of a checkpoint (file or folder, sharded or not): name -> (dtype, shape, bytes).
fn tensors_of(path: &Path) -> BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)> {
    let c = Checkpoint::open(path).unwrap();
    let mut out = BTreeMap::new();
    for f in c.files().iter().filter(|f| f.extension().is_some_and(|e| e == "safetensors")) {
        let bytes = std::fs::read(f).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        for (name, t) in st.tensors() {
            assert!(out.insert(name.clone(), (t.dtype(), t.shape().to_vec(), t.data().to_vec())).is_none());
        }
    }
    out
}

/// A model of `n` tensors of varied sizes (one far larger than the others) in `dtype`, the
/// values of input `seed`.
fn model(seed: u64, dtype: Dtype) -> Tensors {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let sizes = [
        (vec![7usize, 9], "layers.0.attn"),
        (vec![300], "layers.0.mlp"),
        (vec![5], "norm"),
        (vec![40, 50], "embed"),
        (vec![128], "layers.1.attn"),
        (vec![33, 3], "layers.1.mlp"),
        (vec![1], "scale"),
    ];
    sizes
        .iter()
        .map(|(shape, name)| {
            let n: usize = shape.iter().product();
            let v = (0..n).map(|_| rng.gen_range(-0.2..0.2) + if rng.gen_bool(0.01) { 1e-40 } else { 0.0 }).collect();
            (format!("model.{name}.weight"), dtype, shape.clone(), v)
        })
        .collect()
}

/// Hugging Face folders of `k` models: one model.safetensors each, with a config.json.
fn folders(dir: &Path, k: usize, dtype: Dtype) -> Vec<PathBuf> {
    (0..k)
        .map(|i| {
            let c = dir.join(format!("ckpt{i}"));
            std::fs::create_dir_all(&c).unwrap();
            write(&c.join("model.safetensors"), &model(i as u64, dtype));
            std::fs::write(c.join("config.json"), format!("{{\"step\": {i}}}")).unwrap();
            c
        })
        .collect()
}

fn run(args: &[&OsStr]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_integrate")).args(args).output().unwrap()
}

fn os<'a>(s: &'a (impl AsRef<OsStr> + ?Sized)) -> &'a OsStr {
    s.as_ref()
}

fn must(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn refused(o: &std::process::Output) -> String {
    assert!(!o.status.success(), "accepted: {}", String::from_utf8_lossy(&o.stdout));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn open_all(paths: &[PathBuf]) -> Vec<Checkpoint> {
    paths.iter().map(|p| Checkpoint::open(p).unwrap()).collect()
}

/// The f64 weighted mean of the inputs' values, element by element, in input order from 0.
fn f64_mean(inputs: &[Tensors], weights: &[f64], t: usize, dtype: Dtype) -> Vec<f64> {
    let n = inputs[0][t].3.len();
    (0..n)
        .map(|i| {
            inputs
                .iter()
                .zip(weights)
                .fold(0.0, |acc, (m, w)| acc + w * values_of(dtype, &bytes_of(dtype, &m[t].3[i..=i]))[0])
        })
        .collect()
}

#[test]
fn out_dtypes_are_the_half_rounding_of_the_f64_mean() {
    let dir = tempfile::tempdir().unwrap();
    for in_dtype in [Dtype::F32, Dtype::BF16] {
        let k = 3;
        let paths: Vec<PathBuf> = (0..k)
            .map(|i| {
                let p = dir.path().join(format!("{in_dtype:?}{i}.safetensors"));
                write(&p, &model(10 + i as u64, in_dtype));
                p
            })
            .collect();
        let inputs: Vec<Tensors> = (0..k).map(|i| model(10 + i as u64, in_dtype)).collect();
        let weights = exponential(k, 0.4);
        for out in [OutDtype::Bf16, OutDtype::F16, OutDtype::F32] {
            let dest = dir.path().join(format!("{in_dtype:?}-{out:?}.safetensors"));
            let layout = Layout { dtype: Some(out), max_shard_size: u64::MAX };
            average_with(&open_all(&paths), &weights, Accumulate::F64, &layout, &dest).unwrap();
            let got = tensors_of(&dest);
            for (t, (name, _, shape, _)) in inputs[0].iter().enumerate() {
                let mean = f64_mean(&inputs, &weights, t, in_dtype);
                let want: Vec<u8> = match out {
                    OutDtype::Bf16 => mean.iter().flat_map(|&v| half::bf16::from_f64(v).to_le_bytes()).collect(),
                    OutDtype::F16 => mean.iter().flat_map(|&v| half::f16::from_f64(v).to_le_bytes()).collect(),
                    OutDtype::F32 => mean.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect(),
                };
                let (dtype, got_shape, bytes) = &got[name];
                assert_eq!((*dtype, got_shape), (out.dtype(), shape), "{name}");
                assert!(*bytes == want, "{in_dtype:?} -> {out:?}: {name} is not the rounding of the f64 mean");
            }
        }
    }
}

#[test]
fn identical_inputs_written_in_another_dtype_are_rounded_not_copied() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.safetensors");
    let m = model(3, Dtype::F32);
    write(&p, &m);
    let dest = dir.path().join("o.safetensors");
    let layout = Layout { dtype: Some(OutDtype::Bf16), max_shard_size: u64::MAX };
    average_with(&open_all(&[p.clone(), p]), &[0.5, 0.5], Accumulate::F64, &layout, &dest).unwrap();
    let got = tensors_of(&dest);
    for (name, _, _, v) in &m {
        assert_eq!(got[name].2, bytes_of(Dtype::BF16, &values_of(Dtype::F32, &bytes_of(Dtype::F32, v))), "{name}");
    }
}

#[test]
fn shards_respect_the_size_limit_and_the_index_names_every_tensor_once() {
    let dir = tempfile::tempdir().unwrap();
    let paths = folders(dir.path(), 2, Dtype::F32);
    let total: u64 = model(0, Dtype::F32).iter().map(|(_, _, _, v)| v.len() as u64 * 4).sum();
    // embed is 8000 bytes: larger than the limit, so it gets a shard of its own
    let limit = 1500;
    let out = dir.path().join("sharded");
    let layout = Layout { dtype: None, max_shard_size: limit };
    let written = average_with(&open_all(&paths), &[0.5, 0.5], Accumulate::F64, &layout, &out).unwrap();
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("model.safetensors.index.json")).unwrap()).unwrap();
    assert_eq!(index["metadata"]["total_size"], total);
    let weight_map = index["weight_map"].as_object().unwrap();
    let shards: BTreeSet<&str> = weight_map.values().map(|v| v.as_str().unwrap()).collect();
    let n = shards.len();
    assert!(n >= 3, "{shards:?}");
    assert_eq!(written.len(), n + 1, "the shards and the index: {written:?}");
    let mut seen = BTreeSet::new();
    for (i, shard) in shards.iter().enumerate() {
        assert_eq!(*shard, format!("model-{:05}-of-{n:05}.safetensors", i + 1));
        let bytes = std::fs::read(out.join(shard)).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let size: u64 = st.tensors().iter().map(|(_, t)| t.data().len() as u64).sum();
        assert!(size <= limit || st.len() == 1, "{shard}: {size} bytes in {} tensors over {limit}", st.len());
        for name in st.names() {
            assert!(seen.insert(name.to_string()), "{name} in two shards");
            assert_eq!(weight_map[name], *shard, "{name}");
        }
    }
    let all: BTreeSet<String> = model(0, Dtype::F32).into_iter().map(|t| t.0).collect();
    assert_eq!(seen, all, "every tensor in exactly one shard");
    assert_eq!(weight_map.len(), all.len());
    assert!(!out.join("model.safetensors").exists());
}

#[test]
fn shards_are_split_as_huggingface_hub_splits_a_state_dict() {
    // split_state_dict_into_shards_factory on tensors of [600, 600, 200, 600, 200, 200] bytes
    // with a limit of 1000: [600], [600, 200], [600, 200, 200]; one of 1200 bytes goes alone,
    // before the shard being filled
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.safetensors");
    let sizes = [600usize, 600, 200, 1200, 600, 200, 200];
    let tensors: Tensors =
        sizes.iter().enumerate().map(|(i, s)| (format!("t{i}"), Dtype::BF16, vec![s / 2], vec![0.5; s / 2])).collect();
    write(&p, &tensors);
    let c = Checkpoint::open(&p).unwrap();
    let plan = plan_shards(&c, None, 1000, "model.safetensors");
    // safetensors stores the tensors of one dtype by name, the order the plan follows
    let got: Vec<Vec<&str>> = plan.files.iter().map(|(_, t)| t.iter().map(String::as_str).collect()).collect();
    assert_eq!(got, [vec!["t0"], vec!["t3"], vec!["t1", "t2"], vec!["t4", "t5", "t6"]]);
    assert_eq!(plan.total_size, sizes.iter().sum::<usize>() as u64);
    assert_eq!(plan.files[0].0, "model-00001-of-00004.safetensors");
    // everything within the limit: one file, named as given, no index
    let one = plan_shards(&c, None, DEFAULT_SHARD_SIZE, "model.safetensors");
    assert_eq!((one.files.len(), one.files[0].0.as_str(), one.sharded()), (1, "model.safetensors", false));
    // the limit counts the output dtype's bytes: in f32 the same tensors take twice the room
    let wide = plan_shards(&c, Some(OutDtype::F32), 2000, "model.safetensors");
    assert_eq!(wide.files.len(), 4);
    assert_eq!(wide.total_size, 2 * plan.total_size);
}

#[test]
fn a_sharded_output_reads_back_as_the_unsharded_one() {
    let dir = tempfile::tempdir().unwrap();
    let paths = folders(dir.path(), 3, Dtype::BF16);
    let w = exponential(3, 0.3);
    let one = dir.path().join("one");
    let many = dir.path().join("many");
    for (out, limit) in [(&one, DEFAULT_SHARD_SIZE), (&many, 700)] {
        for dtype in [None, Some(OutDtype::F32)] {
            let dest = out.join(format!("{dtype:?}"));
            average_with(&open_all(&paths), &w, Accumulate::F64, &Layout { dtype, max_shard_size: limit }, &dest)
                .unwrap();
        }
    }
    assert!(one.join("None/model.safetensors").is_file() && !one.join("None/model.safetensors.index.json").exists());
    assert!(many.join("None/model.safetensors.index.json").is_file());
    for dtype in ["None", "Some(F32)"] {
        assert_eq!(tensors_of(&one.join(dtype)), tensors_of(&many.join(dtype)), "{dtype}");
    }
    // and a sharded output is an input like any other: averaging it with itself gives it back
    let again = dir.path().join("again");
    let sharded = many.join("None");
    average_with(
        &open_all(&[sharded.clone(), sharded.clone()]),
        &[0.5, 0.5],
        Accumulate::F64,
        &Layout::default(),
        &again,
    )
    .unwrap();
    assert_eq!(tensors_of(&again), tensors_of(&sharded));
}

fn config(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_mergekit_config_gives_the_bytes_of_the_same_average_given_by_flags() {
    let dir = tempfile::tempdir().unwrap();
    let paths = folders(dir.path(), 3, Dtype::BF16);
    let [a, b, c] = [&paths[0], &paths[1], &paths[2]].map(|p| p.display().to_string());
    // mergekit's own example shape: weights normalised by their sum (the default), dtype
    let cfg = config(
        dir.path(),
        "merge.yml",
        &format!(
            "models:\n  - model: {a}\n    parameters:\n      weight: 1.0\n  - model: {b}\n    parameters:\n      weight: 1\n  - model: {c}\n    parameters:\n      weight: 2.0\nmerge_method: linear\ndtype: bfloat16\n"
        ),
    );
    let by_config = dir.path().join("by-config");
    let by_flags = dir.path().join("by-flags");
    must(&run(&[os("average"), os("--config"), cfg.as_os_str(), os("-o"), by_config.as_os_str()]));
    // (`dtype: bfloat16` is the output dtype: given as --out-dtype, the recipes are the same too)
    let mut flags = vec![
        os("average"),
        os("--window"),
        os("3"),
        os("--weights"),
        os("0.25,0.25,0.5"),
        os("--out-dtype"),
        os("bf16"),
    ];
    flags.extend(paths.iter().map(|p| p.as_os_str()));
    flags.extend([os("-o"), by_flags.as_os_str()]);
    must(&run(&flags));
    let (x, y) = (
        std::fs::read(by_config.join("model.safetensors")).unwrap(),
        std::fs::read(by_flags.join("model.safetensors")).unwrap(),
    );
    assert!(x == y, "the config and the flags give different bytes");
    assert_eq!(std::fs::read(by_config.join("config.json")).unwrap(), b"{\"step\": 2}", "the last model's config");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(by_config.join("integration.json")).unwrap()).unwrap();
    assert_eq!(rec["config"]["normalize"], true);
    assert_eq!(rec["config"]["weights_given"], serde_json::json!([1.0, 1.0, 2.0]));
    assert_eq!(rec["recipe"]["weights"], serde_json::json!([0.25, 0.25, 0.5]));
    // the same average asked the other way is up to date: the recipe is the same
    flags.pop();
    flags.push(by_config.as_os_str());
    assert!(must(&run(&flags)).contains("up to date"));
}

#[test]
fn normalize_false_is_the_plain_weighted_sum() {
    let dir = tempfile::tempdir().unwrap();
    let paths = folders(dir.path(), 2, Dtype::F32);
    let [a, b] = [&paths[0], &paths[1]].map(|p| p.display().to_string());
    let models = format!(
        "models:\n  - model: {a}\n    parameters: {{weight: 1.0}}\n  - model: {b}\n    parameters: {{weight: 1.0}}\nmerge_method: linear\n"
    );
    let summed = config(dir.path(), "sum.yml", &format!("{models}parameters:\n  normalize: false\n"));
    let averaged = config(dir.path(), "avg.yml", &format!("{models}parameters:\n  normalize: true\n"));
    let parsed = mergekit::read(&summed).unwrap();
    assert_eq!((parsed.normalize, parsed.effective_weights()), (false, vec![1.0, 1.0]));
    assert_eq!(mergekit::read(&averaged).unwrap().effective_weights(), vec![0.5, 0.5]);
    let (s, m) = (dir.path().join("s"), dir.path().join("m"));
    must(&run(&[os("average"), os("--config"), summed.as_os_str(), os("-o"), s.as_os_str()]));
    must(&run(&[os("average"), os("--config"), averaged.as_os_str(), os("-o"), m.as_os_str()]));
    let (ts, tm) = (tensors_of(&s), tensors_of(&m));
    let (ta, tb) = (tensors_of(&paths[0]), tensors_of(&paths[1]));
    for name in ta.keys() {
        let (va, vb) = (values_of(Dtype::F32, &ta[name].2), values_of(Dtype::F32, &tb[name].2));
        let sum: Vec<f64> = va.iter().zip(&vb).map(|(x, y)| ((x + y) as f32) as f64).collect();
        let mean: Vec<f64> = va.iter().zip(&vb).map(|(x, y)| ((0.5 * x + 0.5 * y) as f32) as f64).collect();
        assert_eq!(values_of(Dtype::F32, &ts[name].2), sum, "{name}: normalize false");
        assert_eq!(values_of(Dtype::F32, &tm[name].2), mean, "{name}: normalize true");
    }
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.join("integration.json")).unwrap()).unwrap();
    assert_eq!(rec["recipe"]["method"], "weighted sum");
    // a top-level weight is every model's weight unless a model gives its own (mergekit's lookup)
    let shared = config(
        dir.path(),
        "shared.yml",
        &format!("models:\n  - model: {a}\n  - model: {b}\n    parameters: {{weight: 3}}\nmerge_method: linear\nparameters: {{weight: 1}}\n"),
    );
    assert_eq!(mergekit::read(&shared).unwrap().effective_weights(), vec![0.25, 0.75]);
}

#[test]
fn configs_outside_the_linear_case_are_refused_naming_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let paths = folders(dir.path(), 2, Dtype::F32);
    let [a, b] = [&paths[0], &paths[1]].map(|p| p.display().to_string());
    let two = format!(
        "models:\n  - model: {a}\n    parameters: {{weight: 0.5}}\n  - model: {b}\n    parameters: {{weight: 0.5}}\n"
    );
    let cases: Vec<(&str, String, &str)> = vec![
        ("ties", format!("{two}merge_method: ties\n"), "`merge_method: ties`: only `linear`"),
        ("no-method", two.clone(), "`merge_method` is missing"),
        ("missing-model", format!("models:\n  - model: {a}\n    parameters: {{weight: 0.5}}\n  - model: {}/nowhere\n    parameters: {{weight: 0.5}}\nmerge_method: linear\n", dir.path().display()), "`models[1].model: "),
        ("hub-id", format!("models:\n  - model: {a}\n    parameters: {{weight: 0.5}}\n  - model: mistralai/Mistral-7B-v0.1\n    parameters: {{weight: 0.5}}\nmerge_method: linear\n"), "Hub ids are not downloaded"),
        ("weight-list", format!("models:\n  - model: {a}\n    parameters: {{weight: [0.1, 0.9]}}\n  - model: {b}\n    parameters: {{weight: 0.5}}\nmerge_method: linear\n"), "`models[0].parameters.weight`: weights given as a list"),
        ("weight-filter", format!("models:\n  - model: {a}\n    parameters:\n      weight:\n        - filter: mlp\n          value: 0.2\n        - value: 0.5\n  - model: {b}\n    parameters: {{weight: 0.5}}\nmerge_method: linear\n"), "`models[0].parameters.weight`: weights given as a list"),
        ("no-weight", format!("models:\n  - model: {a}\n  - model: {b}\n    parameters: {{weight: 0.5}}\nmerge_method: linear\n"), "`models[0].parameters.weight` is missing"),
        ("slices", format!("slices:\n  - sources:\n      - model: {a}\n        layer_range: [0, 2]\nmerge_method: linear\n"), "`slices`: only a `models` list"),
        ("base-model", format!("{two}merge_method: linear\nbase_model: {a}\n"), "`base_model`"),
        ("tokenizer", format!("{two}merge_method: linear\ntokenizer_source: union\n"), "`tokenizer_source`"),
        ("density", format!("models:\n  - model: {a}\n    parameters: {{weight: 0.5, density: 0.3}}\n  - model: {b}\n    parameters: {{weight: 0.5}}\nmerge_method: linear\n"), "`models[0].parameters.density`"),
        ("int-dtype", format!("{two}merge_method: linear\ndtype: int64\n"), "`dtype: int64`"),
        ("zero-sum", format!("models:\n  - model: {a}\n    parameters: {{weight: 1}}\n  - model: {b}\n    parameters: {{weight: -1}}\nmerge_method: linear\n"), "sum to 0"),
        ("not-yaml", "models: [\n".to_string(), "not a valid YAML document"),
    ];
    for (name, text, msg) in cases {
        let cfg = config(dir.path(), &format!("{name}.yml"), &text);
        let out = dir.path().join(format!("out-{name}"));
        let err = refused(&run(&[os("average"), os("--config"), cfg.as_os_str(), os("-o"), out.as_os_str()]));
        assert!(err.contains(msg) && err.contains(&format!("{name}.yml")), "{name}: {err}");
        assert!(!out.exists(), "{name}: an output folder was left behind");
    }
    // models and weights come from one place: the config or the flags
    let good = config(dir.path(), "good.yml", &format!("{two}merge_method: linear\nout_dtype: bfloat16\n"));
    let out = dir.path().join("out-both");
    let err = refused(&run(&[
        os("average"),
        os("--config"),
        good.as_os_str(),
        os("--weights"),
        os("0.5,0.5"),
        os("-o"),
        out.as_os_str(),
    ]));
    assert!(err.contains("--config") && err.contains("--weights"), "{err}");
    let err = refused(&run(&[
        os("average"),
        os("--config"),
        good.as_os_str(),
        paths[0].as_os_str(),
        os("-o"),
        out.as_os_str(),
    ]));
    assert!(err.contains("--config"), "{err}");
    let err = refused(&run(&[
        os("average"),
        os("--config"),
        good.as_os_str(),
        os("--out-dtype"),
        os("f16"),
        os("-o"),
        out.as_os_str(),
    ]));
    assert!(err.contains("`out_dtype` gives the output dtype") && err.contains("good.yml"), "{err}");
    assert!(!out.exists());
    // the good one runs, in its out_dtype
    must(&run(&[os("average"), os("--config"), good.as_os_str(), os("-o"), out.as_os_str()]));
    assert!(tensors_of(&out).values().all(|t| t.0 == Dtype::BF16));
}

#[test]
fn the_command_writes_shards_keeps_them_up_to_date_and_rewrites_damaged_ones() {
    let dir = tempfile::tempdir().unwrap();
    let paths = folders(dir.path(), 2, Dtype::F32);
    let out = dir.path().join("avg");
    let args = |size: &'static str| {
        let mut a = vec![
            os("average"),
            os("--window"),
            os("2"),
            os("--out-shard-size"),
            os(size),
            os("--out-dtype"),
            os("bf16"),
        ];
        a.extend(paths.iter().map(|p| p.as_os_str()));
        a.extend([os("-o"), out.as_os_str()]);
        a
    };
    must(&run(&args("2KB")));
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("model.safetensors.index.json")).unwrap()).unwrap();
    let shards: BTreeSet<String> =
        index["weight_map"].as_object().unwrap().values().map(|v| v.as_str().unwrap().to_string()).collect();
    assert!(shards.len() > 1);
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("integration.json")).unwrap()).unwrap();
    let recorded: BTreeSet<String> =
        rec["outputs"].as_array().unwrap().iter().map(|o| o["file"].as_str().unwrap().to_string()).collect();
    assert!(
        shards.iter().all(|s| recorded.contains(s)) && recorded.contains("model.safetensors.index.json"),
        "{recorded:?}"
    );
    assert_eq!(
        (rec["recipe"]["out_dtype"].as_str(), rec["recipe"]["out_shard_size"].as_u64()),
        (Some("bf16"), Some(2000))
    );
    assert!(must(&run(&args("2KB"))).contains("up to date"));
    // a truncated shard is seen and the average written again, whole
    let first = out.join(shards.iter().next().unwrap());
    let whole = std::fs::read(&first).unwrap();
    std::fs::write(&first, &whole[..whole.len() / 2]).unwrap();
    let o = run(&args("2KB"));
    assert!(
        !must(&o).contains("up to date") && String::from_utf8_lossy(&o.stderr).contains("does not have the sha256")
    );
    assert_eq!(std::fs::read(&first).unwrap(), whole);
    // another shard size is another average: refused without --force, and with it the shards
    // give way to one model.safetensors (no stale shard or index left)
    assert!(refused(&run(&args("5GB"))).contains("--force"));
    let mut forced = args("5GB");
    forced.push(os("--force"));
    must(&run(&forced));
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".lock")
        .collect();
    names.sort();
    assert_eq!(names, ["config.json", "integration.json", "model.safetensors"]);
}

#[test]
fn bad_sizes_and_integer_tensors_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let paths = folders(dir.path(), 2, Dtype::F32);
    let out = dir.path().join("avg");
    let mut a = vec![os("average"), os("--window"), os("2"), os("--out-shard-size"), os("1.5GB")];
    a.extend(paths.iter().map(|p| p.as_os_str()));
    a.extend([os("-o"), out.as_os_str()]);
    assert!(refused(&run(&a)).contains("\"1.5GB\" is not a size"));
    // an integer tensor, even with an output dtype asked for, is refused naming its file
    for p in &paths {
        let mut m = model(0, Dtype::F32);
        m.push(("position_ids".into(), Dtype::I64, vec![4], vec![0.0, 1.0, 2.0, 3.0]));
        write(&p.join("model.safetensors"), &m);
    }
    let mut a = vec![os("average"), os("--window"), os("2"), os("--out-dtype"), os("bf16")];
    a.extend(paths.iter().map(|p| p.as_os_str()));
    a.extend([os("-o"), out.as_os_str()]);
    let err = refused(&run(&a));
    assert!(err.contains("position_ids") && err.contains("I64") && err.contains("model.safetensors"), "{err}");
    assert!(!out.exists());
}
