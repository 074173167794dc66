"""One scenario of the issue-33 red team: a subject, and one attack of one family bullet (`build`).

Every scenario has its own subject (id, email, name, phone, all distinct in a window), the subject's own
chat item, and the attack's plants (see tests/redteam_documents_plants.py for the writers). Names come
from a seeded Faker locale, unless the attack needs a name of its kind (an apostrophe, a CJK name, a name
of everyday words, two syllables that glue into a word).
"""

from __future__ import annotations

import hashlib
import io
import json
import urllib.parse
from typing import Any

import brotli
import lz4.frame
import zstandard

from tests.oracle33.match import Person33, fold
from tests.redteam_documents_plants import (
    APOSTROPHE_NAMES,
    CJK_LOCALES,
    CJK_SENTENCE,
    EVERYDAY,
    FAMILIES,
    GLUED,
    LOCALES,
    Plant,
    Scenario,
    bmp_image,
    docx_runs,
    faker_name,
    image_with_metadata,
    latin1,
    opaque_bytes,
    pdf_kerned,
    punycode_domain,
    request_name,
    rtf_escaped,
    sqlite_freed,
)

LATIN = ("en_US", "de_DE", "fr_FR", "es_ES", "pl_PL", "tr_TR", "cs_CZ", "vi_VN")
SPACED = tuple(loc for loc in LOCALES if loc not in (*CJK_LOCALES, "th_TH"))
IDN_LABELS = ("bücher", "café", "ñandú", "жизнь", "例え", "ελληνικά", "müller-shop", "δοκιμή")
ARABIC_DIGITS = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
PERSIAN_DIGITS = str.maketrans("0123456789", "۰۱۲۳۴۵۶۷۸۹")


def bystander(i: int, k: int = 0) -> dict[str, str]:
    """The bystander of scenario i (k: a second one)."""
    return {"id": f"byst-{i:03d}-{k}", "email": f"desk{i:03d}.{k}@helpdesk.example", "name": "Bob Marsh"}


def _item(i: int, k: int, owner: dict[str, str], content: str, ref: str | None = None) -> dict[str, Any]:
    return {"source": "chat", "source_ref": ref or f"plant-{i:03d}-{k}", "subject": owner, "content": content}


def _mention(i: int, text: str, k: int = 0, exact: bool = False, names: bool = True) -> Plant:
    return Plant(_item(i, k, bystander(i, k), text), names_subject=names, exact=exact)


def _attached(i: int, filename: str, data: bytes, *, opaque: bool = False, owner: str = "bystander") -> Plant:
    it = _item(i, 0, bystander(i), f"Attached the file you asked for (walnut order {i}).")
    return Plant(it, names_subject=True, exact=False, attachment=(filename, data), opaque=opaque)


def _pick(table_len: int, variant: int, taken: set[int]) -> int:
    for d in range(table_len):
        k = (variant + d) % table_len
        if k not in taken:
            taken.add(k)
            return k
    raise ValueError("more scenarios of a fixed-name attack than names in its table")


class Window:
    """What the scenarios of one window share: names and table rows already taken."""

    def __init__(self) -> None:
        self.names: set[tuple[str, ...]] = set()
        self.taken: dict[str, set[int]] = {}

    def fresh(self, locale: str, seed: int) -> tuple[str, str]:
        for n in range(40):
            given, family = faker_name(locale, seed + 7919 * n)
            key = (fold(given)[0], fold(family)[0])
            if key not in self.names and key[0] != key[1]:
                self.names.add(key)
                return given, family
        raise ValueError(f"no fresh {locale} name")


