"""`erasure attest` (the DPO signs) and `erasure export` (the sealed pack for the regulator), and the
requester's notification once a pack is sealed and all clear."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from cli.pack import print_summary
from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json
from erasure.engine_db import Engine
from erasure.errors import InputError
from service import signoff
from service.export import dpo_kit_to, export_to
from service.pack_files import printable


def attest(
    request_id: Annotated[str, typer.Argument(help="The request whose pack the DPO attests.")],
    dpo_key: Annotated[
        Path | None,
        typer.Option("--dpo-key", help="The DPO's private key (PEM), never the engine's.", show_default=False),
    ] = None,
    envelope: Annotated[
        str | None,
        typer.Option(
            "--envelope",
            help="Instead of a key: the line erasure-dpo-sign.pyz printed on the DPO's machine ('-': stdin),"
            " checked against the pinned keys/dpo.pub.pem.",
            show_default=False,
        ),
    ] = None,
    reject: Annotated[
        str | None,
        typer.Option(
            "--reject",
            help="Refuse to attest: the signed rejection erasure-dpo-sign.pyz --reject REASON printed ('-': stdin),"
            " checked against the pinned keys/dpo.pub.pem. Nothing is sent to the requester.",
            show_default=False,
        ),
    ] = None,
    signing_request: Annotated[
        bool,
        typer.Option(
            "--signing-request", help="Only print the signing request the DPO's signer takes (one line), and exit."
        ),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation (scripts).")] = False,
    passphrase_env: Annotated[str | None, typer.Option(help="Env var holding the key passphrase.")] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show the DPO what they sign (per-tier table, exceptions, verification), then add their signature.

    The request must be awaiting attestation; a key equal to the engine's is refused. Once sealed and
    all clear, the requester is notified. A run waiting for the DPO's sign-off in the UI is resumed.
    (A DPO signing on their own machine, with only the pack file, uses `erasure pack attest`.)
    """
    h = home_of(home)
    if signing_request:
        line = signoff.signing_request(h, request_id)
        print_json({"request_id": request_id, "signing_request": line}) if json_out else print(line)
        return
    if sum(x is not None for x in (dpo_key, envelope, reject)) != 1:
        raise InputError("give exactly one of --dpo-key, --envelope, --reject and --signing-request")
    s = signoff.review(h, request_id)
    if not json_out:
        print_summary(s)
    if reject is not None:
        with Engine.session(h.engine_db) as engine:  # the command's engine
            done = signoff.reject(engine, h, request_id, sys.stdin.read() if reject == "-" else reject)
        resume_signoff(request_id, {"decision": "reject", "envelope": ""})
        if json_out:
            print_json({"request_id": request_id, "sealed": False, "rejected": done["reason"]})
        else:
            console.print(f"rejected ({done['reason']}): nothing was sent", markup=False, highlight=False)
        return
    if not yes and not typer.confirm("Sign this attestation as DPO?", default=False):
        raise typer.Abort()
    with Engine.session(h.engine_db) as engine:  # the command's engine
        sealed = signoff.seal(
            engine,
            h,
            request_id,
            dpo_key,
            passphrase=os.environ.get(passphrase_env) if passphrase_env else None,
            envelope=(sys.stdin.read() if envelope == "-" else envelope),
        )
    resume_signoff(request_id, {"decision": "attest", "envelope": ""})
    if json_out:
        print_json(
            {
                "request_id": request_id,
                "sealed": True,
                "pack": sealed["pack"],
                "pack_name": sealed["pack_name"],
                "notified": sealed["all_clear"],
                "outbox": sealed["outbox"],
            }
        )
    else:
        console.print(
            printable(
                f"sealed: {sealed['pack']} (name sha256:{sealed['pack_name']})"
                + ("; requester notified" if sealed["all_clear"] else "; not all clear: requester NOT notified")
            ),
            markup=False,
            highlight=False,
        )


def resume_signoff(request_id: str, answer: dict[str, str]) -> None:
    """Resume the request's run waiting for the DPO in the UI, when a Prefect API is configured (the
    sign-off is done: the run only finishes)."""
    if not os.environ.get("PREFECT_API_URL"):
        return
    from flows.signoff import resume_waiting_run

    if resume_waiting_run(request_id, answer):
        console.print("the run waiting for the DPO's sign-off was resumed", markup=False, highlight=False)


def export(
    request_id: Annotated[
        str | None,
        typer.Argument(
            help="The sealed request to export (with --dpo-kit: a request awaiting the DPO, optional).",
            show_default=False,
        ),
    ] = None,
    to: Annotated[
        Path | None,
        typer.Option("--to", help="Directory to write the pack and VERIFY.md into (new or empty).", show_default=False),
    ] = None,
    dpo_kit: Annotated[
        bool,
        typer.Option(
            "--dpo-kit",
            help="Instead of a sealed pack: the DPO's signing kit (erasure-dpo-sign.pyz, erasure-verify.pyz, the"
            " engine's public key, DPO-SIGN.md) for their own machine; with a request, its pack and signing request.",
        ),
    ] = False,
    dpo_key: Annotated[
        Path | None,
        typer.Option(
            "--dpo-key",
            help="The DPO's trusted public key (PEM) to check the "
            "attestation with (default: the home's keys/dpo.pub.pem).",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into a non-empty directory, replacing the exported files (never through a symbolic link).",
        ),
    ] = False,
    tsa_root: Annotated[
        Path | None,
        typer.Option(
            "--tsa-root",
            help="The timestamp authority's root certificate (PEM) that a pack's RFC 3161 tokens must chain to"
            " (default: $ERASURE_TSA_ROOT); shipped as tsa-root.pem.",
            show_default=False,
        ),
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Write the sealed pack, the public keys and VERIFY.md (a full openssl recipe) for the regulator.

    The pack must verify with the engine's key AND the DPO's trusted key before anything is written.
    The offline verifier goes along as one file (erasure-verify.pyz, run by `python3`). Files go only
    into `--to` (never through a symbolic link); a non-empty `--to` needs `--force`. When the home's
    keys folder has a keyring, the pack must verify against it, keyring.json goes along (VERIFY.md
    pins it), and engine.pub.pem and dpo.pub.pem are the keyring's keys that signed this pack."""
    if to is None:
        raise InputError("--to DIR is required")
    if dpo_kit:
        written = dpo_kit_to(home_of(home), to, request_id, force=force)
        if json_out:
            print_json({"dpo_kit": str(to), "files": written})
        else:
            console.print(printable(f"DPO kit in {to}: {', '.join(written)}"), markup=False, highlight=False)
        return
    if request_id is None:
        raise InputError("give the request id to export (or --dpo-kit)")
    written = export_to(home_of(home), request_id, to, force=force, dpo_key=dpo_key, tsa_root=tsa_root)
    if json_out:
        print_json({"request_id": request_id, "exported_to": str(to), "files": written})
    else:
        console.print(printable(f"exported {request_id} to {to}: " + ", ".join(written)), markup=False, highlight=False)
