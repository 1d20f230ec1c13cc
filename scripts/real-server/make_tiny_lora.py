#!/usr/bin/env python3
"""Write a random LoRA adapter GGUF for a (tiny) llama.cpp base model.

Needs only `pip install gguf` (pulls numpy). No hub, no torch.

    make_tiny_lora.py BASE.gguf OUT.gguf [--seed N] [--rank R] [--no-effect]
                      [--targets attn_q,attn_v,...] [--strength S] [--alpha A]

Format (what llama.cpp's convert_lora_to_gguf.py writes and src/llama-adapter.cpp reads):
  * KV  general.architecture = base's arch (must match the base model, else load fails)
        general.type         = "adapter"
        adapter.type         = "lora"
        adapter.lora.alpha   = f32 (effective scale = request_scale * alpha / rank; alpha 0 => scale)
  * for each target base tensor W ("blk.N.attn_q.weight", ggml shape ne=[n_in, n_out]):
        "<W>.lora_a"  ggml ne=[n_in, rank]   (numpy shape (rank, n_in))
        "<W>.lora_b"  ggml ne=[rank, n_out]  (numpy shape (n_out, rank))
    so that W' = W + scale * B @ A.  Every name must exist in the base model (otherwise
    llama_adapter_lora_init throws "does not exist in base model" and the server exits), so the
    no-effect variant keeps real targets and sets lora_b = 0 (PEFT's own init): delta is exactly 0.

Default targets: attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down in every block.
Row 0 of lora_b for attn_output / ffn_down (the tensors that write the residual stream) is
zeroed, so the tiny model's constant residual channel 0 (make_tiny_gguf.py's "never emit junk"
trick) is preserved and the adapted model still emits only printable word tokens.
"""
import argparse
import sys

import numpy as np
from gguf import GGUFReader, GGUFWriter, GGUFType, Keys

DEFAULT_TARGETS = "attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down"
RESIDUAL_WRITERS = ("attn_output", "ffn_down")


def field_str(reader, key):
    f = reader.fields.get(key)
    return None if f is None else bytes(f.parts[f.data[0]]).decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", help="base model GGUF (e.g. tiny.gguf)")
    ap.add_argument("out", help="output adapter GGUF")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--no-effect", action="store_true",
                    help="write lora_b = 0: a valid adapter that leaves every answer identical to the base model's")
    ap.add_argument("--targets", default=DEFAULT_TARGETS,
                    help=f"comma-separated tensor kinds to adapt (default {DEFAULT_TARGETS})")
    ap.add_argument("--strength", type=float, default=1.0,
                    help="std of B@A entries in units of 1/sqrt(n_in) at scale 1 (default 1.0 ~ 2x the tiny base weights)")
    ap.add_argument("--alpha", type=float, default=None, help="adapter.lora.alpha (default = rank, i.e. scale factor 1)")
    a = ap.parse_args()

    reader = GGUFReader(a.base)
    arch = field_str(reader, "general.architecture")
    if not arch:
        sys.exit("base model has no general.architecture")
    kinds = [k for k in a.targets.split(",") if k]
    rng = np.random.default_rng(a.seed)
    alpha = float(a.rank if a.alpha is None else a.alpha)

    w = GGUFWriter(a.out, arch=arch)
    w.add_type(GGUFType.ADAPTER)                  # general.type = "adapter"
    w.add_string(Keys.Adapter.TYPE, "lora")       # adapter.type = "lora"
    w.add_float32(Keys.Adapter.LORA_ALPHA, alpha)  # adapter.lora.alpha
    w.add_name("tiny-random-lora" + ("-noop" if a.no_effect else ""))

    n = 0
    for t in reader.tensors:
        parts = t.name.split(".")  # blk.N.<kind>.weight
        if len(parts) != 4 or parts[0] != "blk" or parts[3] != "weight" or parts[2] not in kinds:
            continue
        if len(t.shape) != 2:
            continue
        n_in, n_out = int(t.shape[0]), int(t.shape[1])  # ggml order: ne[0] = n_in, ne[1] = n_out
        r = a.rank
        lora_a = rng.normal(0.0, 1.0 / np.sqrt(n_in), (r, n_in)).astype(np.float32)
        lora_b = rng.normal(0.0, a.strength / np.sqrt(r), (n_out, r)).astype(np.float32)
        if parts[2] in RESIDUAL_WRITERS:
            lora_b[0, :] = 0.0
        if a.no_effect:
            lora_b[:] = 0.0
        w.add_tensor(t.name + ".lora_a", lora_a)  # ggml ne = [n_in, rank]
        w.add_tensor(t.name + ".lora_b", lora_b)  # ggml ne = [rank, n_out]
        n += 1
    if n == 0:
        sys.exit(f"no base tensors matched targets {kinds}")

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: arch={arch} {n} lora pairs rank={a.rank} alpha={alpha} seed={a.seed}"
          f"{' no-effect (lora_b=0)' if a.no_effect else ''}")


if __name__ == "__main__":
    main()