def build(i: int, attack: str, locale: str, seed: int, variant: int, window: Window) -> Scenario:
    """Scenario i: attack `attack` (a key of FAMILIES), names from `locale` where the attack allows."""
    assert attack in FAMILIES, attack
    if attack in ("cjk-space", "cjk-in-text") and locale not in CJK_LOCALES:
        locale = CJK_LOCALES[seed % 3]
    elif attack in ("middle-name", "html-table", "xml-fields") and locale not in SPACED:
        locale = SPACED[seed % len(SPACED)]
    elif attack in ("apostrophe", "curly-apostrophe", "pdf-kerned") and locale not in LATIN:
        locale = LATIN[seed % len(LATIN)]
    given, family = window.fresh(locale, seed)
    sid, email = f"usr-d-{i:03d}-{seed % 997:03d}", f"client{i:03d}.{seed % 1000:03d}@mail.example"
    phone, spaced = f"+44 20 7946 {i:04d}", True
    taken = window.taken.setdefault(attack, set())
    if attack in ("apostrophe", "curly-apostrophe"):
        family = APOSTROPHE_NAMES[_pick(len(APOSTROPHE_NAMES), variant, taken)]
        if attack == "curly-apostrophe" and variant % 2 == 0:
            family = family.replace("'", "\u2019")
    elif attack == "everyday-words":
        given, family, _ = EVERYDAY[_pick(len(EVERYDAY), variant, taken)]
        locale = "en_US"
    elif attack == "glued-name":
        given, family, _ = GLUED[_pick(len(GLUED), variant, taken)]
        locale = "en_US"
    elif attack == "invoice-number":
        sid = f"{730000 + 37 * i}"
    elif attack == "longer-email":
        email = f"lee.k{i:03d}@acme{i:03d}.example"
    elif attack == "idn-email":
        label = IDN_LABELS[variant % len(IDN_LABELS)]
        domain_u = f"{label}-{i:03d}.example"
        email = f"kunde{i:03d}@" + (domain_u if variant % 2 == 0 else punycode_domain(domain_u))
    elif attack == "cjk-space":
        spaced = variant % 2 == 0
    window.names.add((fold(given)[0], fold(family)[0]))
    name = f"{family} {given}" if attack == "glued-name" else request_name(locale, given, family, spaced)
    subject = Person33(sid, email, given, family, phone, name)
    sc = Scenario(i, attack, locale, subject)
    own = f"Hello, this is {name}: my order {i} of walnut shelves is late."
    sc.plants.append(Plant(_item(i, 0, sc.envelope_subject(), own, f"own-{i:03d}"), names_subject=True, exact=False))
    sc.plants += _plants(sc, given, family, variant, seed, taken)
    return sc


def _open_references(text: str) -> str:
    """Every second letter of `text` as a decimal HTML reference without its `;` (as HTML parsers read)."""
    return "".join(f"&#{ord(c)}" if c.isalpha() and k % 2 else c for k, c in enumerate(text))


def _note(sc: Scenario) -> str:
    s = sc.subject
    return f"Contact sheet\nName: {s.name}\nEmail: {s.email}\nPhone: {s.phone}\nOrder: walnut shelves {sc.i}\n"


