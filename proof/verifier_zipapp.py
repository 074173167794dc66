"""The offline verifier as one file for the regulator: `erasure-verify.pyz`, a zipapp (PEP 441) of
`proof/verify/` and the wire format it reads (`wire/`) that runs `python -m proof.verify`'s command,
with nothing but Python and `cryptography`.

    python erasure-verify.pyz PACK --engine-key PUB --dpo-key PUB --audit-key PUB [--json]

`make verifier` writes it to dist/; `erasure export` writes it beside the pack. Same sources, same
bytes: entries are sorted, stored uncompressed, with a fixed time and mode, so anyone can rebuild it
from a checkout with any Python 3 and compare digests.
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

VERIFIER_ZIPAPP = "erasure-verify.pyz"
DPO_SIGNER_ZIPAPP = "erasure-dpo-sign.pyz"
"""The DPO's standalone signer (`proof.verify.signer`), the same package with another entry point."""
_SOURCES = Path(__file__).parent
_ROOT = _SOURCES.parent
_SHEBANG = b"#!/usr/bin/env python3\n"


def _members(entry: str) -> list[tuple[str, bytes]]:
    """(name in the archive, bytes): the verifier package, its parent's (empty) __init__, the wire
    format package, and a __main__ that runs `entry`'s `main`."""
    files = [
        _SOURCES / "__init__.py",
        *sorted((_SOURCES / "verify").glob("*.py")),
        *sorted((_ROOT / "wire").glob("*.py")),
    ]
    members = [(p.relative_to(_ROOT).as_posix(), p.read_bytes()) for p in files]
    main = f"import sys\n\nfrom {entry} import main\n\nsys.exit(main())\n".encode()
    return sorted([*members, ("__main__.py", main)])


def verifier_zipapp() -> bytes:
    """The bytes of erasure-verify.pyz, built from the verifier's sources."""
    return _zipapp("proof.verify.command")


def dpo_signer_zipapp() -> bytes:
    """The bytes of erasure-dpo-sign.pyz: the same sources, run as the DPO's signer."""
    return _zipapp("proof.verify.signer")


def _zipapp(entry: str) -> bytes:
    out = io.BytesIO()
    out.write(_SHEBANG)
    with zipfile.ZipFile(out, "w") as z:
        for name, data in _members(entry):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED  # deflate's bytes vary with the zlib version
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    return out.getvalue()


def main(argv: list[str]) -> int:
    """`python -m proof.verifier_zipapp OUT`: write erasure-verify.pyz to OUT (mode 0755)."""
    if len(argv) != 1:
        sys.stderr.write("usage: python -m proof.verifier_zipapp OUT.pyz\n")
        return 2
    target = Path(argv[0])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(verifier_zipapp())
    target.chmod(0o755)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
