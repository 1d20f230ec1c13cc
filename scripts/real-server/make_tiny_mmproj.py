#!/usr/bin/env python3
"""Create a tiny random-weight vision projector ("mmproj") GGUF for llama.cpp's `--mmproj`.

Needs only `pip install gguf` (pulls numpy). No hub access. Pairs with the tiny text model
written by make_tiny_gguf.py: the projector's output width (mm.2.weight rows) must equal the
text model's n_embd (64 by default), or mtmd refuses to load ("mismatch between text model
(n_embd = ...) and mmproj (n_embd = ...)").

Design notes (checked against the llama.cpp vendored in llama-cpp-python 0.3.36,
tools/mtmd/clip.cpp, clip-impl.h, models/llava.cpp):
* Projector type "mlp" (LLaVA-1.5): a CLIP-style ViT, then mm.0 -> GELU -> mm.2.
  No image_grid_pinpoints, so mtmd uses the fixed-size preprocessor: every image is resized
  to image_size x image_size, and becomes (image_size / patch_size)^2 embeddings
  (16 with the defaults), with no extra begin/end tokens.
* The llava graph stops before the last ViT block (LLaVA takes the second-to-last layer),
  so with --n-layer 2 exactly one block runs; all blocks must still be present.
* FFN tensors are written in the standard orientation (ffn_up: n_embd -> n_ff); n_ff must
  differ from n_embd, or clip.cpp's legacy "ffn up/down swapped" check fires (harmless here).
* The text side needs nothing special: llama-server puts mtmd's default marker
  "<__media__>" in the prompt where the image goes and mtmd splits on it, so the text
  model's ChatML template and vocab work unchanged.
"""
import argparse

import numpy as np
from gguf import GGUFWriter


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--text-n-embd", type=int, default=64,
                    help="n_embd of the paired text model (make_tiny_gguf.py --n-embd)")
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--patch-size", type=int, default=8)
    ap.add_argument("--n-embd", type=int, default=32, help="vision encoder width")
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-head", type=int, default=2)
    ap.add_argument("--n-ff", type=int, default=64)
    ap.add_argument("--proj-ff", type=int, default=64, help="hidden width of the mlp projector")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    assert a.image_size % a.patch_size == 0
    assert a.n_embd % a.n_head == 0
    assert a.n_ff != a.n_embd

    rng = np.random.default_rng(a.seed)
    f32 = np.float32
    E, F, P = a.n_embd, a.n_ff, a.patch_size
    n_pos = (a.image_size // P) ** 2

    def mat(rows, cols):
        return rng.normal(0, 1.0 / np.sqrt(cols), (rows, cols)).astype(f32)

    # arch "clip" => general.architecture = "clip", as llama.cpp's convert_hf_to_gguf.py writes
    w = GGUFWriter(a.out, arch="clip")
    w.add_name("tiny-random-mmproj")
    w.add_file_type(0)  # ALL_F32
    w.add_string("clip.projector_type", "mlp")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_audio_encoder", False)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.image_size", a.image_size)
    w.add_uint32("clip.vision.patch_size", P)
    w.add_uint32("clip.vision.embedding_length", E)
    w.add_uint32("clip.vision.feed_forward_length", F)
    w.add_uint32("clip.vision.projection_dim", a.text_n_embd)
    w.add_uint32("clip.vision.block_count", a.n_layer)
    w.add_uint32("clip.vision.attention.head_count", a.n_head)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-5)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])

    # numpy shapes are reversed into ggml's ne: conv kernel ne = [P, P, 3, E]
    w.add_tensor("v.patch_embd.weight", rng.normal(0, 1.0 / np.sqrt(3 * P * P), (E, 3, P, P)).astype(f32))
    w.add_tensor("v.position_embd.weight", rng.normal(0, 0.1, (n_pos, E)).astype(f32))
    w.add_tensor("v.pre_ln.weight", np.ones(E, f32))
    w.add_tensor("v.pre_ln.bias", np.zeros(E, f32))
    for i in range(a.n_layer):
        p = f"v.blk.{i}."
        for n in ("ln1", "ln2"):
            w.add_tensor(p + n + ".weight", np.ones(E, f32))
            w.add_tensor(p + n + ".bias", np.zeros(E, f32))
        for n in ("attn_q", "attn_k", "attn_v", "attn_out"):
            w.add_tensor(p + n + ".weight", mat(E, E))
            w.add_tensor(p + n + ".bias", np.zeros(E, f32))
        w.add_tensor(p + "ffn_up.weight", mat(F, E))
        w.add_tensor(p + "ffn_up.bias", np.zeros(F, f32))
        w.add_tensor(p + "ffn_down.weight", mat(E, F))
        w.add_tensor(p + "ffn_down.bias", np.zeros(E, f32))
    # LLaVA mlp projector: mm.0 (E -> proj_ff), GELU, mm.2 (proj_ff -> text n_embd)
    w.add_tensor("mm.0.weight", mat(a.proj_ff, E))
    w.add_tensor("mm.0.bias", np.zeros(a.proj_ff, f32))
    # make_tiny_gguf.py keeps residual channel 0 constant (token_embd[:, 0] = 4) so the text
    # model never samples control/byte tokens; image embeddings keep that channel too.
    mm2_w = mat(a.text_n_embd, a.proj_ff)
    mm2_b = np.zeros(a.text_n_embd, f32)
    mm2_w[0, :] = 0.0
    mm2_b[0] = 4.0
    w.add_tensor("mm.2.weight", mm2_w)
    w.add_tensor("mm.2.bias", mm2_b)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: projector=mlp image={a.image_size}px patch={P} -> {n_pos} image tokens, "
          f"vit n_embd={E} n_layer={a.n_layer} n_ff={F} heads={a.n_head}, out n_embd={a.text_n_embd}")


if __name__ == "__main__":
    main()
