"""A payload pasted into an item's text (base64 of a picture, a document or text) is reported as someone
else's content when it sits only in other people's live items, and is residue everywhere else.

Found by the lead on 2026-12-06 (tests/redteam/test_redteam_image_in_text.py is the request it broke): a
bystander's message held a picture of the subject's address as a `data:` URI. The probes decode the run
and read the picture; the eraser reads the message as the text it is and cannot rewrite what is inside
the run; the probes counted it as residue, and the request ended in exit 7 on every run. docs/matching.md
7.2: in another person's item, what cannot be rewritten in place is reported. The class: the subject in
any payload pasted as base64 (standard or URL-safe, padded or not, in markdown, HTML or JSON) in live
items of the archive, by its placement: only in others' items (reported), in a live item of the subject
(residue), in no live item (a file of the store: residue), or also written plainly (residue). The oracle
is the placement the test chose, apart from the probes' reading.
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from memory.schema import create
from probes.needles import Needle, NeedleKind
from probes.window_bytes import _pasted_in_others_items, _views
from tests import budget

SUBJECT = "usr-paste-0001"
EMAIL = "ada.pasted@mail.example"
PLACES = ("others", "subjects-own", "no-item", "others-and-plain", "others-erased")


def _store(root: Path, items: list[tuple[str, str | None]], loose: str | None) -> Path:
    """A reference store whose archive holds `items` ((subject id, content), content None: redacted)."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "store").mkdir(parents=True)
    conn = create(root / "store")
    for n, (sid, content) in enumerate(items):
        conn.execute(
            "INSERT INTO raw_archive(archive_uid, source, source_ref, subject_id, content, created_at, erased_at) "
            "VALUES (?, 'chat', ?, ?, ?, '2026-12-01T00:00:00Z', ?)",
            (f"uid-{n}", f"ref-{n}", None if content is None else sid, content, None if content else "2026-12-02"),
        )
    conn.close()
    if loose is not None:
        (root / "store" / "notes.txt").write_text(loose)
    return root / "store"


@settings(max_examples=budget.examples(100), deadline=None)
@given(
    place=st.sampled_from(PLACES),
    words=st.sampled_from(["Contact: ", "Forwarded from ", "cc "]),
    urlsafe=st.booleans(),
    padded=st.booleans(),
    wrap=st.sampled_from(["markdown", "html", "json", "bare", "whole"]),
    bystander=st.from_regex(r"byst-[a-z0-9]{4,8}", fullmatch=True),
)
@example(place="others", words="Contact: ", urlsafe=False, padded=True, wrap="markdown", bystander="byst-0001")
@example(place="others", words="Contact: ", urlsafe=True, padded=False, wrap="whole", bystander="byst-0001")
def test_a_payload_pasted_in_an_item_is_reported_only_where_it_is_someone_elses(
    tmp_path_factory: object, place: str, words: str, urlsafe: bool, padded: bool, wrap: str, bystander: str
) -> None:
    inner = f"{words}{EMAIL} (please call back about the walnut shelves, order 4471)".encode()
    run = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(inner).decode()
    run = run if padded else run.rstrip("=")
    pasted = {
        "markdown": f"see ![note](data:text/plain;base64,{run}) thanks",
        "html": f'<p>see <img src="data:text/plain;base64,{run}"> thanks</p>',
        "json": f'{{"attachment": "{run}", "by": "desk"}}',
        "bare": f"see {run} thanks",
        "whole": run,  # on its page, glued to the columns before and after it (the id, a timestamp)
    }[wrap]
    placed: dict[str, list[tuple[str, str | None]]] = {
        "others": [(bystander, pasted)],
        "subjects-own": [(bystander, pasted), (SUBJECT, pasted)],
        "no-item": [(bystander, "no picture here")],
        "others-and-plain": [(bystander, pasted), (bystander, f"write to {EMAIL} today")],
        "others-erased": [(bystander, None)],
    }
    items = placed[place]
    loose = pasted if place in ("no-item", "others-erased") else None
    tmp = Path(str(tmp_path_factory.mktemp("pasted")))  # type: ignore[attr-defined]
    store = _store(tmp, items, loose)
    needles = [Needle(kind=NeedleKind.identifier, group=0, data=EMAIL.encode(), caseless=True)]
    aside: list[dict[str, set[int]]] = [{}]
    found, _unscanned = _views(
        store, [needles], report_unscanned=False, aside=aside, pasted=_pasted_in_others_items(store, {SUBJECT})
    )
    if place == "others":
        assert found == [set()] and list(aside[0].values()) == [{0}], (found, aside)
        assert all(label.startswith("pasted:") for label in aside[0]), aside
    else:
        assert found == [{0}], (place, found, aside)
