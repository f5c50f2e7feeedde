"""Verify a held-out set's questions.jsonl against the PDFs in its pdfs/ folder.

    .venv/bin/python bench/heldout_check.py [SET_DIR]     # default bench/heldout

SET_DIR is a held-out set folder (`bench/heldout`, `bench/heldout2`) holding `questions.jsonl` and
`pdfs/`; the id prefix is the folder name. Checks every record and exits 1 on any error:

- fields: `id` is `<folder name>-NNN` (`heldout-001`, `heldout2-001`), numbered 001, 002, ... in
  file order; `kind` is one of
  fact | identifier | table | paraphrase | multipage | scoped | refuse; `question` and `answer`
  are non-empty.
- refuse records: `answer` is the literal `REFUSE` and `doc_name`, `page`, `evidence` are null.
- other records: `doc_name` is a file in `pdfs/`, `page` is a 1-based page number of it, and
  `evidence` is a substring of pdfplumber's `page.extract_text()` (default settings) of that page,
  both sides normalised with `re.sub(r"\\s+", " ", text).strip()`.
- multipage records carry `extra_evidence: [{"page": p, "evidence": "..."}]` on a later page of the
  same PDF, each checked the same way; no other kind carries it.
- `also_found_in` equals a fresh computation over every PDF of the set: every other
  (doc_name, page) whose normalised text contains the evidence string, in file and page order;
  absent when there is none.
- scoped records: the sibling document named in `note` exists in `pdfs/`.

Prints counts per kind and per PDF, then `OK` or the errors. Text is read with pdfplumber only;
pdfminer's per-glyph warnings (one PDF of `bench/heldout` has malformed `Tc` operands in its TJ
arrays) are silenced.
"""

import argparse
import collections
import json
import logging
import re
import sys
from pathlib import Path

import pdfplumber

DEFAULT_SET = Path(__file__).resolve().parent / "heldout"
KINDS = ("fact", "identifier", "table", "paraphrase", "multipage", "scoped", "refuse")


def norm(text: str | None) -> str:
    """Whitespace-normalise as the record format prescribes."""
    return re.sub(r"\s+", " ", text or "").strip()


def load_pages(set_dir: Path) -> dict[str, list[str]]:
    """Return {pdf file name: [normalised text of page 1, page 2, ...]} for every PDF in
    ``set_dir/pdfs``."""
    logging.getLogger("pdfminer").setLevel(logging.ERROR)
    pages = {}
    for path in sorted((set_dir / "pdfs").glob("*.pdf")):
        with pdfplumber.open(path) as pdf:
            pages[path.name] = [norm(page.extract_text()) for page in pdf.pages]
    return pages


def occurrences(pages: dict[str, list[str]], evidence: str) -> list[tuple[str, int]]:
    """All (doc_name, 1-based page) whose text contains `evidence`."""
    return [(doc, i + 1) for doc, texts in pages.items() for i, text in enumerate(texts) if evidence in text]


def check_record(rec: dict, number: int, pages: dict[str, list[str]], prefix: str = "heldout") -> list[str]:
    """Return the problems found in one record (empty list when it is valid); ``prefix`` is the
    set's id prefix (its folder name)."""
    rid = rec.get("id")
    errors = []
    if rid != f"{prefix}-{number:03d}":
        errors.append(f"expected id {prefix}-{number:03d}")
    kind = rec.get("kind")
    if kind not in KINDS:
        errors.append(f"bad kind {kind!r}")
    for field in ("question", "answer"):
        if not isinstance(rec.get(field), str) or not rec[field].strip():
            errors.append(f"missing {field}")
    if kind == "refuse":
        if rec.get("answer") != "REFUSE":
            errors.append("refuse answer must be REFUSE")
        for field in ("doc_name", "page", "evidence", "extra_evidence", "also_found_in"):
            if rec.get(field) is not None:
                errors.append(f"refuse record must have no {field}")
        return errors
    doc, page, evidence = rec.get("doc_name"), rec.get("page"), norm(rec.get("evidence"))
    if doc not in pages:
        return errors + [f"{doc!r} is not in pdfs/"]
    if not isinstance(page, int) or not 1 <= page <= len(pages[doc]):
        return errors + [f"page {page!r} outside 1..{len(pages[doc])}"]
    if not evidence or evidence not in pages[doc][page - 1]:
        errors.append(f"evidence not on {doc} p{page}: {evidence!r}")
    extra = rec.get("extra_evidence")
    if kind == "multipage":
        if not extra:
            errors.append("multipage record needs extra_evidence")
        for part in extra or []:
            p, ev = part.get("page"), norm(part.get("evidence"))
            if not isinstance(p, int) or not page < p <= len(pages[doc]):
                errors.append(f"extra_evidence page {p!r} is not a later page of {doc}")
            elif not ev or ev not in pages[doc][p - 1]:
                errors.append(f"extra_evidence not on {doc} p{p}: {ev!r}")
    elif extra is not None:
        errors.append("only multipage records carry extra_evidence")
    expected = [{"doc_name": d, "page": p} for d, p in occurrences(pages, evidence) if (d, p) != (doc, page)]
    if rec.get("also_found_in", []) != expected:
        errors.append(f"also_found_in should be {expected}")
    if kind == "scoped":
        siblings = [d for d in pages if d != doc and d in (rec.get("note") or "")]
        if not siblings:
            errors.append("scoped record's note must name the sibling PDF")
    return errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Verify a held-out set's records against its PDFs.")
    ap.add_argument("set_dir", nargs="?", type=Path, default=DEFAULT_SET, help="set folder (default bench/heldout)")
    set_dir = ap.parse_args(argv).set_dir.resolve()
    questions = set_dir / "questions.jsonl"
    if not questions.is_file() or not (set_dir / "pdfs").is_dir():
        ap.error(f"{set_dir} has no questions.jsonl and pdfs/")
    records = [json.loads(line) for line in questions.read_text(encoding="utf-8").splitlines() if line]
    pages = load_pages(set_dir)
    problems = []
    for number, rec in enumerate(records, start=1):
        problems += [f"{rec.get('id')}: {e}" for e in check_record(rec, number, pages, set_dir.name)]
    kinds = collections.Counter(rec.get("kind") for rec in records)
    print(f"{len(records)} questions: " + ", ".join(f"{k} {kinds[k]}" for k in KINDS))
    per_doc = collections.Counter(rec.get("doc_name") for rec in records if rec.get("kind") != "refuse")
    for doc, texts in pages.items():
        print(f"  {per_doc[doc]:3d} questions  {len(texts):4d} pages  {doc}")
    unused = sorted(set(pages) - set(per_doc))
    if unused:
        problems.append(f"PDFs without questions: {unused}")
    for problem in problems:
        print("ERROR", problem)
    print("OK: every evidence string verified" if not problems else f"{len(problems)} errors")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
