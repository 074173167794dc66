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

from cli.common import HomeOpt, JsonOpt, console, home_of, print_json
from erasure.errors import ConfigError
from proof.keyring import adopt, enroll, enroll_public, keyring_path, rotate, trust_first
from proof.keys import algorithm_of, generate_keypair, keyid, load_private_key, load_public_key
from proof.rotation import MAX_ROTATION_BYTES, KeyNotProven, rotation_file
from proof.tarball import write_atomic
from proof.verify.keyring import format_time

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
    if force:
        adopt(out_dir, role.value)  # the key it replaces keeps its place in the keyring
    files = generate_keypair(
        role.value, out_dir, algorithm=algorithm.value, passphrase=passphrase_from_env(passphrase_env), force=force
    )
    since = enroll(out_dir, role.value, load_public_key(files.public))
    result = {
        "role": role.value,
        "algorithm": files.algorithm,
        "keyid": files.keyid,
        "private_key": str(files.private),
        "public_key": str(files.public),
        "encrypted": passphrase_env is not None,
        "keyring": str(keyring_path(out_dir)),
        "valid_from": format_time(since),
    }
    if json_out:
        print_json(result)
        return
    console.print(
        f"{role.value} key ({files.algorithm}) keyid {files.keyid}", markup=False, highlight=False, soft_wrap=True
    )
    console.print(
        f"  keyring: {result['keyring']} (valid from {result['valid_from']})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"  private: {files.private} (keep it secret)", markup=False, highlight=False, soft_wrap=True)
    console.print(f"  public:  {files.public} (give it to verifiers)", markup=False, highlight=False, soft_wrap=True)


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
    r = rotate(
        where,
        role.value,
        algorithm=algorithm.value if algorithm is not None else None,
        passphrase=passphrase_from_env(passphrase_env),
    )
    result = {
        "role": r.role,
        "retired_keyid": r.retired_keyid,
        "keyid": r.keyid,
        "algorithm": r.algorithm,
        "rotated_at": r.at,
        "keyring": str(r.keyring),
        "private_key": str(r.private),
        "public_key": str(r.public),
        "rotation_statement": str(r.statement),
    }
    if json_out:
        print_json(result)
        return
    for line in (
        f"{r.role} key rotated at {r.at}",
        f"  retired: {r.retired_keyid} (valid until {r.at})",
        f"  current: {r.keyid} ({r.algorithm}) in {r.private}",
        f"  keyring: {r.keyring} (give it to verifiers)",
        f"  rotation statement: {r.statement} (send it with {r.public.name}: `erasure keys enrol` needs it)",
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
    statement = rotation if rotation is not None else rotation_file(public_key.parent, role.value)
    try:
        proof = statement.read_bytes()[: MAX_ROTATION_BYTES + 1]
    except OSError as exc:
        raise KeyNotProven(
            f"no rotation statement at {statement} ({exc.strerror}): a key is enrolled only with the statement"
            f" its holder's `erasure keys rotate` wrote, signed by the current {role.value} key and the new one"
        ) from exc
    kid, at = enroll_public(where, role.value, public_key, proof)
    _enrolled(role.value, kid, format_time(at), where, json_out, "proven by the current key and the new key")


def _enrolled(role: str, kid: str, at: str, where: Path, json_out: bool, how: str) -> None:
    result = {"role": role, "keyid": kid, "valid_from": at, "keyring": str(keyring_path(where)), "trusted": how}
    if json_out:
        print_json(result)
        return
    console.print(
        f"{role} key {kid} current from {at} in {result['keyring']} ({how})",
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
    kid, at = trust_first(where, role.value, public_key, fingerprint, replace=replace)
    how = "trusted on your word: its fingerprint was compared with its holder; no earlier key vouches for it"
    _enrolled(role.value, kid, format_time(at), where, json_out, how)


@app.command()
def fingerprint(
    key: Annotated[Path, typer.Argument(help="A PEM key file, public or private.", show_default=False)],
    passphrase_env: PassphraseEnvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Print a key's id: sha256 of its public key's SubjectPublicKeyInfo DER (as in the pack)."""
    try:
        text = key.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {key}: {exc.strerror}") from exc
    loaded = (
        load_private_key(key, passphrase_from_env(passphrase_env)) if b"PRIVATE KEY" in text else load_public_key(text)
    )
    if json_out:
        print_json({"keyid": keyid(loaded), "algorithm": algorithm_of(loaded)})
        return
    console.print(keyid(loaded), markup=False, highlight=False, soft_wrap=True)


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
    from memory.audit import checkpoint_public_pem

    pem = checkpoint_public_pem(home_of(home).store_dir)
    kid = keyid(load_public_key(pem))
    if out is not None:
        write_atomic(out, pem, 0o644)
    if json_out:
        print_json({"keyid": kid, "algorithm": "ed25519", "public_key_pem": pem.decode("ascii")})
        return
    console.print(f"audit checkpoint key {kid}", markup=False, highlight=False, soft_wrap=True)
    console.print(pem.decode("ascii").rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
