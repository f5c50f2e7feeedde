// HTTP helpers for the ragaudit API (same origin). The API key, when the server requires one,
// is kept in localStorage and sent as X-API-Key on every request.
import { useEffect, useState } from "react";

export const KEY_STORAGE = "ragaudit.apiKey";

export function authHeaders(): Record<string, string> {
  const key = localStorage.getItem(KEY_STORAGE);
  return key ? { "X-API-Key": key } : {};
}

/** The longest question the API takes (``ragaudit.types.QUESTION_MAX_CHARS``). */
export const QUESTION_MAX_CHARS = 4000;

export class ApiError extends Error {
  constructor(public status: number, message: string) {
    super(message);
  }
}

/** A reply's ``detail`` as text: a string as is; FastAPI's validation list as its messages, each
 * with the field it names ("page_max: Value error, page_max (2) is before page_min (5) ..."). */
export function detailText(detail: unknown): string | undefined {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((e) => {
      const loc = Array.isArray(e?.loc) ? e.loc.filter((x: unknown) => x !== "body").join(".") : "";
      return `${loc ? `${loc}: ` : ""}${String(e?.msg ?? JSON.stringify(e))}`;
    }).join("; ");
  }
  return undefined;
}

async function errorOf(r: Response): Promise<ApiError> {
  let msg = `${r.status} ${r.statusText}`;
  try {
    const body = await r.json();
    msg = detailText(body.detail) ?? body.message ?? JSON.stringify(body);
  } catch {
    /* not JSON */
  }
  return new ApiError(r.status, msg);
}

export async function getJSON<T>(path: string): Promise<T> {
  const r = await fetch(path, { headers: authHeaders() });
  if (!r.ok) throw await errorOf(r);
  return r.json();
}

export async function postJSON<T>(path: string, body: unknown): Promise<T> {
  const r = await fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json", ...authHeaders() },
    body: JSON.stringify(body),
  });
  if (!r.ok) throw await errorOf(r);
  return r.json();
}

/** multipart upload with upload progress (fetch has no upload progress; XMLHttpRequest does). */
export function uploadWithProgress<T>(
  path: string,
  form: FormData,
  onProgress: (fraction: number) => void,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", path);
    for (const [k, v] of Object.entries(authHeaders())) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
    xhr.upload.onload = () => onProgress(1);
    xhr.onerror = () => reject(new ApiError(0, "network error"));
    xhr.onload = () => {
      let body: any = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        /* not JSON */
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body as T);
      else reject(new ApiError(xhr.status, body?.detail ?? body?.message ?? `${xhr.status} ${xhr.statusText}`));
    };
    xhr.send(form);
  });
}

// ---- shapes (api/schemas.py) ----
export interface Doc {
  id: string;
  doc_name: string;
  knowledge_base: string;
  pages: number;
  chunk_count: number;
  strategy: string;
  status: string;
  error: string | null;
  ingest_version: number;
}

export interface Retrieved {
  rank: number;
  chunk_id: string;
  document_id?: string | null;
  doc_name: string;
  page_start: number;
  page_end: number;
  text: string;
  score: number;
  // multilingual: a chunk of a document not in English, ranked by the multilingual model in place of vector
  ranks: { vector: number | null; bm25: number | null; multilingual?: number | null; fused?: number | null };
  scores: Record<string, number | null>;
  section?: string;
  strategy?: string | null;
  neighbor_of?: string | null;
  instruction_like?: boolean;
  n?: number;
}

export interface Citation {
  n: number;
  doc_name: string;
  page: number;
  chunk_id: string;
  quote: string;
  verified: boolean;
  /** the quote supports the sentence that carries the citation (numbers, dates, names present) */
  supports?: boolean;
  /** why it supports or what is missing */
  reason?: string;
  /** every page the quote is on (two for a sentence across a page break) */
  pages?: number[];
  [k: string]: unknown;
}

