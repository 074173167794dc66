"""The people and notes of the Chroma benchmarks (bench/targets_chroma.py and its server mode): one
subject per person number, each note made of everyday words."""

from __future__ import annotations

from erasure.subject import Subject

WORDS = (
    "parcel",
    "refund",
    "invoice",
    "appointment",
    "clinic",
    "router",
    "boots",
    "ferry",
    "recipe",
    "pension",
    "printer",
    "library",
    "violin",
    "holiday",
    "courier",
    "pharmacy",
    "allergy",
    "lesson",
    "dentist",
    "insurance",
    "mortgage",
    "garden",
    "bicycle",
    "passport",
    "visa",
    "flight",
    "hotel",
    "museum",
    "concert",
    "ticket",
    "warranty",
    "laptop",
    "phone",
    "tablet",
    "charger",
    "kettle",
    "oven",
    "fridge",
)


def person(i: int) -> Subject:
    return Subject(id=f"usr-{i:05d}", email=f"person{i:05d}@example.org", name=f"Person Number{i:05d}")


def text(owner: int, n: int) -> str:
    w = [WORDS[(owner * 7 + n * 13 + k * 5) % len(WORDS)] for k in range(12)]
    return f"Note {n} of person{owner:05d}: " + " ".join(w) + f" item{n}"
