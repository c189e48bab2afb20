#!/usr/bin/env python3
"""Writes embed_sentences.txt: the sentences of the embedding benchmark (embed.py), 256 English
sentences of 8 to 64 all-MiniLM-L6-v2 tokens ([CLS] and [SEP] included), 32 in each band of 7
token counts, composed from the phrases below with a seeded random generator, in random order.

  make_embed_sentences.py MODEL_DIR [--out FILE]     (needs Hugging Face tokenizers)
"""
import argparse
import os
import random

from tokenizers import Tokenizer

SUBJECTS = ["The committee", "A young engineer", "Our neighbour", "The old lighthouse keeper",
            "Every student in the class", "The city council", "A small team of researchers",
            "My grandmother", "The new manager", "A group of tourists", "The orchestra",
            "The delivery driver", "Two scientists from Norway", "The local bakery",
            "An anonymous donor", "The football coach", "A curious child", "The museum"]
VERBS = ["announced", "discovered", "repaired", "described", "questioned", "celebrated",
         "rebuilt", "photographed", "recommended", "criticised", "organised", "translated",
         "measured", "painted", "rejected", "explained"]
OBJECTS = ["a plan to reduce traffic in the centre", "the broken bridge near the river",
           "an unusual pattern in the weather data", "the history of the railway station",
           "a recipe for bread with walnuts", "the results of the election",
           "a letter written two hundred years ago", "the cost of the new hospital",
           "a melody nobody had heard before", "the rules of an ancient board game",
           "the damage caused by the storm", "a cheaper way to heat old houses"]
CLAUSES = ["after a long discussion on Tuesday evening", "because the deadline was approaching",
           "although most people were sceptical at first", "while the rain kept falling outside",
           "before anyone else had noticed the problem", "with the help of several volunteers",
           "in a short speech at the town hall", "despite the lack of funding",
           "as part of a project that started last spring", "to the surprise of the audience",
           "using only tools that were available in the village",
           "so that future visitors could enjoy it as well"]
TAILS = ["It was the first time this had happened.", "Nobody expected such a quick response.",
         "The newspapers wrote about it for weeks.", "Many questions remain unanswered.",
         "Some of the details are still being checked by independent experts.",
         "The next meeting is planned for the end of the month."]


def sentence(rng):
    parts = [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)]
    for _ in range(rng.randint(0, 3)):
        parts.append(rng.choice(CLAUSES))
    s = " ".join(parts) + "."
    for _ in range(rng.randint(0, 2)):
        s += " " + rng.choice(TAILS)
    if rng.random() < 0.3:
        words = s.split()
        s = " ".join(words[: rng.randint(3, max(3, len(words) // 3))]) + "."
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "embed_sentences.txt"))
    a = ap.parse_args()
    tok = Tokenizer.from_file(os.path.join(a.model_dir, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()  # tokenizer.json pads to 128
    rng = random.Random(2026)
    bands = {lo: [] for lo in range(8, 64, 7)}  # 8-14, 15-21, ..., 57-63 (and 64 with the last)
    seen = set()
    while any(len(v) < 32 for v in bands.values()):
        s = sentence(rng)
        n = len(tok.encode(s).ids)
        if s in seen or not 8 <= n <= 64:
            continue
        lo = min(8 + (n - 8) // 7 * 7, 57)
        if len(bands[lo]) < 32:
            bands[lo].append(s)
            seen.add(s)
    out = [s for v in bands.values() for s in v]
    rng.shuffle(out)
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {len(out)} sentences to {a.out}")


if __name__ == "__main__":
    main()
