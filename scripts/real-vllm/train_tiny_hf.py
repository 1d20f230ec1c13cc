#!/usr/bin/env python3
"""Train the tiny Llama of make_tiny_hf.py on English text for a few CPU minutes, offline.

A random-weight model is never sure of its next token (its top-1 leads top-2 by a few
hundredths of a nat), so it says nothing about the canary's default `margin`, which is about
trained models. No trained weights are reachable here (no model hub), so this trains one:
the same architecture and tokenizer, on the text of this project's README and Debian's
/usr/share/common-licenses (plain English, a few hundred KB), next-token loss, AdamW.
It is a small model that has seen little text, so it is less sure than a real LLM: a
conservative stand-in when asking how many positions a margin leaves to compare.

    train_tiny_hf.py OUT_DIR [--minutes 4] [--seed 0]

Also writes OUT_DIR/canary-prompts.jsonl: sentence openings from the same text (the
kind of prompt a canary asks a model that knows the answer).
"""
import argparse
import glob
import json
import math
import pathlib
import random
import re
import time

import torch
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

ROOT = pathlib.Path(__file__).resolve().parents[2]


def corpus():
    texts = [(ROOT / "README.md").read_text()]
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        try:
            texts.append(pathlib.Path(path).read_text())
        except (UnicodeDecodeError, IsADirectoryError):
            pass
    text = "\n".join(texts)
    # Markdown tables and code are noise for a tiny model: keep prose lines.
    lines = [l.strip() for l in text.splitlines()]
    return "\n".join(l for l in lines if l and not l.startswith(("|", "```", "#")) and len(l) > 30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--base", default=None, help="an untrained model dir (make_tiny_hf.py)")
    ap.add_argument("--minutes", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    base = args.base
    model = LlamaForCausalLM.from_pretrained(base)
    tok = PreTrainedTokenizerFast.from_pretrained(base)
    text = corpus()
    ids = torch.tensor(tok(text)["input_ids"], dtype=torch.long)
    print(f"corpus: {len(text)} characters, {len(ids)} tokens")
    seq, batch = 128, 16
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    model.train()
    deadline = time.monotonic() + args.minutes * 60
    step = 0
    while time.monotonic() < deadline:
        starts = torch.randint(0, len(ids) - seq - 1, (batch,))
        x = torch.stack([ids[s : s + seq] for s in starts])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f} nats/token", flush=True)
    print(f"trained {step} steps, last loss {loss.item():.3f} (uniform: {math.log(len(tok)):.2f})")
    model.eval()
    out = pathlib.Path(args.out)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    # Canary prompts: the first words of prose sentences the model has read.
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if 60 < len(s) < 300]
    random.shuffle(sentences)
    with open(out / "canary-prompts.jsonl", "w") as f:
        for s in sentences[:20]:
            words = s.split()
            f.write(json.dumps({"prompt": " ".join(words[: max(4, len(words) // 3)])}) + "\n")
    print(out)


if __name__ == "__main__":
    main()
