"""Check bench/probes/external/questions.jsonl against the PDFs in pdfs/.

    .venv/bin/python bench/probes/external/check_questions.py [--annotate]

Per record: fields and kinds are valid, ids match their set, each PDF belongs to one set only,
and `evidence` is a substring of pdfplumber `page.extract_text()` (default settings) of that
1-based page after `re.sub(r"\\s+", " ", text).strip()` on both sides. Refuse records must have
null doc/page/evidence. `--annotate` rewrites the file with `also_found_in` (other pages of any
PDF whose text also contains the evidence) and `evidence_extractors` (pdfplumber, plus pypdf if
its page text contains the evidence after the same normalisation). Prints counts per set and
kind and the PDFs' page counts; exits 1 on any error.
"""

import collections
import json
import re
import sys
from pathlib import Path

import pdfplumber

HERE = Path(__file__).resolve().parent
KINDS = {"fact", "identifier", "paraphrase", "table", "multipage", "refuse"}


def norm(s):
    return re.sub(r"\s+", " ", s or "").strip()


def pages(extractor: str) -> dict[str, list[str]]:
    out = {}
    for f in sorted((HERE / "pdfs").glob("*.pdf")):
        if extractor == "pdfplumber":
            with pdfplumber.open(f) as pdf:
                out[f.name] = [norm(p.extract_text()) for p in pdf.pages]
        else:
            import pypdf

            out[f.name] = [norm(p.extract_text()) for p in pypdf.PdfReader(f).pages]
    return out


def main() -> int:
    annotate = "--annotate" in sys.argv
    path = HERE / "questions.jsonl"
    recs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    text = pages("pdfplumber")
    alt = pages("pypdf") if annotate else {}
    errors, doc_sets, ids = [], collections.defaultdict(set), set()
    for r in recs:
        rid = r.get("id", "?")
        if rid in ids:
            errors.append(f"{rid}: duplicate id")
        ids.add(rid)
        if not re.fullmatch(rf"{r.get('set')}-\d{{3}}", rid):
            errors.append(f"{rid}: id does not match set {r.get('set')}")
        if r.get("kind") not in KINDS:
            errors.append(f"{rid}: bad kind {r.get('kind')}")
        for k in ("question", "answer", "source"):
            if not r.get(k):
                errors.append(f"{rid}: missing {k}")
        if r["kind"] == "refuse":
            if r.get("answer") != "REFUSE" or any(r.get(k) is not None for k in ("doc_name", "page", "evidence")):
                errors.append(f"{rid}: refuse record must have answer REFUSE and null doc_name/page/evidence")
            continue
        doc, page, ev = r.get("doc_name"), r.get("page"), norm(r.get("evidence"))
        doc_sets[doc].add(r["set"])
        if doc not in text:
            errors.append(f"{rid}: {doc!r} not in pdfs/")
            continue
        if not isinstance(page, int) or not 1 <= page <= len(text[doc]):
            errors.append(f"{rid}: bad page {page}")
            continue
        if not ev or ev not in text[doc][page - 1]:
            errors.append(f"{rid}: evidence not on {doc} p{page}: {ev!r}")
        if annotate:
            also = [
                {"doc_name": d, "page": i + 1}
                for d, ps in text.items()
                for i, t in enumerate(ps)
                if ev in t and (d, i + 1) != (doc, page)
            ]
            r.pop("also_found_in", None)
            if also:
                r["also_found_in"] = also
            r["evidence_extractors"] = ["pdfplumber"] + (["pypdf"] if ev in alt[doc][page - 1] else [])
    for doc, sets in doc_sets.items():
        if len(sets) > 1:
            errors.append(f"{doc}: used in several sets {sorted(sets)}")
    if annotate and not errors:
        order = [
            "id",
            "doc_name",
            "page",
            "question",
            "answer",
            "evidence",
            "kind",
            "source",
            "note",
            "also_found_in",
            "evidence_extractors",
            "set",
        ]
        recs = [{k: r[k] for k in order if k in r} for r in recs]
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    counts = collections.Counter((r["set"], r["kind"]) for r in recs)
    for s in sorted({r["set"] for r in recs}):
        n = sum(v for (ss, _), v in counts.items() if ss == s)
        kinds = ", ".join(f"{k} {v}" for (ss, k), v in sorted(counts.items()) if ss == s)
        docs = sorted(d for d, ss in doc_sets.items() if s in ss)
        print(f"{s}: {n} questions ({kinds}); {len(docs)} PDFs: {', '.join(docs)}")
    src = collections.Counter("docugami" if r["source"].startswith("docugami") else r["source"] for r in recs)
    print("sources:", dict(src))
    for d, ps in text.items():
        print(f"  {len(ps):4d} pages  {d}")
    print(f"total: {len(recs)} questions, {len(text)} PDFs, {sum(len(p) for p in text.values())} pages")
    for e in errors:
        print("ERROR", e)
    print("OK" if not errors else f"{len(errors)} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
