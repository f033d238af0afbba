//! `lm export` on a checkpoint of a tiny run: the Hugging Face folder's files, config, tensor
//! names and bytes (q, k, v and gate, up are row blocks of our fused matrices), the refusal of a
//! non-empty folder, and of a checkpoint whose weights do not match their sidecar.

use std::path::Path;

use lm::train::{self, TrainOptions};
use safetensors::SafeTensors;

mod common;

fn tiny_run(dir: &Path) -> std::path::PathBuf {
    let cfg = common::tiny_config(dir, 10, 2, 2);
    let run = dir.join("run");
    train::train(&cfg, &run, &TrainOptions { quiet: true, ..Default::default() }).unwrap();
    run.join("checkpoints")
}

#[test]
fn export_writes_a_llama_folder_of_the_same_weights() {
    let dir = tempfile::tempdir().unwrap();
    let ckpts = tiny_run(dir.path());
    let out = dir.path().join("hf");
    let e = lm::export::export(&ckpts.join("step_000010.safetensors"), &out, None, false).unwrap();
    assert_eq!(e.step, 10);
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".lock")
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "config.json",
            "generation_config.json",
            "model.safetensors",
            "provenance.json",
            "special_tokens_map.json",
            "tokenizer.json",
            "tokenizer_config.json"
        ]
    );

    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["architectures"][0], "LlamaForCausalLM");
    assert_eq!(
        (cfg["hidden_size"].as_i64(), cfg["num_hidden_layers"].as_i64(), cfg["num_attention_heads"].as_i64()),
        (Some(64), Some(2), Some(4))
    );
    assert_eq!(
        (cfg["intermediate_size"].as_i64(), cfg["max_position_embeddings"].as_i64(), cfg["vocab_size"].as_i64()),
        (Some(176), Some(32), Some(512))
    );
    assert_eq!(
        (cfg["tie_word_embeddings"].as_bool(), cfg["rope_theta"].as_f64(), cfg["rms_norm_eps"].as_f64()),
        (Some(true), Some(10000.0), Some(1e-5))
    );
    let tok = lm::tokenize::Tok::load(&dir.path().join("tok.json")).unwrap();
    let nl = tok.prefix_token().unwrap();
    assert_eq!((cfg["bos_token_id"].as_u64(), cfg["eos_token_id"].as_u64()), (Some(nl as u64), Some(nl as u64)));
    let tc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tokenizer_config.json")).unwrap()).unwrap();
    assert_eq!((tc["bos_token"].as_str(), tc["eos_token"].as_str()), (Some("Ċ"), Some("Ċ")));
    assert_eq!(
        std::fs::read(out.join("tokenizer.json")).unwrap(),
        std::fs::read(dir.path().join("tok.json")).unwrap(),
        "the run's tokenizer, byte for byte"
    );
    let prov: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("provenance.json")).unwrap()).unwrap();
    assert_eq!(
        prov["source"]["weights_sha256"].as_str().unwrap(),
        output::sha256_file(&ckpts.join("step_000010.safetensors")).unwrap()
    );
    assert_eq!(prov["tokenizer_sha256"].as_str().unwrap(), tok.sha256);

    // the tensors: renamed, q/k/v and gate/up split by rows, nothing else, no lm_head (tied)
    let ours = std::fs::read(ckpts.join("step_000010.safetensors")).unwrap();
    let theirs = std::fs::read(out.join("model.safetensors")).unwrap();
    let (a, b) = (SafeTensors::deserialize(&ours).unwrap(), SafeTensors::deserialize(&theirs).unwrap());
    assert_eq!(b.len(), 1 + 2 * 9 + 1);
    assert!(b.tensor("lm_head.weight").is_err());
    assert_eq!(a.tensor("wte.weight").unwrap().data(), b.tensor("model.embed_tokens.weight").unwrap().data());
    let row = 64 * 4;
    for i in 0..2 {
        let qkv = a.tensor(&format!("blocks.{i}.attn.qkv.weight")).unwrap();
        for (j, n) in ["q_proj", "k_proj", "v_proj"].iter().enumerate() {
            let t = b.tensor(&format!("model.layers.{i}.self_attn.{n}.weight")).unwrap();
            assert_eq!(t.shape(), [64, 64]);
            assert_eq!(t.data(), &qkv.data()[j * 64 * row..(j + 1) * 64 * row], "layer {i} {n}");
        }
        let gu = a.tensor(&format!("blocks.{i}.mlp.gate_up.weight")).unwrap();
        assert_eq!(
            b.tensor(&format!("model.layers.{i}.mlp.gate_proj.weight")).unwrap().data(),
            &gu.data()[..176 * row]
        );
        assert_eq!(b.tensor(&format!("model.layers.{i}.mlp.up_proj.weight")).unwrap().data(), &gu.data()[176 * row..]);
        assert_eq!(b.tensor(&format!("model.layers.{i}.mlp.down_proj.weight")).unwrap().shape(), [64, 176]);
        assert_eq!(
            a.tensor(&format!("blocks.{i}.attn_norm.weight")).unwrap().data(),
            b.tensor(&format!("model.layers.{i}.input_layernorm.weight")).unwrap().data()
        );
        assert_eq!(
            a.tensor(&format!("blocks.{i}.mlp_norm.weight")).unwrap().data(),
            b.tensor(&format!("model.layers.{i}.post_attention_layernorm.weight")).unwrap().data()
        );
    }
    assert_eq!(a.tensor("norm_f.weight").unwrap().data(), b.tensor("model.norm.weight").unwrap().data());
    let (_, meta) = SafeTensors::read_metadata(&theirs).unwrap();
    assert_eq!(
        meta.metadata().as_ref().and_then(|m| m.get("format")).map(String::as_str),
        Some("pt"),
        "transformers wants format=pt"
    );

    // a non-empty folder is refused unless --force; --force replaces it, dropping strays
    let e = format!("{:#}", lm::export::export(&ckpts.join("step_000010.json"), &out, None, false).unwrap_err());
    assert!(e.contains("not empty") && e.contains("--force"), "{e}");
    std::fs::write(out.join("stray.bin"), b"x").unwrap();
    lm::export::export(&ckpts.join("step_000010.json"), &out, None, true).unwrap();
    assert!(!out.join("stray.bin").exists());
    assert_eq!(std::fs::read(out.join("model.safetensors")).unwrap(), theirs, "the same bytes again");

    // weights that do not match their sidecar are refused, naming the file; nothing is written
    let w = ckpts.join("step_000010.safetensors");
    let mut bytes = std::fs::read(&w).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 1;
    std::fs::write(&w, &bytes).unwrap();
    let out2 = dir.path().join("hf2");
    let e = format!("{:#}", lm::export::export(&w, &out2, None, false).unwrap_err());
    assert!(e.contains("step_000010.safetensors") && e.contains("sha256"), "{e}");
    assert!(!out2.exists());
}
