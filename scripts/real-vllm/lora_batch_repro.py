"""Does vLLM answer each request with the adapter it names when base and adapter requests
are batched together? (adapters-proof.sh's finding; stdlib only.)

    python lora_batch_repro.py URL MODEL [MODEL...] [--rounds N]

Each MODEL (the base model's served name and adapter names) is first asked each prompt
alone (greedy chat, 16 tokens): its own answer. Then, for N rounds, every MODEL is asked the
same prompt at once, and each answer is classified by whose lone answer it equals. Prints,
per model, how many batched answers were its own and whose they were otherwise.
"""

import json
import sys
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

PROMPTS = ["the quick brown fox", "where people make bread", "probe token stream latency",
           "what is the capital of france", "you are a helpful assistant"]


def ask(url, model, prompt):
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": 16, "temperature": 0, "seed": 1}).encode()
    req = urllib.request.Request(f"{url}/v1/chat/completions", body,
                                 {"content-type": "application/json"})
    try:
        return json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["message"]["content"]
    except Exception as e:  # noqa: BLE001
        return f"<error {e}>"


def main():
    args = sys.argv[1:]
    rounds = 6
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i:i + 2]
    url, models = args[0], args[1:]
    alone = {(m, p): ask(url, m, p) for m in models for p in PROMPTS}
    tally = {m: Counter() for m in models}
    with ThreadPoolExecutor(len(models)) as pool:
        for r in range(rounds):
            p = PROMPTS[r % len(PROMPTS)]
            got = list(pool.map(lambda m: ask(url, m, p), models))
            for m, answer in zip(models, got):
                whose = [o for o in models if alone[(o, p)] == answer]
                key = "own" if m in whose else ("+".join(whose) if whose else "nobody's")
                tally[m][key] += 1
    same = [(m, o) for m in models for o in models if m < o
            and all(alone[(m, p)] == alone[(o, p)] for p in PROMPTS)]
    print(f"  alone: identical answers on every prompt: {same or 'none'}")
    for m in models:
        print(f"  {m} batched with {len(models) - 1} others, {rounds} rounds: "
              + ", ".join(f"{k} {v}" for k, v in tally[m].most_common()))


if __name__ == "__main__":
    main()