def _plants(sc: Scenario, given: str, family: str, variant: int, seed: int, taken: set[int]) -> list[Plant]:
    i, s, a = sc.i, sc.subject, sc.attack
    assert s.email and s.phone and s.name
    written = f"{family}{given}" if sc.locale in CJK_LOCALES else f"{given} {family}"
    if a == "html-tags":
        html = f"<p>Visitor log: <b>{given}</b> <i>{family}</i> signed in at the front desk.</p>"
        if variant % 2:
            return [_attached(i, "visitors.html", f"<html><body>{html}</body></html>".encode())]
        return [_mention(i, html)]
    if a == "html-table":
        html = (
            "<table><tr><th>Given</th><th>Family</th><th>Item</th></tr>"
            f'<tr><td class="given-name">{given}</td><td class="family-name">{family}</td>'
            "<td>walnut shelf</td></tr></table>"
        )
        return [_attached(i, "orders.html", html.encode())] if variant % 2 else [_mention(i, html)]
    if a == "xml-fields":
        xml = (
            f'<?xml version="1.0" encoding="UTF-8"?><contact><givenName lang="x">{given}</givenName>'
            f'<familyName lang="x">{family}</familyName><note>walnut order {i}</note></contact>'
        )
        return [_attached(i, "contact.xml", xml.encode())] if variant % 2 else [_mention(i, xml)]
    if a == "json-fields":
        result = {"tool": "crm.lookup", "result": {"given_name": given, "family_name": family, "tier": "gold"}}
        return [_mention(i, "Tool result: " + json.dumps(result, ensure_ascii=bool(variant % 2)))]
    if a == "middle-name":
        middle = faker_name(sc.locale, seed + 1)[0]
        between = f"{middle[0]}." if variant % 2 else middle
        return [_mention(i, f"Spoke with {given} {between} {family} about the walnut shelves.")]
    if a == "pdf-kerned":
        shown = s.name if latin1(s.name) else s.email
        return [_attached(i, "letter.pdf", pdf_kerned(shown, seed, compress=bool(variant % 2)))]
    if a == "rtf-escapes":
        return [_attached(i, "letter.rtf", rtf_escaped(given, family, s.email))]
    if a == "docx-runs":
        return [_attached(i, "notes.docx", docx_runs(given, family, seed))]
    if a == "idn-email":
        local, _, domain = s.email.partition("@")
        other = domain.encode("ascii").decode("idna") if domain.isascii() else punycode_domain(domain)
        return [_mention(i, f"Forwarded from {local}@{other} about walnut order {i}.")]
    if a == "other-digits":
        national = "0" + s.phone[4:]
        shown = (national if variant % 2 else s.phone).translate(ARABIC_DIGITS if variant < 2 else PERSIAN_DIGITS)
        return [_mention(i, f"رقم الهاتف للتواصل: {shown}")]
    if a == "cjk-space":
        text_name = s.name.replace(" ", "") if " " in s.name else f"{family} {given}"
        return [_mention(i, f"Customer {text_name} called about the parcel.")]
    if a == "apostrophe":
        shown = family.replace("'", "\u2019") if variant % 2 == 0 else family.replace("'", "")
        return [_mention(i, f"Ticket raised by {given} {shown} about a broken shelf.")]
    if a == "email-digest":
        norm = s.email.strip().lower().encode()
        md5, sha1, sha256 = (hashlib.new(h, norm).hexdigest() for h in ("md5", "sha1", "sha256"))
        texts = [
            f'<img src="https://www.gravatar.com/avatar/{md5}?s=80&d=identicon" alt="avatar">',
            f"https://gravatar.com/avatar/{sha256}?size=120",
            f"audience_upload.csv\nhashed_email,segment\n{sha256},walnut-buyers\n",
            f"match_key=sha1:{sha1}; campaign=shelves",
        ]
        return [_mention(i, texts[variant % 4])]
    if a == "at-dot":
        local, _, domain = s.email.partition("@")
        forms = [(" at ", " dot "), (" [at] ", " [dot] "), (" (at) ", " (dot) ")]
        at, dot = forms[variant % 3]
        return [_mention(i, f"Reach the client at {local}{at}{domain.replace('.', dot)} please.")]
    if a in ("zstd", "lz4", "brotli", "7z"):
        data = _note(sc).encode()
        if a == "zstd":
            return [_attached(i, "contact.txt.zst", zstandard.ZstdCompressor().compress(data))]
        if a == "lz4":
            return [_attached(i, "contact.txt.lz4", lz4.frame.compress(data))]
        if a == "brotli":
            return [_attached(i, "contact.txt.br", brotli.compress(data))]
        import py7zr

        buf = io.BytesIO()
        with py7zr.SevenZipFile(buf, "w") as z:
            z.writestr(data, "contact.txt")
        return [_attached(i, "contacts.7z", buf.getvalue())]
    if a == "bmp":
        return [_attached(i, "scan.bmp", bmp_image(s.email), opaque=True)]
    if a == "image-metadata":
        # blank pixels: the subject only in a PNG text chunk (their name) or a JPEG's EXIF Artist (address)
        if variant % 2:
            return [_attached(i, "photo.jpg", image_with_metadata(s.email, jpeg=True))]
        return [_attached(i, "photo.png", image_with_metadata(s.name, jpeg=False))]
    if a == "high-entropy":
        return [_attached(i, "blob.bin", opaque_bytes(_note(sc).encode(), seed), opaque=True)]
    if a == "sqlite-freed":
        db = sqlite_freed(f"contact {s.email} re order", seed)
        return [Plant(None, names_subject=True, exact=False, store_file=(f"cache-{i:03d}.db", db))]
    if a == "longer-email":
        local, _, domain = s.email.partition("@")
        mary = {"id": f"byst-{i:03d}-0", "email": f"mary-{local}@{domain}", "name": "Mary Lee-Hart"}
        text = f"Write to mary-{local}@{domain} or {local}@{domain}.au about the invoice."
        return [Plant(_item(i, 0, mary, text), names_subject=False, exact=True)]
    if a == "invoice-number":
        numbers = [f"INV-{s.id}05", f"{s.id}0017", f"R{s.id}", f"{s.id}-77"]
        text = f"Invoice {numbers[variant % 4]} for the walnut shelves is paid."
        return [_mention(i, text, exact=True, names=False)]
    if a == "everyday-words":
        sentence = next(e[2] for e in EVERYDAY if e[0] == given)
        return [_mention(i, sentence, exact=True, names=True)]
    if a == "glued-name":
        word = next(g[2] for g in GLUED if g[0] == given)
        return [_mention(i, f"{word} from accounts sent the walnut invoice.", exact=True, names=False)]
    if a == "no-trunk-zero":
        us = {"id": f"byst-{i:03d}-1", "email": f"us{i:03d}@post.example", "phone": f"+1 207 946 {i:04d}"}
        return [
            _mention(i, f"Call her on {s.phone[4:]} after six."),
            Plant(_item(i, 1, us, f"My US line is +1 (207) 946-{i:04d}, evenings."), names_subject=False, exact=True),
        ]
    if a == "curly-apostrophe":
        shown = family.replace("\u2019", "'") if "\u2019" in family else family.replace("'", "\u2019")
        return [_mention(i, f"Delivery note signed by {given} {shown} at the gate.")]
    if a == "cjk-in-text":
        before, after = CJK_SENTENCE[sc.locale]
        return [_mention(i, f"{before}{written.replace(' ', '')}{after}")]
    if a == "bystander-attachment":
        text = f"Minutes: {written} ({s.email}) asked about walnut order {i}.\n"
        return [_attached(i, "minutes.txt", text.encode())]
    if a == "escaped-url":
        # escapes the probes decode and the eraser once did not (docs/matching.md 1.3.4): form encoding, a
        # query key ending in hex digits (`tel=020…` is no quoted-printable `=02`), references without `;`
        links = [
            "https://crm.example/call?tel=" + urllib.parse.quote(s.phone) + "&ref=x%2Fy",
            "https://crm.example/call?ref=%C3%A9&tel=" + urllib.parse.quote("0" + s.phone[4:]),
            f"<p>Contact: {_open_references(written)} &amp; co</p>",
            "https://crm.example/call?tel=" + urllib.parse.quote("0" + s.phone[4:]),
        ]
        return [_mention(i, f"Link: {links[variant % 4]}")]
    if a == "conversation-key":
        # the subject's address, or their number as an SMS bridge keys a thread (5.2: `sms/+44…`)
        theirs = s.email if variant % 2 == 0 else s.phone.replace(" ", "")
        ref = f"{'dm' if variant % 2 == 0 else 'sms'}/{bystander(i)['email']}/{theirs}"
        return [Plant(_item(i, 0, bystander(i), "Thanks, the walnut shelves arrived.", ref), True, False)]
    raise AssertionError(f"no plant for {a}")
