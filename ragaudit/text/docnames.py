"""Document and knowledge-base names: validation at the edge, the matching key, safe display.

A document is identified by ``(knowledge_base, name)``. The name is kept as given (shown to
users) but matched by its key: Unicode NFC (UAX #15), so "Säckinger.pdf" typed with a
combining diaeresis (NFD, as macOS file systems store it) and with the precomposed letter name
the same document. Names are validated before anything is stored, with the same limits on
SQLite and PostgreSQL (PostgreSQL refuses NUL in text; columns are varchar(512)/(128)).
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import PurePosixPath, PureWindowsPath

MAX_NAME_CHARS = 255
MAX_KB_CHARS = 128
# Cc: C0/C1 controls incl. NUL, tab, newline; Zl/Zp: line/paragraph separators; Cs: lone surrogates
_FORBIDDEN_CATEGORIES = {"Cc", "Zl", "Zp", "Cs"}


class InvalidNameError(ValueError):
    """A document or knowledge-base name that cannot be stored; the message says why."""


def name_key(name: str) -> str:
    """The matching key of a document name: its NFC normal form (no case folding:
    ``Report.pdf`` and ``report.pdf`` are different files on most systems)."""
    return unicodedata.normalize("NFC", name)


def _check(value: str, what: str, limit: int) -> str:
    if not value:
        raise InvalidNameError(f"{what} is empty")
    for i, ch in enumerate(value):
        if unicodedata.category(ch) in _FORBIDDEN_CATEGORIES:
            raise InvalidNameError(f"{what} contains a control character (U+{ord(ch):04X}) at position {i + 1}")
    n = len(name_key(value))
    if n > limit:
        raise InvalidNameError(f"{what} is {n} characters long; the limit is {limit}")
    return value


def validate_name(name: str) -> str:
    """Return ``name`` stripped of surrounding blanks, or raise ``InvalidNameError`` (a ``ValueError``)
    when it is empty, longer than ``MAX_NAME_CHARS`` characters (after NFC) or contains a
    control character (NUL, tab, newline, other Cc, line/paragraph separators)."""
    return _check(name.strip(" "), "document name", MAX_NAME_CHARS)


def validate_knowledge_base(kb: str) -> str:
    """As ``validate_name`` for knowledge-base names (limit ``MAX_KB_CHARS``)."""
    return _check(kb.strip(" "), "knowledge base name", MAX_KB_CHARS)


def upload_name(filename: str | None) -> str:
    """The document name of an HTTP upload's file name: its last path component (browsers and
    some clients send ``C:\\Users\\x\\report.pdf`` or ``dir/report.pdf``)."""
    raw = (filename or "").strip(" ")
    base = PureWindowsPath(raw).name if "\\" in raw else PurePosixPath(raw).name
    return base or "upload.pdf"


def folder_names(files: list[tuple[str, str | None]]) -> list[str]:
    """Document names for a batch of files given on the command line.

    ``files``: ``(path, root)`` pairs; ``root`` is the folder argument a file was found in
    (None for a file named directly). A file from a folder is named by its path relative to
    that folder (``branch_alder/report.pdf``); a file named directly by its file name. Names
    that still clash within the batch are extended with parent folders until they differ
    (``a/report.pdf``, ``b/report.pdf``). Separators are ``/`` on every system.
    """

    def parts(path: str, root: str | None) -> list[str]:
        p = os.path.abspath(path)
        if root is not None:
            rel = os.path.relpath(p, os.path.abspath(root))
            if not rel.startswith(".."):
                return rel.split(os.sep)
        return [os.path.basename(p)]

    full = [os.path.abspath(p).split(os.sep)[1:] for p, _ in files]
    names = [parts(p, r) for p, r in files]
    for _ in range(64):
        keys = [name_key("/".join(n)) for n in names]
        clash = {k for k in keys if keys.count(k) > 1}
        if not clash:
            break
        grew = False
        for i, k in enumerate(keys):
            if k in clash and len(names[i]) < len(full[i]):
                names[i] = full[i][-(len(names[i]) + 1) :]
                grew = True
        if not grew:
            break
    return ["/".join(n) for n in names]


def printable(text: str) -> str:
    """``text`` with control and separator characters escaped (``\\n``, ``\\t``, ``\\x00``,
    ``\\u2028``), so one name prints on one line."""
    out = []
    for ch in text:
        if unicodedata.category(ch) in _FORBIDDEN_CATEGORIES:
            out.append(ch.encode("unicode_escape").decode("ascii"))
        else:
            out.append(ch)
    return "".join(out)
