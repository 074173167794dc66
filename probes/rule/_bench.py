"""A small benchmark of `Rule.find` on 100 KB texts: `python -m probes.rule._bench`.

Prints the median of 21 runs (after one warm-up) for a text without the person and with the person
planted once (name, email, phone and id), in ASCII and with some typographic quotes (non-ASCII).
"""

from __future__ import annotations

import os
import random
import statistics
import time

from probes.rule import Person, Rule

_VOCAB = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "this",
    "have",
    "are",
    "be",
    "it",
    "not",
    "or",
    "he",
    "she",
    "they",
    "we",
    "you",
    "meeting",
    "project",
    "update",
    "notes",
    "report",
    "agent",
    "memory",
    "store",
    "call",
    "email",
    "phone",
    "number",
    "invoice",
    "order",
    "customer",
    "support",
    "team",
    "data",
    "user",
    "said",
    "will",
    "would",
    "about",
    "announce",
    "fleet",
    "annual",
    "leeway",
]
_PERSON = Person(
    ids=("usr-jd-4471",), emails=("jane.doe@mail.example",), names=("Jane Doe",), phones=("+44 20 7946 0001",)
)
_PLANTED = " Jane Doe (jane.doe@mail.example, +44 20 7946 0001, usr-jd-4471) "


def filler(size: int, seed: int = 1) -> str:
    """About `size` characters of word salad, one line in five with a JSON object, a tag and numbers."""
    rnd = random.Random(seed)
    out: list[str] = []
    total = 0
    while total < size:
        words = " ".join(rnd.choice(_VOCAB) for _ in range(12))
        tail = ' {"k": 12, "v": "x"} <p>para</p> order 1234 5678\n' if rnd.random() < 0.2 else ".\n"
        out.append(words + tail)
        total += len(words) + len(tail)
    return "".join(out)[:size]


def timings_ms(rule: Rule, text: str, runs: int = 21) -> tuple[float, float, float]:
    """The median wall time, the minimum wall time and the median CPU time of `rule.find(text)`, in
    milliseconds (CPU time is the steadier on a shared machine)."""
    rule.find(text)
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        rule.find(text)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall) * 1000, min(wall) * 1000, statistics.median(cpu) * 1000


def main() -> None:
    """Print the table."""
    rule = Rule(_PERSON)
    base = filler(100_000)
    typographic = base.replace("said", "said “so”", 50)
    half = len(base) // 2
    cases = {
        "without the person (ASCII)": base,
        "without the person (with typographic quotes)": typographic,
        "with the person (ASCII)": base[:half] + _PLANTED + base[half:],
        "with the person (with typographic quotes)": typographic[:half] + _PLANTED + typographic[half:],
    }
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; 21 runs each")
    for label, text in cases.items():
        med, low, cpu = timings_ms(rule, text)
        print(
            f"{label:46s} {len(text):7d} chars  wall median {med:7.2f} ms  min {low:7.2f} ms"
            f"  CPU median {cpu:7.2f} ms  {len(rule.find(text))} hits"
        )


if __name__ == "__main__":
    main()
