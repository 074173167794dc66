"""`erasure keys ...`: create and rotate the engine's and the DPO's signing keys; show a key's fingerprint.

The DPO's key is meant to be generated on the DPO's own machine: the engine never holds it. Every
key made here is enrolled in its folder's keyring (`keyring.json`: each public key with its role and
validity period), the file a regulator pins; `rotate` retires a role's key and makes a new one current.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json
from erasure.errors import ConfigError
from service import keys

app = typer.Typer(
    help="Create and rotate signing keys (engine, DPO), show key fingerprints and the audit key.",
    no_args_is_help=True,
)


class Role(StrEnum):
    engine = "engine"
    dpo = "dpo"


class Algorithm(StrEnum):
    ecdsa_p256 = "ecdsa-p256"
    ed25519 = "ed25519"


PassphraseEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--passphrase-env",
        metavar="VAR",
        help="Name of an environment variable holding the key's passphrase (never the passphrase "
        "itself on the command line).",
        show_default=False,
    ),
]


def passphrase_from_env(var: str | None) -> str | None:
    """The passphrase held by environment variable `var` (None when no variable is named)."""
    if var is None:
        return None
    value = os.environ.get(var)
    if not value:
        raise ConfigError(f"environment variable {var} is not set or empty: it should hold the passphrase")
    return value


@app.command()
def generate(
    role: Annotated[Role, typer.Option("--role", help="Whose key: the engine's or the DPO's.", show_default=False)],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Directory for the key files (default: the home's keys/ directory).", show_default=False
        ),
    ] = None,
    algorithm: Annotated[Algorithm, typer.Option("--algorithm", help="Key type.")] = Algorithm.ecdsa_p256,
    passphrase_env: PassphraseEnvOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Replace existing key files.")] = False,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Write <role>.pem (PKCS8, mode 0600) and <role>.pub.pem; print the key id (sha256 of the public DER).

    The key is enrolled in the folder's keyring.json as the role's current key, from the next whole
    second (a key it replaces with --force is valid until then); rotate with `erasure keys rotate`."""
    out_dir = out if out is not None else home_of(home).keys_dir
    result = keys.generate(
        out_dir, role.value, algorithm=algorithm.value, passphrase=passphrase_from_env(passphrase_env), force=force
    )
    if json_out:
        print_json(result)
        return
    console.print(
        f"{role.value} key ({result['algorithm']}) keyid {result['keyid']}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"  keyring: {result['keyring']} (valid from {result['valid_from']})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"  private: {result['private_key']} (keep it secret)", markup=False, highlight=False, soft_wrap=True)
    console.print(
        f"  public:  {result['public_key']} (give it to verifiers)", markup=False, highlight=False, soft_wrap=True
    )


