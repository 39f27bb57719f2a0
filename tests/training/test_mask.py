"""The assistant mask by bisection is transformers' walk over the tokens, on random offsets and spans."""

from __future__ import annotations

import random

from chatjinja.training.encode import _walked_mask, assistant_mask


def _random_case(rng: random.Random, ordered: bool) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    offsets, position = [], 0
    for _ in range(rng.randint(0, 40)):
        start = position + rng.choice((0, 0, 1, 2))  # touching, repeated (several tokens of one character) and empty tokens
        end = start + rng.choice((0, 1, 1, 2, 3))
        offsets.append((start, end))
        position = max(position, end if rng.random() < 0.8 else start)
    if not ordered and offsets:
        offsets[rng.randrange(len(offsets))] = (0, 0)  # a pad token, as padding leaves it
    spans, position = [], 0
    for _ in range(rng.randint(0, 4)):
        start = position + rng.randint(0, 8)
        end = start + rng.randint(0, 10)
        if spans and rng.random() < 0.2:  # one starting inside the one before (nested generation blocks), or ending first
            start = rng.randint(0, spans[-1][1])
            end = max(start, spans[-1][1] + rng.randint(-2, 4))
        spans.append((start, end))
        position = end
    return offsets, spans


def test_bisection_is_the_walk() -> None:
    rng = random.Random(22)
    bisected = 0
    for number in range(20000):
        offsets, spans = _random_case(rng, ordered=number % 4 != 0)
        length = len(offsets) + rng.choice((0, 0, 3))  # the walk leaves the tokens past the offsets unmasked
        expected = _walked_mask([0] * length, offsets, spans)
        assert assistant_mask(offsets, spans, length) == expected, (offsets, spans)
        bisected += any(expected)
    assert bisected > 5000  # most cases mask something: the bisection, not only the empty cases, is compared
