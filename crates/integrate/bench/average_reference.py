"""PyTorch reference for the averaging benchmark: load k safetensors files, mean, save."""
import json, sys, time
import torch
from safetensors.torch import load_file, save_file

out, inputs = sys.argv[1], sys.argv[2:]
t = time.perf_counter()
acc = None
for p in inputs:
    sd = load_file(p)
    if acc is None:
        acc = {k: v.to(torch.float64) for k, v in sd.items()}
    else:
        for k, v in sd.items():
            acc[k] += v.to(torch.float64)
    del sd
mean = {k: (v / len(inputs)).to(torch.float32).contiguous() for k, v in acc.items()}
save_file(mean, out)
print(json.dumps({"seconds": time.perf_counter() - t}))