@app.command("rotate")
def rotate_key(
    role: Annotated[Role, typer.Option("--role", help="Whose key: the engine's or the DPO's.", show_default=False)],
    keys_dir: Annotated[
        Path | None,
        typer.Option(
            "--keys-dir",
            help="The folder holding <role>.pem, <role>.pub.pem and keyring.json (default: the home's keys/).",
            show_default=False,
        ),
    ] = None,
    algorithm: Annotated[
        Algorithm | None,
        typer.Option("--algorithm", help="The new key's type (default: the retired key's).", show_default=False),
    ] = None,
    passphrase_env: PassphraseEnvOpt = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Retire the role's current key and make a new one current, at the next whole second.

    keyring.json keeps the retired public key, valid until the rotation (packs it signed before then
    still verify with the keyring); the retired private key is removed from the folder and nothing
    signs with it again. Give the new keyring.json to your regulators."""
    where = keys_dir if keys_dir is not None else home_of(home).keys_dir
    r = keys.rotate_key(
        where,
        role.value,
        algorithm=algorithm.value if algorithm is not None else None,
        passphrase=passphrase_from_env(passphrase_env),
    )
    if json_out:
        print_json(r)
        return
    for line in (
        f"{r['role']} key rotated at {r['rotated_at']}",
        f"  retired: {r['retired_keyid']} (valid until {r['rotated_at']})",
        f"  current: {r['keyid']} ({r['algorithm']}) in {r['private_key']}",
        f"  keyring: {r['keyring']} (give it to verifiers)",
        f"  rotation statement: {r['rotation_statement']} (send it with {Path(r['public_key']).name}:"
        " `erasure keys enrol` needs it)",
    ):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


@app.command("enrol")
def enrol_key(
    role: Annotated[Role, typer.Option("--role", help="Whose key: the engine's or the DPO's.", show_default=False)],
    public_key: Annotated[
        Path, typer.Argument(help="The new public key (PEM), rotated on its holder's machine.", show_default=False)
    ],
    rotation: Annotated[
        Path | None,
        typer.Option(
            "--rotation",
            help="The rotation statement `keys rotate` wrote beside the new key (default: <role>.rotation.json"
            " beside PUBLIC_KEY).",
            show_default=False,
        ),
    ] = None,
    keys_dir: Annotated[
        Path | None,
        typer.Option("--keys-dir", help="The keys folder (default: the home's keys/).", show_default=False),
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Make a rotated public key the role's current key in the keyring, from the next whole second.

    For a key rotated elsewhere (the DPO runs `erasure keys rotate --role dpo --keys-dir DIR` on their
    own machine and sends the new dpo.pub.pem with dpo.rotation.json). The rotation statement must be
    signed by the role's current key here (the hand-over) and by the new key (proof of possession):
    anything else is refused. The previous key stays in the keyring, valid until now, and <role>.pub.pem
    here is replaced by the new one. A first key is trusted with `erasure keys trust`."""
    where = keys_dir if keys_dir is not None else home_of(home).keys_dir
    _enrolled(keys.enrol(where, role.value, public_key, rotation), json_out)


def _enrolled(result: dict[str, str], json_out: bool) -> None:
    if json_out:
        print_json(result)
        return
    console.print(
        f"{result['role']} key {result['keyid']} current from {result['valid_from']} in {result['keyring']}"
        f" ({result['trusted']})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@app.command("trust")
def trust_key(
    role: Annotated[Role, typer.Option("--role", help="Whose key: the engine's or the DPO's.", show_default=False)],
    public_key: Annotated[Path, typer.Argument(help="The public key (PEM) to trust.", show_default=False)],
    fingerprint: Annotated[
        str,
        typer.Option(
            "--fingerprint",
            help="The key's id (sha256 of its public DER), read out by its holder (`erasure keys fingerprint`)"
            " and compared by you, in person or by a channel you trust.",
            show_default=False,
        ),
    ],
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Replace a current key of the role that is lost (its window closes now)."),
    ] = False,
    keys_dir: Annotated[
        Path | None,
        typer.Option("--keys-dir", help="The keys folder (default: the home's keys/).", show_default=False),
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Trust a role's FIRST key on your word: no earlier key vouches for it.

    What is trusted: that PUBLIC_KEY is the key whose fingerprint you compared with its holder. Every
    later key of the role is enrolled with `erasure keys enrol` and its rotation statement. Refused while
    the role has a current key, unless --replace (that key is lost)."""
    where = keys_dir if keys_dir is not None else home_of(home).keys_dir
    _enrolled(keys.trust(where, role.value, public_key, fingerprint, replace=replace), json_out)


@app.command()
def fingerprint(
    key: Annotated[Path, typer.Argument(help="A PEM key file, public or private.", show_default=False)],
    passphrase_env: PassphraseEnvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Print a key's id: sha256 of its public key's SubjectPublicKeyInfo DER (as in the pack)."""
    result = keys.fingerprint(key, lambda: passphrase_from_env(passphrase_env))
    if json_out:
        print_json(result)
        return
    console.print(result["keyid"], markup=False, highlight=False, soft_wrap=True)


@app.command("audit")
def audit_key(
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the public key (PEM) to this file.", show_default=False)
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Print the store's audit checkpoint public key (PEM) and its key id: the key a regulator pins with
    `python -m proof.verify --audit-key` (`erasure export` ships it as audit.pub.pem)."""
    result = keys.audit_key(home_of(home).store_dir, out)
    if json_out:
        print_json(result)
        return
    console.print(f"audit checkpoint key {result['keyid']}", markup=False, highlight=False, soft_wrap=True)
    console.print(result["public_key_pem"].rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
