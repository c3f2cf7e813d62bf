"""Regenerate corpus.txt: seeded, grammar-made English-like sentences (no outside text).

Run: python train/data/make_corpus.py > train/data/corpus.txt
"""

from __future__ import annotations

import random

NAMES = ["Ada", "Ben", "Cleo", "Dara", "Eli", "Fern", "Gus", "Hana", "Ivo", "Juno"]
ANIMALS = ["cat", "dog", "fox", "owl", "hare", "crow", "mole", "goat", "seal", "wren"]
ADJECTIVES = ["small", "quiet", "brave", "old", "bright", "sleepy", "clever", "grey", "quick"]
PLACES = [
    "by the river",
    "in the forest",
    "on the hill",
    "near the mill",
    "under the bridge",
    "at the market",
    "in the garden",
    "beside the lake",
    "on the old road",
]
TIMES = [
    "In the morning",
    "At noon",
    "One evening",
    "Before dawn",
    "Later that day",
    "After the rain",
    "On a cold night",
    "When the bells rang",
]
VERBS = [
    "found",
    "carried",
    "watched",
    "followed",
    "painted",
    "counted",
    "lost",
    "built",
    "mended",
    "shared",
]
THINGS = [
    "a lantern",
    "a map",
    "three stones",
    "a red kite",
    "the boat",
    "a basket of apples",
    "a wooden box",
    "the key",
    "a song",
    "some bread",
]
FEELINGS = ["happy", "tired", "curious", "worried", "proud", "hungry", "calm"]


def sentence(rng: random.Random) -> str:
    """One sentence from a small grammar."""
    who = rng.choice([rng.choice(NAMES), f"the {rng.choice(ADJECTIVES)} {rng.choice(ANIMALS)}"])
    kind = rng.randrange(5)
    if kind == 0:
        when, verb, thing, place = (rng.choice(x) for x in (TIMES, VERBS, THINGS, PLACES))
        text = f"{when}, {who} {verb} {thing} {place}."
    elif kind == 1:
        text = f"{who} was {rng.choice(FEELINGS)} and went {rng.choice(PLACES)}."
    elif kind == 2:
        other = rng.choice(NAMES)
        text = f'"Look," said {other}, "{who} {rng.choice(VERBS)} {rng.choice(THINGS)}!"'
    elif kind == 3:
        verb, thing, verb2, thing2 = (rng.choice(x) for x in (VERBS, THINGS, VERBS, THINGS))
        text = f"{who} {verb} {thing} and {verb2} {thing2}."
    else:
        thing, place, feeling = (rng.choice(x) for x in (THINGS, PLACES, FEELINGS))
        text = f"There was {thing} {place}, and {who} felt {feeling}."
    return text[0].upper() + text[1:]


def main(size: int = 40_000, seed: int = 7) -> None:
    """Print paragraphs of about `size` characters in all."""
    rng = random.Random(seed)
    written = 0
    while written < size:
        paragraph = " ".join(sentence(rng) for _ in range(rng.randint(3, 6)))
        print(paragraph + "\n")
        written += len(paragraph) + 2


if __name__ == "__main__":
    main()
