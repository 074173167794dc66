"""`erasure pack ...`: build the engine-signed proof pack, show it, attest it as the DPO, verify it.

`verify` is the same verifier as `python -m proof.verify`; it trusts only the keys given to it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from cli.keys import PassphraseEnvOpt, passphrase_from_env
from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json
from service import pack_files
from service.pack_files import PackError, exception_line, printable

app = typer.Typer(help="Build, show, attest and verify signed proof packs.", no_args_is_help=True)

PackArg = Annotated[Path, typer.Argument(help="The proof.tar.gz (or its evidence directory).", show_default=False)]
EngineKeyOpt = Annotated[
    Path, typer.Option("--engine-key", help="The engine's trusted public key (PEM).", show_default=False)
]


def print_summary(s: dict[str, Any]) -> None:
    """The summary for a person at a terminal. Every string that came from the pack is escaped
    (`service.pack_files.printable`): a pack cannot move the cursor, rewrite a line or hide text."""

    def line(text: str) -> None:
        console.print(printable(text), markup=False, highlight=False, soft_wrap=True)

    def second(when: Any) -> str:  # to the second, in UTC: the pack's times end in Z
        return re.sub(r"\.\d+(?=Z$)", "", str(when))

    line(
        f"request {s['request_id']}  legal basis {s['legal_basis']}  received {second(s['received_at'])}"
        f"  verified {second(s['verified_at'])}"
    )
    v = s["verification"]
    line(
        f"status {s['status']}  ({'all clear' if s['all_clear'] else 'NOT all clear'}: {v['probes']} probes,"
        f" residue {v['residue']}, bystanders {v['bystanders_before']} -> {v['bystanders_after']})"
    )
    table = Table("tier", "status", "before", "after", "residue")
    for row in s["tiers"]:
        table.add_row(
            *(
                printable(str("-" if row[k] is None else row[k]))
                for k in ("tier", "status", "before", "after", "residue")
            )
        )
    console.print(table)
    line("exceptions: " + ("none" if not s["exceptions"] else str(len(s["exceptions"]))))
    for exc in s["exceptions"]:
        line(f"  - {exception_line(exc)}")
    line("out of scope:")
    for item in s["out_of_scope"]:
        line(f"  - {item}")
    receipts = ", ".join(f"{k} {n}" for k, n in s["receipts"].items()) or "none"
    line(f"subprocessor receipts: {receipts}")
    line(
        f"engine key {s['engine_keyid']}"
        + ("" if s["signatures_verified"] else "  (signature NOT checked: pass --engine-key)")
    )
    if s["attested"]:
        line(f"DPO attestation: {s['dpo_keyid']} at {s['attested_at']} (verified with the DPO key given)")
    elif s.get("dpo_attestation") == "not checked":
        line("DPO attestation: present, NOT verified (pass --engine-key and --dpo-key with the trusted keys)")
    else:
        line("DPO attestation: not signed yet (the pack awaits the DPO)")
    if s.get("timestamps") == "engine clock":
        line("times: the engine's own clock (no timestamp authority)")
    elif s.get("timestamps"):
        line("times: RFC 3161 tokens beside the signatures (checked by `erasure pack verify --tsa-root`)")


@app.command()
def build(
    target: Annotated[
        str,
        typer.Argument(
            help="An evidence directory, or a request id (its directory under the evidence root).", show_default=False
        ),
    ],
    key: Annotated[
        Path | None,
        typer.Option(
            "--key", help="The engine's private key (default: the home's keys/engine.pem).", show_default=False
        ),
    ] = None,
    passphrase_env: PassphraseEnvOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Where to write the tar.gz (default: proof.tar.gz in the evidence directory).",
            show_default=False,
        ),
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Sign the evidence of one request with the engine key and write proof.tar.gz (reproducibly)."""
    pack, s = pack_files.build_pack(
        home_of(home), target, key=key, passphrase=passphrase_from_env(passphrase_env), out=out
    )
    if json_out:
        print_json(
            {
                "pack": str(pack),
                "request_id": s["request_id"],
                "status": s["status"],
                "all_clear": s["all_clear"],
                "engine_keyid": s["engine_keyid"],
                "name": s["pack_name"],
            }
        )
        return
    console.print(
        printable(f"wrote {pack}  status {s['status']}  name sha256:{s['pack_name']}"),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def show(
    pack: PackArg,
    engine_key: Annotated[
        Path | None,
        typer.Option(
            "--engine-key", help="Also check the engine signature with this trusted public key.", show_default=False
        ),
    ] = None,
    dpo_key: Annotated[
        Path | None,
        typer.Option(
            "--dpo-key",
            help="Also check the DPO's attestation with this "
            "trusted public key (needs --engine-key); without it the pack "
            "is never called attested.",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """What the DPO reviews: status per tier, exceptions, scope, probes, receipts, keys (no identifiers)."""
    if dpo_key is not None and engine_key is None:
        raise typer.BadParameter("--dpo-key needs --engine-key (the DPO's statement names the engine's key)")
    s = pack_files.review_pack(pack, engine_key=engine_key, dpo_key=dpo_key)
    if json_out:
        print_json(s)
        return
    print_summary(s)


@app.command("attest")
def attest_cmd(
    pack: PackArg,
    key: Annotated[Path, typer.Option("--key", help="The DPO's private key (never the engine's).", show_default=False)],
    engine_key: Annotated[
        Path | None,
        typer.Option("--engine-key", help="The engine's trusted public key (PEM); or --keyring.", show_default=False),
    ] = None,
    keyring: Annotated[
        Path | None,
        typer.Option(
            "--keyring",
            help="The controller's keyring.json instead of --engine-key (the pack's engine key, valid when it"
            " signed; your key must be its current DPO key).",
            show_default=False,
        ),
    ] = None,
    passphrase_env: PassphraseEnvOpt = None,
    yes: Annotated[bool, typer.Option("--yes", help="Attest without asking (after review elsewhere).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing attestation.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """As the DPO: review the pack, then sign the attestation with your own key (rewrites the pack)."""
    if (engine_key is None) == (keyring is None):
        raise typer.BadParameter("give --engine-key or --keyring (one of them)")
    s = pack_files.review_pack(pack, engine_key=engine_key, keyring=keyring)
    if not json_out:
        print_summary(s)
    if not yes and not typer.confirm(f"Attest request {s['request_id']} ({s['status']}) with your key?"):
        raise typer.Abort()
    path, after = pack_files.attest_pack(
        pack,
        key,
        engine_key=engine_key,
        keyring=keyring,
        passphrase=passphrase_from_env(passphrase_env),
        force=force,
    )
    if json_out:
        print_json(
            {
                "pack": str(path),
                "request_id": after["request_id"],
                "dpo_keyid": after["dpo_keyid"],
                "attested_at": after["attested_at"],
                "name": after["pack_name"],
            }
        )
        return
    console.print(
        printable(f"attested {path}  dpo key {after['dpo_keyid']}"),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@app.command("verify")
def verify_cmd(
    pack: PackArg,
    engine_key: Annotated[
        Path | None,
        typer.Option("--engine-key", help="The engine's trusted public key (PEM); or --keyring.", show_default=False),
    ] = None,
    dpo_key: Annotated[
        Path | None,
        typer.Option(
            "--dpo-key", help="The DPO's trusted public key (PEM); required unless --no-dpo.", show_default=False
        ),
    ] = None,
    no_dpo: Annotated[bool, typer.Option("--no-dpo", help="Accept a pack not yet attested by the DPO.")] = False,
    audit_key: Annotated[
        Path | None,
        typer.Option(
            "--audit-key",
            help="Pin the store's audit checkpoint "
            "public key (PEM; `erasure keys audit` prints it); required "
            "unless --no-audit-key.",
            show_default=False,
        ),
    ] = None,
    no_audit_key: Annotated[
        bool,
        typer.Option("--no-audit-key", help="Accept the audit key the pack names (pins nothing; the OK line says so)."),
    ] = False,
    keyring: Annotated[
        Path | None,
        typer.Option(
            "--keyring",
            help="The keyring you pinned (keyring.json), instead of --engine-key and --dpo-key: each"
            " signature's key comes from it and must have been valid when it signed.",
            show_default=False,
        ),
    ] = None,
    tsa_root: Annotated[
        Path | None,
        typer.Option(
            "--tsa-root",
            help="Pin the timestamp authority's root certificate (PEM) the pack's RFC 3161 tokens must chain to"
            " (without it they are not checked, and the OK line says so).",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Verify a pack offline with trusted keys: prints OK, or FAIL: <check>: <why> and exits 1."""
    if keyring is not None and (engine_key is not None or dpo_key is not None):
        raise typer.BadParameter("give either --keyring or --engine-key/--dpo-key, not both")
    if keyring is None and engine_key is None:
        raise typer.BadParameter("--engine-key (or --keyring) is required")
    if dpo_key is None and keyring is None and not no_dpo:
        raise typer.BadParameter("--dpo-key is required (or --no-dpo for a pack awaiting attestation)")
    if audit_key is None and not no_audit_key:
        raise typer.BadParameter("--audit-key is required (or --no-audit-key, which pins nothing)")
    try:
        result = pack_files.verify_pack(
            pack,
            engine_key=engine_key,
            dpo_key=dpo_key,
            require_dpo=not no_dpo,
            audit_key=audit_key,
            keyring=keyring,
            tsa_root=tsa_root,
        )
    except PackError as exc:
        if json_out:
            print_json({"ok": False, "check": exc.check, "error": str(exc)})
        else:
            console.print(printable(f"FAIL: {exc.check}: {exc}"), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    if json_out:
        print_json({"ok": True, **result.as_dict()})
    else:
        console.print(result.line(), markup=False, highlight=False, soft_wrap=True)