/** A rule of the answer path that fired on this request (retrieval, gate, answer or concise stage). */
export interface FiredRule {
  rule: string;
  stage: string;
  effect: string;
  reason: string;
  details?: Record<string, unknown>;
}

/** The concise answer with what extracted it and how sure it is; null when withheld. */
export interface Concise {
  text: string;
  type: string;
  rule: string;
  confidence: number;
  reason: string;
  sentence: string;
}

export interface Answer {
  query_id: string;
  question: string;
  answer: string;
  concise?: Concise | null;
  rules?: FiredRule[];
  label: string;
  citations: Citation[];
  retrieved: Retrieved[];
  mode: string;
  notes: string[];
  timings_ms: Record<string, number>;
  usage: { model: string; prompt_tokens: number; completion_tokens: number; cost_usd: number };
  cache?: { hit: boolean; original_query_id?: string | null; original_cost_usd?: number | null } | null;
  top_k?: number;
  strategy?: string | null;
  /** OpenTelemetry trace id of the request (null when tracing is off) */
  trace_id?: string | null;
  /** the trace in the tracing UI (RAGAUDIT_TRACE_URL_TEMPLATE) */
  trace_url?: string | null;
}

export interface ScopeIn {
  knowledge_base?: string;
  document_ids?: string[];
  page_min?: number;
  page_max?: number;
  strategy?: string;
}

export const MODES = ["hybrid", "vector", "bm25", "hybrid_rerank"] as const;

/** GET /modes: the retrieval modes the server's settings can run, and why the others cannot. */
export interface Modes {
  available: string[];
  unavailable: Record<string, string>;
}

/** The server's modes (GET /modes); null until loaded. A failed request leaves every mode available:
 * the server still refuses one it cannot run, with the reason. */
export function useModes(): Modes | null {
  const [modes, setModes] = useState<Modes | null>(null);
  useEffect(() => {
    getJSON<Modes>("/modes").then(setModes).catch(() => setModes({ available: [...MODES], unavailable: {} }));
  }, []);
  return modes;
}

// blob: URLs of the stored PDFs opened in this page, by document id (fetched once per page load)
const pdfUrls = new Map<string, string>();

/** Open a stored PDF in a new tab, at `page` when given. A plain link cannot send the API key, so
 * the file is fetched here with X-API-Key and shown from a blob: URL (`#page=N` is read by the
 * browser's PDF viewer) in a frame filling the tab, whose title names the document and page (a tab
 * at the blob: URL itself would be titled by the blob's id). The tab is opened at once, inside the
 * click, so popup blockers allow it; on an error it is closed again and the error (e.g. 401 without
 * a key) is thrown. */
export async function openPdf(documentId: string, page?: number, docName?: string): Promise<void> {
  const tab = window.open("", "_blank");
  try {
    let url = pdfUrls.get(documentId);
    if (!url) {
      const r = await fetch(`/documents/${encodeURIComponent(documentId)}/file`, { headers: authHeaders() });
      if (!r.ok) throw await errorOf(r);
      url = URL.createObjectURL(await r.blob());
      pdfUrls.set(documentId, url);
    }
    const target = page ? `${url}#page=${page}` : url;
    if (!tab) {
      window.open(target, "_blank");
      return;
    }
    const doc = tab.document;
    doc.title = [docName || "PDF", page ? `page ${page}` : ""].filter(Boolean).join(" \u2013 ");
    doc.body.style.margin = "0";
    const frame = doc.createElement("iframe");
    frame.src = target;
    frame.title = doc.title;
    frame.setAttribute("data-testid", "pdf-frame");
    frame.style.cssText = "position:fixed;inset:0;width:100%;height:100%;border:0";
    doc.body.replaceChildren(frame);
  } catch (e) {
    tab?.close();
    throw e;
  }
}
export const STRATEGIES = ["sentence", "heading", "fixed", "semantic"] as const;
