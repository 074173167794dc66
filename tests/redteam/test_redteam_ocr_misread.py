"""The lead's false all clear on an image: the issue-33 red team's `bmp` attack for scenario 23 plants a
bystander's BMP picture of `client023.242@mail.example`, which Tesseract reads `clientO23.242@mail.example`
(the letter O for the zero). Neither side's rule matched the misread address and the request ended all
clear with the picture in the blob store. Erased alone in its window through the real CLI and judged by
the issue-33 oracle (tests/oracle33, which knows the planted bytes): no false all clear, no exit 7 on the
run and the rerun, the bystander's attachment kept (docs/matching.md 1.5, 7.2)."""

from __future__ import annotations

import pytest

from probes.documents.images import ocr, tesseract_present
from tests.redteam_documents_plants import bmp_image
from tests.redteam_documents_run import run_window
from tests.redteam_documents_scenarios import Window, build


@pytest.mark.slow
@pytest.mark.skipif(not tesseract_present(), reason="tesseract is not installed (make ocr)")
def test_a_picture_of_the_address_read_with_an_o_for_the_zero_is_no_all_clear(
    prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from prefect.settings import PREFECT_API_URL

    sc = build(23, "bmp", "th_TH", 4242, 0, Window())
    assert sc.subject.email == "client023.242@mail.example"
    read = ocr(bmp_image(sc.subject.email)) or ""
    assert sc.subject.email not in read  # the misread this test is about (else it proves nothing)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PREFECT_API_URL", str(PREFECT_API_URL.value()))
        report = run_window(tmp_path_factory.mktemp("ocr-misread"), [sc])
    assert not report.problems, "\n".join(map(str, report.problems))
    assert sc.request_id in report.outcomes, report.outcomes
