"""Writes random LoRA adapters for the tiny Llama (the adapter check's real-vLLM proof,
scripts/real-vllm/adapters-proof.sh).

    python make_tiny_loras.py BASE_MODEL OUT_DIR

OUT_DIR/a, OUT_DIR/b, OUT_DIR/c: peft adapters (LoraConfig + get_peft_model +
save_pretrained) on q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, rank 8,
with lora_A and lora_B both drawn at random (peft zero-inits lora_B by default, which makes
an adapter a no-op), each from its own seed: strong enough that greedy answers part from the
base model's.

OUT_DIR/silent: vllm#55193's case, an adapter whose target modules match none of the
model's. peft refuses to create one (get_peft_model raises "Target modules ... not found in
the base model"), so it is a's adapter with every tensor renamed under a module path the
model does not have (`model.blocks.N.attn.q_proj` for `model.layers.N.self_attn.q_proj`)
and the config's target_modules set to those paths. Each key still ends in a projection
name vLLM expects, so vLLM's load check (which looks at the last component only) accepts
it, and no layer of the model finds its weights: vLLM serves the base model under its name.

OUT_DIR/silent-zero: the fallback, a's adapter with lora_B = 0 (a no-op by construction).

Prints, per adapter, how many answer tokens its weights change on a probe prompt (greedy,
transformers, no vLLM), so a no-op is visible before vLLM starts.
"""

import json
import os
import shutil
import sys

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
RANK = 8


def write(base, out, seed, std):
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = LoraConfig(
        r=RANK, lora_alpha=2 * RANK, target_modules=TARGETS, lora_dropout=0.0,
        init_lora_weights=False, task_type="CAUSAL_LM",
    )
    peft = get_peft_model(model, config)
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_A" in name or "lora_B" in name:
                p.normal_(0.0, std)
    peft.save_pretrained(out)
    return peft


def greedy(model, tok, prompt, n=16):
    ids = tok(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=n, do_sample=False, pad_token_id=0)
    return out[0, ids.shape[1]:].tolist()


def main():
    base, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(base)
    plain = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    prompt = "the quick brown fox"
    base_answer = greedy(plain, tok, prompt)
    for name, seed in (("a", 11), ("b", 12), ("c", 13)):
        peft = write(base, f"{out}/{name}", seed, std=0.25)
        answer = greedy(peft, tok, prompt)
        changed = sum(x != y for x, y in zip(answer, base_answer))
        print(f"{name}: peft adapter, rank {RANK}, {len(TARGETS)} modules, "
              f"{changed}/{len(base_answer)} greedy tokens differ from the base model's")
    # silent: a's tensors under a module path the model does not have.
    tensors = load_file(f"{out}/a/adapter_model.safetensors")
    renamed = {k.replace("model.layers.", "model.blocks.").replace(".self_attn.", ".attn.")
               .replace(".mlp.", ".ffn."): v for k, v in tensors.items()}
    assert all(k.split(".lora_")[0].rsplit(".", 1)[-1] in TARGETS for k in renamed)
    os.makedirs(f"{out}/silent", exist_ok=True)
    save_file(renamed, f"{out}/silent/adapter_model.safetensors")
    cfg = json.load(open(f"{out}/a/adapter_config.json"))
    cfg["target_modules"] = sorted({k.split(".lora_")[0].removeprefix("base_model.model.")
                                   for k in renamed})
    json.dump(cfg, open(f"{out}/silent/adapter_config.json", "w"), indent=2)
    try:
        get_peft_model(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
                       LoraConfig(r=RANK, target_modules=cfg["target_modules"]))
        print("silent: peft accepted target modules that match nothing (unexpected)")
    except ValueError as e:
        print(f"silent: peft refuses it ({str(e).splitlines()[0][:120]}); written by hand, "
              f"{len(renamed)} tensors under model.blocks.N.(attn|ffn).*")
    # silent-zero: lora_B = 0.
    shutil.copytree(f"{out}/a", f"{out}/silent-zero", dirs_exist_ok=True)
    zero = {k: (torch.zeros_like(v) if "lora_B" in k else v) for k, v in tensors.items()}
    save_file(zero, f"{out}/silent-zero/adapter_model.safetensors")
    print("silent-zero: a with lora_B = 0")


if __name__ == "__main__":
    main()
