"""transformers' greedy `generate` on a folder `lm export` wrote, for `bench_generate`.

Loads the folder as LlamaForCausalLM (fp32, CPU), reads the prompts' token ids (JSON: a list of
lists, lm's tokenization), sorts them longest first and decodes `--batch-size` at a time as lm's
`generate` batches them, each batch left-padded by the tokenizer (padding side "left", pad token
the eos `lm export` declares) and run through
`model.generate(input_ids, attention_mask=..., max_new_tokens=N, do_sample=False)`.
The eos is cleared from the generation config (`lm`'s run tokenizers have no end-of-text token,
so lm decodes all N tokens; the exported eos, the newline, would otherwise stop rows early).

After one warm-up pass it prints "ready", then times one pass (every prompt, model load
excluded) per "run" line read from stdin and prints {"seconds": ...}; at EOF it runs one more,
untimed, pass with `output_logits=True` and prints the generated ids (prompt order), each
step's top-2 raw logits gap, and whether its own tokenizer encodes the prompt texts
(`--texts`) to the same ids.
"""
import argparse, json, sys, time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="a folder written by `lm export`")
    ap.add_argument("--prompts", required=True, help="JSON: the prompts' token ids, a list of lists")
    ap.add_argument("--texts", help="JSON: the prompts' texts (checks the tokenizer only)")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    tok = AutoTokenizer.from_pretrained(a.model)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    model.eval()
    # the model's own generation config, edited in place (transformers fills what a config passed
    # to generate leaves unset from it, the eos included)
    gc = model.generation_config
    gc.eos_token_id = None
    gc.pad_token_id = tok.pad_token_id
    gc.do_sample = False
    gc.max_length = None
    gc.max_new_tokens = a.max_new_tokens
    prompts = json.load(open(a.prompts))
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    batches = []
    for s in range(0, len(order), a.batch_size):
        idx = order[s : s + a.batch_size]
        enc = tok.pad({"input_ids": [prompts[i] for i in idx]}, padding=True, return_tensors="pt")
        batches.append((idx, enc["input_ids"], enc["attention_mask"]))

    def one_pass(logits=False):
        out, gaps = [None] * len(prompts), [None] * len(prompts)
        with torch.inference_mode():
            for idx, ids, mask in batches:
                if logits:
                    g = model.generate(ids, attention_mask=mask, return_dict_in_generate=True, output_logits=True)
                else:
                    g = model.generate(ids, attention_mask=mask)
                seq = g.sequences if logits else g
                new = seq[:, ids.shape[1] :].tolist()
                if logits:
                    top = torch.stack(g.logits, 1).float().topk(2, dim=-1).values  # [B, steps, 2]
                    gap = (top[..., 0] - top[..., 1]).tolist()
                for r, i in enumerate(idx):
                    out[i] = new[r]
                    if logits:
                        gaps[i] = gap[r]
        return out, gaps

    one_pass()  # warm-up
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "run":
            t0 = time.perf_counter()
            one_pass()
            print(json.dumps({"seconds": time.perf_counter() - t0}), flush=True)
    out, gaps = one_pass(logits=True)
    same_tok = None
    if a.texts:
        texts = json.load(open(a.texts))
        same_tok = sum(tok(t, add_special_tokens=False)["input_ids"] == p for t, p in zip(texts, prompts))
    print(json.dumps({
        "tokens": out, "top2_gaps": gaps, "threads": torch.get_num_threads(),
        "tokenizer_identical": same_tok, "attn_implementation": model.config._attn_implementation,
        "transformers": __import__("transformers").__version__, "torch": torch.__version__,
    }), flush=True)


if __name__ == "__main__":
    main()
