"""A picture pasted into a bystander's message: the message's own text holds the image (a `data:` URI, as
chat clients and markdown paste it), and the image shows the subject's address.

Noticed by the lead after the OCR issue (rule version 6) and taken up on 2026-12-06: the probes decode
the base64 run and read the picture by OCR, while the eraser reads the message as text and sees only
base64; if the probes counted the picture as residue the request could never end (exit 7 on every run).
The message is another person's words (docs/matching.md 7.2): reported, kept byte for byte, never
rewritten. Erased alone in its window through the real CLI and judged by the issue-33 oracle
(tests/oracle33, which knows the planted bytes): no false all clear, no exit 7 on the run and the rerun.
"""

from __future__ import annotations

import base64

import pytest

from probes.documents.images import ocr, tesseract_present
from tests.redteam_documents_plants import Plant, bmp_image
from tests.redteam_documents_run import run_window
from tests.redteam_documents_scenarios import Window, build, bystander


def _png(text: str) -> bytes:
    from io import BytesIO

    from PIL import Image

    buf = BytesIO()
    Image.open(BytesIO(bmp_image(text))).save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.slow
@pytest.mark.skipif(not tesseract_present(), reason="tesseract is not installed (make ocr)")
@pytest.mark.parametrize("form", ["markdown", "html"])
def test_a_picture_of_the_address_inside_a_bystanders_message_ends_and_is_kept(
    prefect_harness: None, tmp_path_factory: pytest.TempPathFactory, form: str
) -> None:
    from prefect.settings import PREFECT_API_URL

    i = 61 if form == "markdown" else 62
    sc = build(i, "bmp", "en_US", 4243, 0, Window())
    assert sc.subject.email is not None
    picture = _png(sc.subject.email)
    assert "@" in (ocr(picture) or "")  # tesseract reads the address back (else this proves nothing)
    uri = "data:image/png;base64," + base64.b64encode(picture).decode()
    body = f"![screenshot]({uri})" if form == "markdown" else f'<p>See the screenshot: <img src="{uri}"></p>'
    message = {
        "source": "chat",
        "source_ref": f"paste-{i:03d}",
        "subject": bystander(i),
        "content": f"Here is what the customer sent us about walnut order {i}: {body} Please check.",
    }
    # the subject's own message (sc.plants[0]) and the bystander's message with the picture in its text
    sc.plants[1:] = [Plant(message, names_subject=True, exact=True, opaque=True)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PREFECT_API_URL", str(PREFECT_API_URL.value()))
        report = run_window(tmp_path_factory.mktemp("image-in-text"), [sc])
    assert not report.problems, "\n".join(map(str, report.problems))
    assert sc.request_id in report.outcomes, report.outcomes
