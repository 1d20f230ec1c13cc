#!/usr/bin/env python3
"""Train the tiny byte-level BPE tokenizer in tests/fixtures/tokenizer/ (needs `pip install tokenizers`).

Byte-level, so it encodes any text (like Llama 3 / GPT tokenizers); small, so the file is a few KiB.
Merges across words make token counts differ from word counts, which is what the tests need.
"""
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

CORPUS = """the quick brown fox jumps over a lazy dog and then runs back to its home in the old town
where people make bread every day for their friends who work on farms near river
you are a helpful assistant answer each question with care and keep your reply short clear polite true
probe token stream latency model server metric what is the capital of france paris is lovely
""" * 50

out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/tokenizer/tiny-bpe.json"
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
tok.train_from_iterator(CORPUS.splitlines(), trainer=trainer)
tok.save(out)
print(out, tok.get_vocab_size())
