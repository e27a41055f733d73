"""Synthetic conversational turns for the embedding benchmarks (RFC 14.1).

Made in code from a seed: two people chatting over days about their lives, in turns of the
lengths a chat has (a few words of acknowledgement, a sentence or two, now and then a long
paragraph), so that the model and its padding see what real turns give them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

_NAMES = ("Maya", "Jordan", "Priya", "Tom", "Lena", "Sam", "Aiko", "Diego", "Nora", "Felix")
_PLACES = (
    "Lisbon",
    "the lake house",
    "Osaka",
    "my parents' place",
    "the climbing gym",
    "Denver",
    "the farmers market",
)
_THINGS = (
    "the sourdough starter",
    "my new running shoes",
    "the quarterly report",
    "our kitchen renovation",
    "the puppy",
    "that sci-fi novel",
    "the guitar lessons",
    "my sister's wedding",
    "the tomato plants",
    "the job interview",
    "the broken dishwasher",
    "the marathon training plan",
)
_FEELINGS = ("excited", "exhausted", "nervous", "relieved", "a bit overwhelmed", "really proud", "annoyed")
_WHEN = ("yesterday", "last weekend", "this morning", "on Tuesday", "two weeks ago", "tonight", "next month")
_SHORT = (
    "haha yes",
    "ok sounds good",
    "omg really?",
    "same here",
    "that's amazing!",
    "no way",
    "good luck!!",
    "thanks, you too",
    "lol true",
    "see you then",
)
_SENTENCES = (
    "I finally finished {thing} {when} and I'm {feeling} about it.",
    "{name} and I went to {place} {when}, it was packed but worth it.",
    "Did you ever figure out what to do about {thing}?",
    "Honestly I've been {feeling} since {when}, work has been nonstop.",
    "I keep thinking about {thing}, maybe I should just start over.",
    "We're planning a trip to {place} {when} if the prices drop.",
    "{name} said the trick with {thing} is patience, which I don't have.",
    "How did it go with {thing}? You seemed {feeling} last time we talked.",
    "I tried the recipe you sent {when} and everyone asked for seconds.",
    "My back still hurts from {when}, I think I overdid it at {place}.",
    "Remind me to tell you what {name} said about {thing}.",
    "It rained the whole time at {place} so we mostly stayed in and played cards.",
)


def _sentence(rng: random.Random) -> str:
    return rng.choice(_SENTENCES).format(
        thing=rng.choice(_THINGS),
        when=rng.choice(_WHEN),
        feeling=rng.choice(_FEELINGS),
        name=rng.choice(_NAMES),
        place=rng.choice(_PLACES),
    )


def turn(rng: random.Random) -> str:
    """One turn: a quarter short acknowledgements, most one to three sentences, and one in
    ten a paragraph of six to fourteen sentences (up to about 250 tokens)."""
    roll = rng.random()
    if roll < 0.25:
        return rng.choice(_SHORT)
    n = rng.randint(6, 14) if roll > 0.9 else rng.randint(1, 3)
    return " ".join(_sentence(rng) for _ in range(n))


def turns(count: int, seed: int = 37) -> Iterator[str]:
    """``count`` turns from ``seed``: the same texts in every run."""
    rng = random.Random(seed)
    for _ in range(count):
        yield turn(rng)


_ASKS = (
    "what did we say about",
    "when did I mention",
    "remind me how it went with",
    "who told me about",
    "do you remember",
    "what was the plan for",
)


def question(rng: random.Random) -> str:
    """A question about the chat, as an agent asks its memory before a turn: rarely the same
    twice, so that a server's cache of recent query vectors seldom answers it."""
    return f"{rng.choice(_ASKS)} {_sentence(rng).rstrip('.?!').lower()}?"
