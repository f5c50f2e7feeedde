"""Dump ``ragaudit.ingest.pdf.extract_pages`` output for a set of PDFs, to prove a change to the extractor
keeps its text exactly: run it on the base commit and on the branch, then ``--compare`` the two
dumps (every page's ``text``, ``headings`` and ``extractor``; exit status 1 on any difference).

    python -m bench.extraction_identity --out base.json            # on the base checkout
    python -m bench.extraction_identity --out branch.json          # on the branch
    python -m bench.extraction_identity --compare base.json branch.json

Default PDFs: every PDF under ``../shared/corpus/{pdfs,edge,bad}`` and ``tests/data``, ``samples``
(files that cannot be read are recorded with their error class, which must also match).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__:  # python -m bench.NAME: offline defaults, repository on sys.path (bench/_env.py)
    from ._env import ROOT, SHARED
else:  # python bench/NAME.py
    from _env import ROOT, SHARED


def default_pdfs() -> list[Path]:
    found: list[Path] = []
    for folder in (SHARED / "pdfs", SHARED / "edge", SHARED / "bad", ROOT / "tests" / "data", ROOT / "samples"):
        if folder.exists():
            found.extend(sorted(folder.rglob("*.pdf")))
    seen, out = set(), []
    for p in found:  # the same file under two folders is dumped once (by name and size)
        key = (p.name, p.stat().st_size)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def dump(paths: list[Path]) -> dict:
    from ragaudit.ingest.pdf import extract_pages

    out: dict = {}
    for p in paths:
        t = time.perf_counter()
        try:
            pages = extract_pages(p.read_bytes())
            out[p.name] = {
                "pages": [
                    {
                        "number": pg.number,
                        "text": pg.text,
                        "extractor": pg.extractor,
                        "headings": [list(h) for h in pg.headings],
                    }
                    for pg in pages
                ]
            }
        except Exception as e:  # the error class must match too
            out[p.name] = {"error": type(e).__name__}
        out[p.name]["seconds"] = round(time.perf_counter() - t, 3)
        print(f"{p.name}: {out[p.name]['seconds']} s", file=sys.stderr)
    return out


def compare(a: dict, b: dict) -> list[str]:
    diffs = []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            diffs.append(f"{name}: only in {'base' if name in a else 'branch'}")
            continue
        x = {k: v for k, v in a[name].items() if k != "seconds"}
        y = {k: v for k, v in b[name].items() if k != "seconds"}
        if x == y:
            continue
        if "pages" not in x or "pages" not in y or len(x["pages"]) != len(y["pages"]):
            diffs.append(f"{name}: {x.get('error') or len(x['pages'])} vs {y.get('error') or len(y['pages'])}")
            continue
        for pa, pb in zip(x["pages"], y["pages"]):
            for field in ("text", "headings", "extractor"):
                if pa[field] != pb[field]:
                    diffs.append(f"{name} p{pa['number']} {field} differs")
    return diffs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pdfs", nargs="*", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BASE", "BRANCH"))
    args = ap.parse_args()
    if args.compare:
        a, b = (json.loads(p.read_text()) for p in args.compare)
        diffs = compare(a, b)
        pages = sum(len(v.get("pages", [])) for v in a.values())
        print("\n".join(diffs) or f"identical: {len(a)} files, {pages} pages (text, headings, extractor)")
        sys.exit(1 if diffs else 0)
    data = dump(args.pdfs or default_pdfs())
    text = json.dumps(data, ensure_ascii=False, indent=1)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
