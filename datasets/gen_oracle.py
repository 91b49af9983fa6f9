#!/usr/bin/env python3
"""Writes datasets/oracle.jsonl: 240 varied texts for the llama.cpp oracle
(configs/llamacpp-oracle.yaml). Deterministic (seeded); run it again to get
the same file. The building blocks below were written for evalrun."""
import json
import random

rng = random.Random(20261123)

names = ["Lily", "Tom", "Ben", "Mia", "Sam", "Anna", "Max", "Zoe", "Leo", "Ruby", "Finn", "Ivy", "Omar", "Nina", "Kai"]
animals = ["cat", "dog", "bird", "frog", "bunny", "fox", "duck", "bear", "mouse", "horse", "fish", "owl"]
places = ["park", "forest", "garden", "beach", "river", "hill", "school", "farm", "kitchen", "library", "town", "cave"]
things = ["ball", "kite", "hat", "box", "cake", "book", "boat", "car", "flower", "stone", "map", "key", "drum", "lamp"]
colors = ["red", "blue", "green", "yellow", "pink", "purple", "orange", "brown", "white", "black"]
feelings = ["happy", "sad", "scared", "excited", "tired", "proud", "angry", "surprised", "calm", "shy"]
verbs = ["ran", "jumped", "walked", "looked", "played", "sang", "laughed", "waited", "climbed", "danced", "hid", "swam"]

def sentence():
    n, a, p, t, c, f, v = (rng.choice(x) for x in (names, animals, places, things, colors, feelings, verbs))
    forms = [
        f"{n} {v} to the {p} with a {c} {t}.",
        f"One day, {n} saw a {a} near the {p}.",
        f"The {a} was very {f} because it lost its {t}.",
        f'"Can I play with your {t}?" asked {n}.',
        f'"Yes, you can," said the {a}. "Be careful!"',
        f"{n} felt {f} and {v} all the way home.",
        f"They shared the {c} {t} and became good friends.",
        f"At night, the {a} slept under a big {c} tree.",
        f"Why is the sky {c} today, {n} wondered.",
        f"{n} counted {rng.randint(2, 99)} {a}s by the {p}.",
        f"Mom said, \"It is {rng.randint(1, 12)} o'clock. Time to eat!\"",
        f"The {t} cost {rng.randint(1, 500)} coins, so {n} saved money for {rng.randint(2, 30)} days.",
        f"First {n} {v}, then the {a} {rng.choice(verbs)}, and at last everyone rested.",
        f"{n} and the {a} built a tiny {t} out of sticks; it fell down twice!",
    ]
    return rng.choice(forms)

def story(k):
    return " ".join(sentence() for _ in range(k))

def odd():
    # Text shapes the stories do not have: lists, numbers, code, symbols,
    # spaces and characters outside the vocabulary (byte fallback).
    kind = rng.randrange(8)
    if kind == 0:
        return "\n".join(f"{i + 1}. {rng.choice(things)} ({rng.choice(colors)})" for i in range(rng.randint(3, 8)))
    if kind == 1:
        return ", ".join(str(rng.randint(0, 10 ** rng.randint(1, 7))) for _ in range(rng.randint(5, 20)))
    if kind == 2:
        v = rng.choice(["x", "count", "total"])
        return f"for {v} in range({rng.randint(2, 9)}):\n    print({v} * {rng.randint(2, 9)})\n# done"
    if kind == 3:
        return "  ".join(rng.choice(["!!", "??", "...", "--", "~", "#", "@", "*", "&", "%", "$", "(", ")", "[]", "{}"]) for _ in range(rng.randint(4, 15)))
    if kind == 4:
        return rng.choice(["Café", "naïve", "crème brûlée", "Zürich", "São Paulo", "日本", "🙂", "Ωmega", "ﬁsh", "Ünïcödé"]) + " " + sentence()
    if kind == 5:
        return sentence().upper()
    if kind == 6:
        return "\t" + sentence() + "\n\n   " + sentence() + "   "
    return " ".join(w[::-1] for w in sentence().split())

records = []
for i in range(240):
    r = rng.random()
    if r < 0.55:
        text = story(rng.randint(3, 9))
    elif r < 0.8:
        text = story(rng.randint(1, 3)) + " " + odd()
    else:
        text = odd() + "\n" + story(rng.randint(1, 4))
    records.append({"id": f"oracle-{i + 1:03d}", "text": text})

with open("oracle.jsonl", "w", encoding="utf-8") as f:
    for r in records:
        f.write(json.dumps(r, ensure_ascii=False) + "\n")
