"""An email's digest is found by the decoded views, as the rule finds it (docs/matching.md 4.4: the md5,
sha1 and sha256 hex digests of the lower-cased address match a word equal to them, in any case).

Found by the lead on 2026-12-06, probing the views with the rule's own spellings: a bystander's file that
keys people by `sha256(email)` (an analytics export, a Gravatar URL) holds the subject to the rule, but the
views read a file only around triggers, and an address's trigger was its mailbox: a digest holds none of
it, no window was read, and the verification said nothing was left. The class: any of the three digests,
upper or lower case hex, alone or in a URL, in a plain file or as a SQLite value. The oracle is the
planting: the digest is computed here with hashlib, apart from either side's code.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from probes.views import scan_views
from tests import budget
from tests.views_plant import planted

emails = st.from_regex(r"[a-z]{3,8}\.[a-z]{2,8}[0-9]{0,3}@[a-z]{3,8}\.(org|com|example)", fullmatch=True)


def _found(tmp: Path, text: str, where: str, email: str) -> dict[int, int]:
    store = planted(tmp, text, where, line="visitor,avatar\nbystander-7,{}\n")
    return scan_views(store, [("identifier:email", email)]).found


@settings(max_examples=budget.examples(100), deadline=None)
@given(
    email=emails,
    algo=st.sampled_from(["md5", "sha1", "sha256"]),
    upper=st.booleans(),
    in_url=st.booleans(),
    where=st.sampled_from(["file", "sqlite"]),
)
def test_an_email_digest_is_found(
    tmp_path_factory: object, email: str, algo: str, upper: bool, in_url: bool, where: str
) -> None:
    digest = hashlib.new(algo, email.encode()).hexdigest()
    digest = digest.upper() if upper else digest
    text = f"https://avatars.example/{digest}?s=80" if in_url else digest
    tmp = Path(str(tmp_path_factory.mktemp("digests")))  # type: ignore[attr-defined]
    assert _found(tmp, text, where, email), (algo, where, text)
    # The control: another address's digest.
    assert not _found(tmp, text, where, "no.body@else.example")
