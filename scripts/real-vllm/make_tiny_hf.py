#!/usr/bin/env python3
"""Write a tiny random-weight Llama in Hugging Face format for a real vLLM, offline.

No model hub: the tokenizer is the project's own tiny byte-level BPE
(tests/fixtures/tokenizer/tiny-bpe.json) with two special tokens and a minimal chat template;
the weights are random (seeded), float32, a few MB. vLLM serves it like any Llama.

    make_tiny_hf.py OUT_DIR [--seed N]
"""
import argparse
import pathlib

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = pathlib.Path(args.out)

    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(ROOT / "tests/fixtures/tokenizer/tiny-bpe.json"),
        bos_token="<s>",
        eos_token="</s>",
    )
    tok.chat_template = CHAT_TEMPLATE
    # head_dim 64: a size every vLLM CPU attention backend supports.
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    print(out, "vocab", len(tok), "params", sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main()
