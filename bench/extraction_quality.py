"""Page-text quality on the shared corpus: evidence kept on its page, reading order of columns.

One command:

    .venv/bin/python bench/extraction_quality.py [--pdfs ../shared/corpus/pdfs]
        [--dataset ../shared/corpus/dev_questions.jsonl] [--columns karpukhin2020-dpr.pdf] [--json]

Prints, for ``ragaudit.ingest.pdf.extract_pages``:

- evidence: how many dev-set evidence strings (``evidence``, ``extra_evidence`` and the
  ``also_found_in`` places) occur on their 1-based page, matched as the evaluation matches
  (``ragaudit.evaluate.metrics.contains_evidence``), and which do not;
- column adjacency: for two-column PDFs, of the pairs of consecutive lines inside one column
  (ground truth: pdfplumber's lines of the left and right half of each page, cropped at the
  gutter found by ``ragaudit.ingest.pdf.find_gutter`` or the page middle), how many are adjacent lines of
  the extracted text; the baseline is pdfplumber's default ``extract_text`` in the same run.
"""

from __future__ import annotations

import argparse
import io
import json
import re
from pathlib import Path

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from . import _env
else:  # python bench/NAME.py
    import _env
SHARED = _env.SHARED


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def column_adjacency(data: bytes, texts: list[str]) -> tuple[int, int]:
    """``(adjacent, pairs)``: consecutive in-column line pairs that are consecutive lines of ``texts``
    (the extracted page texts, one per page)."""
    import pdfplumber

    adjacent = pairs = 0
    with pdfplumber.open(io.BytesIO(data), password="") as pdf:
        for page, text in zip(pdf.pages, texts):
            flat = re.sub(r"\s+", "", text)
            mid = page.width / 2
            for x0, x1 in ((0, mid), (mid, page.width)):
                col = page.crop((x0, 0, x1, page.height))
                lines = [re.sub(r"\s+", "", x) for x in (col.extract_text() or "").split("\n") if x.strip()]
                for a, b in zip(lines, lines[1:]):
                    if len(a) < 20 or len(b) < 20:  # figure labels, equation pieces
                        continue
                    pairs += 1
                    # adjacent: line b follows line a with only whitespace between (or a line-end
                    # hyphen that was rejoined)
                    if a + b in flat or (a.endswith("-") and a[:-1] + b in flat):
                        adjacent += 1
            page.close()
    return adjacent, pairs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path, default=SHARED / "pdfs")
    ap.add_argument("--dataset", type=Path, default=SHARED / "dev_questions.jsonl")
    ap.add_argument("--columns", default="karpukhin2020-dpr.pdf,naacl06-shinyama.pdf")
    ap.add_argument("--skip-evidence", action="store_true", help="only measure column reading order")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    _env.need_corpus(args.pdfs, args.dataset)

    import logging

    logging.disable(logging.WARNING)
    import pdfplumber

    from ragaudit.evaluate.metrics import contains_evidence
    from ragaudit.ingest.pdf import extract_pages

    records = [json.loads(x) for x in args.dataset.read_text(encoding="utf-8").splitlines() if x.strip()]
    pages: dict[str, list[str]] = {}

    def page_text(doc: str, page: int) -> str:
        if doc not in pages:
            pages[doc] = [p.text for p in extract_pages((args.pdfs / doc).read_bytes())]
        t = pages[doc]
        return t[page - 1] if 1 <= page <= len(t) else ""

    checked, missing = 0, []
    for r in [] if args.skip_evidence else records:
        if not r.get("doc_name") or r.get("page") is None:
            continue
        places = [(r["doc_name"], r["page"], r["evidence"])]
        places += [(r["doc_name"], x["page"], x["evidence"]) for x in r.get("extra_evidence") or []]
        places += [(x.get("doc_name") or r["doc_name"], x["page"], r["evidence"]) for x in r.get("also_found_in") or []]
        for doc, page, ev in places:
            checked += 1
            if not contains_evidence(page_text(doc, int(page)), ev):
                missing.append({"id": r["id"], "doc_name": doc, "page": page, "evidence": ev})
    columns = {}
    for name in [x for x in args.columns.split(",") if x]:
        data = (args.pdfs / name).read_bytes()
        ours = [p.text for p in extract_pages(data)]
        with pdfplumber.open(io.BytesIO(data), password="") as pdf:
            base = [p.extract_text() or "" for p in pdf.pages]
        a, n = column_adjacency(data, ours)
        b, _ = column_adjacency(data, base)
        columns[name] = {"pairs": n, "adjacent": a, "adjacent_pdfplumber_default": b}
    out = {"evidence_checked": checked, "evidence_missing": missing, "columns": columns}
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    print(f"evidence strings on their page: {checked - len(missing)}/{checked}")
    for m in missing:
        print(f"  missing {m['id']} {m['doc_name']} p.{m['page']}: {m['evidence'][:90]!r}")
    for name, c in columns.items():
        print(
            f"{name}: consecutive in-column line pairs adjacent: {c['adjacent']}/{c['pairs']} "
            f"(pdfplumber default {c['adjacent_pdfplumber_default']})"
        )
    return 0 if not missing else 1


if __name__ == "__main__":
    raise SystemExit(main())
